/*
 * The QMP client (qmp.h): one JSON object per line each way; events are
 * skipped.  The JSON reader builds a small tree of nodes in an array, enough
 * for QMP replies (no floating point subtleties: counters are integers).
 */
#include "qmp.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "vblk-load.h"

const char *const qstat_bucket_names[QSTAT_BUCKETS] = {
    "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+"
};

/* ---- a small JSON reader ---- */
enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
struct jnode {
    enum jtype t;
    char *key;          /* member name, inside an object */
    char *str;          /* J_STR */
    double num;         /* J_NUM, J_BOOL */
    bool is_uint;       /* J_NUM without sign, fraction or exponent */
    uint64_t u;
    int first, next;    /* first child, next sibling; -1 if none */
};
struct jdoc {
    struct jnode *n;
    int len, cap;
    const char *p;      /* parse position */
    const char *err;
};

static void jdoc_free(struct jdoc *d)
{
    for (int i = 0; i < d->len; i++) {
        free(d->n[i].key);
        free(d->n[i].str);
    }
    free(d->n);
    memset(d, 0, sizeof(*d));
}

static int jnew(struct jdoc *d, enum jtype t)
{
    if (d->len == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        struct jnode *n = realloc(d->n, cap * sizeof(*n));
        if (!n) {
            d->err = "out of memory";
            return -1;
        }
        d->n = n;
        d->cap = cap;
    }
    d->n[d->len] = (struct jnode){ .t = t, .first = -1, .next = -1 };
    return d->len++;
}

static void jspace(struct jdoc *d)
{
    while (isspace((unsigned char)*d->p)) {
        d->p++;
    }
}

/* A string at d->p (after the quote); returns a malloc'd copy, unescaped
 * (\uXXXX outside ASCII becomes '?'). */
static char *jstring(struct jdoc *d)
{
    size_t cap = 16, len = 0;
    char *s = malloc(cap);
    for (;;) {
        if (!s) {
            d->err = "out of memory";
            return NULL;
        }
        char c = *d->p++;
        if (c == '"') {
            s[len] = 0;
            return s;
        }
        if (c == 0 || (unsigned char)c < 0x20) {
            d->err = "unterminated string";
            free(s);
            return NULL;
        }
        if (c == '\\') {
            c = *d->p++;
            switch (c) {
            case '"': case '\\': case '/': break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 0; i < 4; i++, d->p++) {
                    if (!isxdigit((unsigned char)*d->p)) {
                        d->err = "bad \\u escape";
                        free(s);
                        return NULL;
                    }
                    v = v * 16 + (isdigit((unsigned char)*d->p) ? *d->p - '0'
                                  : (tolower((unsigned char)*d->p) - 'a' + 10));
                }
                c = v < 0x80 ? (char)v : '?';
                break;
            }
            default:
                d->err = "bad escape";
                free(s);
                return NULL;
            }
        }
        if (len + 2 > cap) {
            cap *= 2;
            char *t = realloc(s, cap);
            if (!t) {
                free(s);
                s = NULL;
                continue;
            }
            s = t;
        }
        s[len++] = c;
    }
}

static int jvalue(struct jdoc *d, int depth);

/* Members or elements up to the closing bracket; children linked in order. */
static int jcontainer(struct jdoc *d, int self, char close, int depth)
{
    int last = -1;
    jspace(d);
    if (*d->p == close) {
        d->p++;
        return self;
    }
    for (;;) {
        char *key = NULL;
        jspace(d);
        if (close == '}') {
            if (*d->p != '"') {
                d->err = "expected a member name";
                return -1;
            }
            d->p++;
            key = jstring(d);
            if (!key) {
                return -1;
            }
            jspace(d);
            if (*d->p != ':') {
                free(key);
                d->err = "expected ':'";
                return -1;
            }
            d->p++;
        }
        int c = jvalue(d, depth + 1);
        if (c < 0) {
            free(key);
            return -1;
        }
        d->n[c].key = key;
        if (last < 0) {
            d->n[self].first = c;
        } else {
            d->n[last].next = c;
        }
        last = c;
        jspace(d);
        if (*d->p == ',') {
            d->p++;
            continue;
        }
        if (*d->p == close) {
            d->p++;
            return self;
        }
        d->err = close == '}' ? "expected ',' or '}'" : "expected ',' or ']'";
        return -1;
    }
}

static int jvalue(struct jdoc *d, int depth)
{
    if (depth > 32) {
        d->err = "nested too deeply";
        return -1;
    }
    jspace(d);
    const char *p = d->p;
    int i;
    switch (*p) {
    case '{':
    case '[':
        i = jnew(d, *p == '{' ? J_OBJ : J_ARR);
        if (i < 0) {
            return -1;
        }
        d->p++;
        return jcontainer(d, i, *p == '{' ? '}' : ']', depth);
    case '"': {
        d->p++;
        char *s = jstring(d);
        if (!s || (i = jnew(d, J_STR)) < 0) {
            free(s);
            return -1;
        }
        d->n[i].str = s;
        return i;
    }
    case 't': case 'f': case 'n': {
        static const char *const words[] = { "true", "false", "null" };
        for (int w = 0; w < 3; w++) {
            size_t l = strlen(words[w]);
            if (!strncmp(p, words[w], l)) {
                if ((i = jnew(d, w == 2 ? J_NULL : J_BOOL)) < 0) {
                    return -1;
                }
                d->n[i].num = w == 0;
                d->p += l;
                return i;
            }
        }
        break;
    }
    default:
        if (*p == '-' || isdigit((unsigned char)*p)) {
            char *end;
            errno = 0;
            double v = strtod(p, &end);
            if (end == p) {
                break;
            }
            if ((i = jnew(d, J_NUM)) < 0) {
                return -1;
            }
            d->n[i].num = v;
            if (isdigit((unsigned char)*p) && strspn(p, "0123456789") == (size_t)(end - p)) {
                char *uend;
                errno = 0;
                d->n[i].u = strtoull(p, &uend, 10);
                d->n[i].is_uint = errno == 0;
            }
            d->p = end;
            return i;
        }
    }
    d->err = "unexpected character";
    return -1;
}

/* Parse text (one value, maybe followed by blanks); root is node 0. */
static bool json_parse(struct jdoc *d, const char *text)
{
    memset(d, 0, sizeof(*d));
    d->p = text;
    if (jvalue(d, 0) < 0) {
        return false;
    }
    jspace(d);
    if (*d->p) {
        d->err = "text after the JSON value";
        return false;
    }
    return true;
}

static int json_get(const struct jdoc *d, int obj, const char *key)
{
    if (obj < 0 || d->n[obj].t != J_OBJ) {
        return -1;
    }
    for (int c = d->n[obj].first; c >= 0; c = d->n[c].next) {
        if (!strcmp(d->n[c].key, key)) {
            return c;
        }
    }
    return -1;
}

/* ---- x-query-virtio-queue-stats ---- */
static int bad(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return QSTATS_BAD;
}

static bool get_count(const struct jdoc *d, int obj, const char *key, uint64_t *v)
{
    int i = json_get(d, obj, key);
    if (i < 0 || d->n[i].t != J_NUM || !d->n[i].is_uint) {
        return false;
    }
    *v = d->n[i].u;
    return true;
}

int qstats_parse(const char *reply, struct qstats *out, char *err, size_t errlen)
{
    struct jdoc d;
    int ret;
    memset(out, 0, sizeof(*out));
    if (!json_parse(&d, reply)) {
        ret = bad(err, errlen, "not JSON (%s at offset %d)", d.err, (int)(d.p - reply));
        goto out;
    }
    int e = json_get(&d, 0, "error");
    if (e >= 0) {
        int cls = json_get(&d, e, "class"), desc = json_get(&d, e, "desc");
        if (cls >= 0 && d.n[cls].t == J_STR && !strcmp(d.n[cls].str, "CommandNotFound")) {
            ret = QSTATS_ABSENT;
        } else {
            ret = bad(err, errlen, "QMP error %s: %s",
                      cls >= 0 && d.n[cls].t == J_STR ? d.n[cls].str : "?",
                      desc >= 0 && d.n[desc].t == J_STR ? d.n[desc].str : "?");
        }
        goto out;
    }
    int r = json_get(&d, 0, "return");
    if (r < 0 || d.n[r].t != J_ARR) {
        ret = bad(err, errlen, "the reply has no \"return\" list");
        goto out;
    }
    bool seen[QSTAT_MAXQ] = { false };
    for (int q = d.n[r].first; q >= 0; q = d.n[q].next) {
        uint64_t idx;
        if (!get_count(&d, q, "queue-index", &idx) || idx >= QSTAT_MAXQ) {
            ret = bad(err, errlen, "an entry without a valid \"queue-index\" (0..%d)",
                      QSTAT_MAXQ - 1);
            goto out;
        }
        if (seen[idx]) {
            ret = bad(err, errlen, "queue %u reported twice", (unsigned)idx);
            goto out;
        }
        seen[idx] = true;
        struct qstat *s = &out->q[idx];
        static const char *const keys[] = { "completions", "notifications", "suppressed",
                                            "merged" };
        uint64_t *vals[] = { &s->completions, &s->notifications, &s->suppressed, &s->merged };
        for (unsigned k = 0; k < 4; k++) {
            if (!get_count(&d, q, keys[k], vals[k])) {
                ret = bad(err, errlen, "queue %u: \"%s\" missing or not a count",
                          (unsigned)idx, keys[k]);
                goto out;
            }
        }
        int b = json_get(&d, q, "batches");
        unsigned nb = 0;
        for (int c = b >= 0 && d.n[b].t == J_ARR ? d.n[b].first : -1; c >= 0;
             c = d.n[c].next, nb++) {
            if (nb >= QSTAT_BUCKETS || d.n[c].t != J_NUM || !d.n[c].is_uint) {
                break;
            }
            s->batches[nb] = d.n[c].u;
        }
        if (b < 0 || d.n[b].t != J_ARR || nb != QSTAT_BUCKETS) {
            ret = bad(err, errlen, "queue %u: \"batches\" is not a list of %d counts",
                      (unsigned)idx, QSTAT_BUCKETS);
            goto out;
        }
        if (idx + 1 > out->nq) {
            out->nq = idx + 1;
        }
    }
    for (unsigned i = 0; i < out->nq; i++) {
        if (!seen[i]) {
            ret = bad(err, errlen, "queue %u missing from the reply", i);
            goto out;
        }
    }
    ret = QSTATS_OK;
out:
    jdoc_free(&d);
    return ret;
}

void qstats_sub(const struct qstats *a, const struct qstats *b, struct qstats *out)
{
    struct qstats r = { .nq = a->nq };
    for (unsigned i = 0; i < a->nq; i++) {
        const struct qstat *x = &a->q[i], *y = &b->q[i];
        struct qstat *o = &r.q[i];
        o->completions = x->completions - y->completions;
        o->notifications = x->notifications - y->notifications;
        o->suppressed = x->suppressed - y->suppressed;
        o->merged = x->merged - y->merged;
        for (unsigned k = 0; k < QSTAT_BUCKETS; k++) {
            o->batches[k] = x->batches[k] - y->batches[k];
        }
    }
    *out = r;
}

void qstats_total(const struct qstats *s, struct qstat *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < s->nq; i++) {
        out->completions += s->q[i].completions;
        out->notifications += s->q[i].notifications;
        out->suppressed += s->q[i].suppressed;
        out->merged += s->q[i].merged;
        for (unsigned k = 0; k < QSTAT_BUCKETS; k++) {
            out->batches[k] += s->q[i].batches[k];
        }
    }
}

/* ---- the QMP connection ---- */
static int mfd = -1;
static char *buf;
static size_t blen, bcap;

static void qmp_send(const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t n = send(mfd, s + off, len - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("QMP send failed: %s (did QEMU exit?)", strerror(errno));
        }
        off += n;
    }
}

/* The next line from QEMU that is not an event; malloc'd. */
static char *qmp_reply(const char *what)
{
    double deadline = now_s() + opt.timeout;
    for (;;) {
        char *nl = blen ? memchr(buf, '\n', blen) : NULL;
        if (nl) {
            size_t l = nl - buf;
            char *line = malloc(l + 1);
            if (!line) {
                die("out of memory");
            }
            memcpy(line, buf, l);
            line[l] = 0;
            memmove(buf, nl + 1, blen - l - 1);
            blen -= l + 1;
            struct jdoc d;
            bool event = json_parse(&d, line) && json_get(&d, 0, "event") >= 0;
            jdoc_free(&d);
            if (!event) {
                return line;
            }
            free(line);
            continue;
        }
        if (blen + 4096 > bcap) {
            bcap = bcap ? 2 * bcap : 65536;
            if (bcap > (64u << 20) || !(buf = realloc(buf, bcap))) {
                die("QMP reply too long");
            }
        }
        double left = deadline - now_s();
        if (left <= 0) {
            die("timeout (%.1fs) waiting for QEMU's QMP reply to %s", opt.timeout, what);
        }
        struct pollfd pfd = { .fd = mfd, .events = POLLIN };
        int r = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) {
            die("poll: %s", strerror(errno));
        }
        if (got_signal) {
            die("interrupted by signal %d", (int)got_signal);
        }
        if (r <= 0) {
            continue;
        }
        ssize_t n = recv(mfd, buf + blen, bcap - blen, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            die("QEMU closed the QMP connection");
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            die("QMP recv: %s", strerror(errno));
        }
        blen += n;
    }
}

void qmp_attach(int fd)
{
    mfd = fd;
    char *greeting = qmp_reply("the connection (greeting)");
    if (!strstr(greeting, "\"QMP\"")) {
        die("unexpected QMP greeting: %.200s", greeting);
    }
    free(greeting);
    qmp_send("{\"execute\": \"qmp_capabilities\"}\n");
    char *r = qmp_reply("qmp_capabilities");
    if (!strstr(r, "\"return\"")) {
        die("QMP qmp_capabilities failed: %.200s", r);
    }
    free(r);
}

bool qmp_queue_stats(const char *path, struct qstats *out)
{
    char cmd[512], err[256];
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"x-query-virtio-queue-stats\", "
             "\"arguments\": {\"path\": \"%s\"}}\n", path);
    qmp_send(cmd);
    char *r = qmp_reply("x-query-virtio-queue-stats");
    int st = qstats_parse(r, out, err, sizeof(err));
    if (st == QSTATS_BAD) {
        die("x-query-virtio-queue-stats: %s; the reply: %.300s", err, r);
    }
    free(r);
    return st == QSTATS_OK;
}

long long qmp_qom_get_int(const char *path, const char *prop)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"qom-get\", \"arguments\": "
             "{\"path\": \"%s\", \"property\": \"%s\"}}\n", path, prop);
    qmp_send(cmd);
    char *r = qmp_reply("qom-get");
    const char *v = strstr(r, "\"return\":");
    if (!v) {
        die("qom-get %s %s failed: %.300s", path, prop, r);
    }
    long long x = strtoll(v + 9, NULL, 10);
    free(r);
    return x;
}

void qmp_qom_set_int(const char *path, const char *prop, long long v)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"qom-set\", \"arguments\": "
             "{\"path\": \"%s\", \"property\": \"%s\", \"value\": %lld}}\n", path, prop, v);
    qmp_send(cmd);
    char *r = qmp_reply("qom-set");
    if (!strstr(r, "\"return\"")) {
        die("qom-set %s %s %lld failed: %.300s", path, prop, v, r);
    }
    free(r);
}

/* The reply to cmd (one JSON object, no newline), parsed; dies on an error
 * reply.  Returns the index of its "return" member. */
static int qmp_exec(const char *cmd, const char *what, struct jdoc *d)
{
    char line[1024];
    snprintf(line, sizeof(line), "%s\n", cmd);
    qmp_send(line);
    char *r = qmp_reply(what);
    if (!json_parse(d, r)) {
        die("QMP %s: not JSON: %.300s", what, r);
    }
    int e = json_get(d, 0, "error"), ret = json_get(d, 0, "return");
    if (e >= 0 || ret < 0) {
        int desc = json_get(d, e, "desc");
        die("QMP %s failed: %s", what, desc >= 0 && d->n[desc].t == J_STR ? d->n[desc].str : r);
    }
    free(r);
    return ret;
}

void qmp_virtqueue_status(const char *path, unsigned queue, struct vq_status *st)
{
    char cmd[512];
    struct jdoc d;
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"x-query-virtio-queue-status\", "
             "\"arguments\": {\"path\": \"%s\", \"queue\": %u}}", path, queue);
    int ret = qmp_exec(cmd, "x-query-virtio-queue-status", &d);
    if (!get_count(&d, ret, "inuse", &st->inuse) ||
        !get_count(&d, ret, "last-avail-idx", &st->last_avail) ||
        !get_count(&d, ret, "used-idx", &st->used)) {
        die("x-query-virtio-queue-status: no inuse, last-avail-idx or used-idx in the reply");
    }
    jdoc_free(&d);
}

bool qmp_virtio_broken(const char *path)
{
    char cmd[512];
    struct jdoc d;
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"x-query-virtio-status\", "
             "\"arguments\": {\"path\": \"%s\"}}", path);
    int ret = qmp_exec(cmd, "x-query-virtio-status", &d);
    int b = json_get(&d, ret, "broken");
    if (b < 0 || d.n[b].t != J_BOOL) {
        die("x-query-virtio-status: no boolean 'broken' in the reply");
    }
    bool broken = d.n[b].num != 0;
    jdoc_free(&d);
    return broken;
}

void qmp_iops_limit(const char *id, unsigned iops)
{
    char cmd[512];
    struct jdoc d;
    snprintf(cmd, sizeof(cmd), "{\"execute\": \"block_set_io_throttle\", \"arguments\": "
             "{\"id\": \"%s\", \"bps\": 0, \"bps_rd\": 0, \"bps_wr\": 0, \"iops\": %u, "
             "\"iops_rd\": 0, \"iops_wr\": 0}}", id, iops);
    qmp_exec(cmd, "block_set_io_throttle", &d);
    jdoc_free(&d);
}
