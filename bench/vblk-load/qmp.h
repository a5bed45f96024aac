/*
 * The QMP client, and QEMU's own per-virtqueue counters: the fork's
 * x-query-virtio-queue-stats command (absent from the base; its absence is
 * not an error).  Includes a small JSON reader for QMP's replies.
 */
#ifndef VBLK_QMP_H
#define VBLK_QMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One virtqueue's counters, cumulative since the device's last reset.
 * batches: completions per batch, buckets 1, 2-3, 4-7, ..., 64-127, 128+. */
#define QSTAT_BUCKETS 8
#define QSTAT_MAXQ 64
struct qstat {
    uint64_t completions, notifications, suppressed, merged;
    uint64_t batches[QSTAT_BUCKETS];
};
struct qstats {
    unsigned nq;                    /* queues 0..nq-1 reported */
    struct qstat q[QSTAT_MAXQ];
};
extern const char *const qstat_bucket_names[QSTAT_BUCKETS];

enum { QSTATS_OK, QSTATS_ABSENT, QSTATS_BAD };
/* Parse a reply to x-query-virtio-queue-stats (one JSON object).  Returns
 * QSTATS_OK (out filled), QSTATS_ABSENT (the command does not exist), or
 * QSTATS_BAD (err says why). */
int qstats_parse(const char *reply, struct qstats *out, char *err, size_t errlen);
/* out = a - b, queue by queue */
void qstats_sub(const struct qstats *a, const struct qstats *b, struct qstats *out);
/* the sum over all queues, in out->q[0] */
void qstats_total(const struct qstats *s, struct qstat *out);

/* Read QEMU's greeting on the connected socket fd, negotiate capabilities. */
void qmp_attach(int fd);
/* Query the counters of the device at QOM path (dies on a QMP error other
 * than an absent command).  Returns false if QEMU lacks the command. */
bool qmp_queue_stats(const char *path, struct qstats *out);

/* qom-get / qom-set of an integer property (dies on an error). */
long long qmp_qom_get_int(const char *path, const char *prop);
void qmp_qom_set_int(const char *path, const char *prop, long long v);

/* x-query-virtio-queue-status of one queue: requests (split) or
 * descriptors (packed) the device has popped and not completed, and its
 * avail and used indexes.  Dies on an error. */
struct vq_status { uint64_t inuse, last_avail, used; };
void qmp_virtqueue_status(const char *path, unsigned queue, struct vq_status *st);
/* x-query-virtio-status's "broken": QEMU's virtio_error() has run to its
 * end (NEEDS_RESET, the configuration interrupt, then broken, in that
 * order).  Dies on an error. */
bool qmp_virtio_broken(const char *path);
/* block_set_io_throttle on the device with qdev id: at most iops requests
 * per second (0: no limit).  Under qtest the limit's clock is the virtual
 * clock, which does not advance: once the first request has passed, the
 * limit holds every request until it is lifted or a drain releases it. */
void qmp_iops_limit(const char *id, unsigned iops);

#endif
