/*
 * make check: the parser of x-query-virtio-queue-stats replies (qmp.c) on
 * samples written from the command's specification, since the base (and,
 * until it lands, the fork) cannot produce them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qmp.h"
#include "vblk-load.h"

static int failed;

static void expect(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    failed |= !cond;
}

int main(void)
{
    struct qstats s, t;
    struct qstat tot;
    char err[256] = "";

    const char *two =
        "{\"return\": [{\"queue-index\": 0, \"completions\": 1000, \"notifications\": 31, "
        "\"suppressed\": 900, \"merged\": 69, \"batches\": [1, 2, 3, 4, 5, 6, 7, 18446744073709551615]},"
        " {\"merged\": 0, \"batches\": [0,0,0,0,0,0,0,0], \"queue-index\": 1, "
        "\"completions\": 5, \"notifications\": 5, \"suppressed\": 0}]}";
    int r = qstats_parse(two, &s, err, sizeof(err));
    expect(r == QSTATS_OK, "two queues parse");
    expect(s.nq == 2 && s.q[0].completions == 1000 && s.q[0].notifications == 31 &&
           s.q[0].suppressed == 900 && s.q[0].merged == 69 && s.q[1].completions == 5,
           "counters of both queues");
    expect(s.q[0].batches[0] == 1 && s.q[0].batches[6] == 7 &&
           s.q[0].batches[7] == 18446744073709551615ull, "batch histogram, 64-bit counts");
    t = s;
    t.q[0].completions = 1500;
    t.q[1].notifications = 9;
    qstats_sub(&t, &s, &t);
    qstats_total(&t, &tot);
    expect(tot.completions == 500 && tot.notifications == 4 && tot.batches[7] == 0,
           "difference and total");

    r = qstats_parse("{ \"return\": [\n         { \"queue-index\": 0, \"completions\": 65536, "
                     "\"notifications\": 2070,\n           \"suppressed\": 63440, \"merged\": 26,\n"
                     "           \"batches\": [ 4, 2, 0, 12, 1, 2041, 0, 0 ] } ] }", &s, err,
                     sizeof(err));
    expect(r == QSTATS_OK && s.nq == 1 && s.q[0].completions == 65536 &&
           s.q[0].merged == 26 && s.q[0].batches[5] == 2041, "the QAPI schema's example");

    r = qstats_parse("{\"error\": {\"class\": \"CommandNotFound\", \"desc\": "
                     "\"The command x-query-virtio-queue-stats has not been found\"}}",
                     &s, err, sizeof(err));
    expect(r == QSTATS_ABSENT, "CommandNotFound means absent");

    r = qstats_parse("{\"error\": {\"class\": \"GenericError\", \"desc\": "
                     "\"Path '/x' does not refer to a virtio device\"}}", &s, err, sizeof(err));
    expect(r == QSTATS_BAD && strstr(err, "does not refer"), "another error is an error");

    r = qstats_parse("{\"return\": [{\"queue-index\": 0, \"completions\": 1, "
                     "\"notifications\": 1, \"suppressed\": 0, \"merged\": 0, "
                     "\"batches\": [1, 0, 0, 0, 0, 0, 0]}]}", &s, err, sizeof(err));
    expect(r == QSTATS_BAD && strstr(err, "batches"), "seven buckets are refused");

    r = qstats_parse("{\"return\": [{\"queue-index\": 1, \"completions\": 1, "
                     "\"notifications\": 1, \"suppressed\": 0, \"merged\": 0, "
                     "\"batches\": [1, 0, 0, 0, 0, 0, 0, 0]}]}", &s, err, sizeof(err));
    expect(r == QSTATS_BAD && strstr(err, "queue 0 missing"), "a missing queue is refused");

    r = qstats_parse("{\"return\": [{\"queue-index\": 0, \"completions\": -1, "
                     "\"notifications\": 1, \"suppressed\": 0, \"merged\": 0, "
                     "\"batches\": [1, 0, 0, 0, 0, 0, 0, 0]}]}", &s, err, sizeof(err));
    expect(r == QSTATS_BAD && strstr(err, "completions"), "a negative count is refused");

    r = qstats_parse("{\"return\": [], \"id\": \"a\\\"b\\u00e9\"}", &s, err, sizeof(err));
    expect(r == QSTATS_OK && s.nq == 0, "empty list, escapes in other members");

    r = qstats_parse("{\"return\": [{\"queue-index\": 0,", &s, err, sizeof(err));
    expect(r == QSTATS_BAD && strstr(err, "not JSON"), "truncated reply is refused");

    if (!failed) {
        printf("qstats parser: all passed\n");
    }
    return failed;
}
