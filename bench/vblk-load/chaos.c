/*
 * --chaos CASE: vblk-load as a broken or malicious guest (docs/vblk-load.md,
 * "A hostile driver").  Queue 0 of the device does good I/O, checked, in a
 * thread of its own; queue 1 gets one hostile case from the main thread;
 * queue 2 exists but is never set up.  Each case names what QEMU does with
 * it (completes the requests with a status, or marks the device broken
 * through virtio_error(): NEEDS_RESET and a message), and the run asserts
 * exactly that, then that the good queue kept completing, that nothing
 * outside the requested sectors of the disk image changed and that the
 * good queue's blocks hold exactly its last completed writes, that the
 * device stops writing guest RAM (rings, status bytes, data buffers) once
 * a reset reads back 0, that both queues do verified I/O after the reset,
 * and that QEMU stays up and exits cleanly.  The rings are split or packed
 * (--ring); the disk's aio mode is --aio.  The good queue polls its used
 * ring, or with --mode irq waits for its MSI-X messages, so that a lost
 * notification shows as a stalled queue.
 * Exit status: 0 as expected, 1 not, 3 QEMU died, 4 QEMU stopped answering.
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "driver.h"
#include "image.h"
#include "pci.h"
#include "qemu.h"
#include "qmp.h"
#include "qtest.h"
#include "vblk-load.h"
#include "virtio.h"

#define ST_NEEDS_RESET 0x40
#define F_NEXT     VRING_DESC_F_NEXT
#define F_WRITE    VRING_DESC_F_WRITE
#define F_INDIRECT VRING_DESC_F_INDIRECT
#define T_IN  0
#define T_OUT 1
#define T_DISCARD 11
#define T_WRITE_ZEROES 13
#define DWZ_F_UNMAP 1
#define S_OK     0
#define S_IOERR  1
#define S_UNSUPP 2

/* struct virtio_blk_config offsets */
#define CFG_MAX_DISCARD_SEG 40
#define CFG_MAX_WZ_SEG      52

/* The disk: the good queue's region, then sectors the cases use. */
#define IMG_SECTORS  8192       /* 4 MiB */
#define GOOD_SECTORS 2048       /* [0, 1 MiB): queue 0's verified I/O */
#define HS_WRITE     4096       /* where a case may write */
#define HS_READ      6144       /* where cases read from (never written) */
#define IMG_SEED     0xc4a05c4a05ull
/* Guest-physical address with nothing behind it (q35, no RAM above 4G). */
#define NO_RAM       0x8000000000ull

#define MIN_GOOD     16         /* good completions that show a queue works */

#define RING_SPLIT  1
#define RING_PACKED 2
#define RING_BOTH   (RING_SPLIT | RING_PACKED)

/* A case: what it does to queue 1, and what QEMU must do about it. */
struct chaos_case {
    const char *name;
    void (*run)(void);
    unsigned rings;         /* the ring layouts it applies to */
    const char *error;      /* the virtio_error() message, NULL: no error */
    const char *error_packed;   /* on a packed ring, if packed_differs */
    bool packed_differs;
    bool resets;            /* the case resets the device itself */
    int selftest;           /* if not 0: a negative check, which must exit
                               with this status (a check that catches it) */
    const char *expect;     /* a self-test's message must contain this */
    const char *devopts;    /* device properties the case needs */
    const char *what;
};

static const struct chaos_case *cur;
static char img_path[256];
static struct vq *hq;                       /* the hostile queue */
/* its buffers (guest addresses) */
static uint64_t h_hdr, h_st, h_buf, h_ind, h_seg;
static struct sector_range mods[4];         /* what the case may change */
static unsigned nmods;
static char outcome[320];                   /* what QEMU did, for the report */
static char statuses[128];                  /* of queue 1's completed requests */

static bool io_uring_completes_inline(void);
static bool jump_broke;     /* avail-jump with io_uring: which outcome */

static const char *case_error(void)
{
    if (!strcmp(cur->name, "avail-jump") && io_uring_completes_inline()) {
        return jump_broke ? cur->error : NULL;
    }
    if (!strcmp(cur->name, "loop") && hq->size >= 1024) {
        /*
         * One element holds at most 1024 (VIRTQUEUE_MAX_SIZE) buffers.  On
         * a ring of that size the loop fills them before it has more
         * descriptors than the ring, so QEMU stops at the mapping limit,
         * whose message names indirect tables whatever the chain.  (QEMU
         * 10.0.13 gives every ring 1024 entries, whatever queue-size says.)
         */
        return "too many write descriptors";
    }
    return ring_packed && cur->packed_differs ? cur->error_packed : cur->error;
}

/* "iothread on, poll, EVENT_IDX": how the device and the good queue run */
static const char *config_name(void)
{
    static char s[96];
    snprintf(s, sizeof(s), "iothread %s, %s, %s%s%s%s", iothread_label(),
             opt.irq ? "irq" : "poll", opt.event_idx ? "EVENT_IDX" : "no EVENT_IDX",
             ring_packed ? ", packed ring" : "", opt.aio ? ", aio=" : "",
             opt.aio ? opt.aio : "");
    return s;
}

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    die("chaos %s (%s): %s", cur->name, config_name(), msg);
}

static void sleep_s(double s)
{
    usleep((useconds_t)(s * 1e6));
}

/* ---- the good queue: verified random I/O in a thread ---- */
enum { GOOD_RUN, GOOD_DRAIN, GOOD_ABANDON };
struct good {
    unsigned first, last;
    int stop;
    pthread_t tid;
    bool running;
};
static struct good good;

static uint64_t completed(unsigned i)
{
    return __atomic_load_n(&vqs[i].n.all, __ATOMIC_RELAXED);
}

/* One look at queue q (service_queue(), uncounted); returns requests reaped */
static unsigned good_look(struct vq *q, bool stopping)
{
    return service_queue(q, stopping, false);
}

static void *good_loop(void *arg)
{
    struct good *g = arg;
    for (unsigned i = g->first; i < g->last; i++) {
        uint16_t old = vqs[i].avail_idx;
        for (unsigned s = 0; s < opt.depth; s++) {
            submit_slot(&vqs[i], &vqs[i].slots[s]);
        }
        if (opt.irq) {
            arm_irq(&vqs[i]);
        }
        kick_if_needed(&vqs[i], old, false);
    }
    for (unsigned idle = 0;;) {
        int stop = __atomic_load_n(&g->stop, __ATOMIC_ACQUIRE);
        unsigned inflight = 0, n = 0;
        if (stop == GOOD_ABANDON) {
            break;
        }
        for (unsigned i = g->first; i < g->last; i++) {
            n += good_look(&vqs[i], stop == GOOD_DRAIN);
            inflight += vqs[i].inflight;
        }
        if (stop == GOOD_DRAIN && !inflight) {
            break;
        }
        if (n) {
            idle = 0;
        } else if (++idle > 64) {
            sched_yield();
        }
    }
    return NULL;
}

static void good_start(unsigned first, unsigned last)
{
    good = (struct good){ .first = first, .last = last, .stop = GOOD_RUN };
    int e = pthread_create(&good.tid, NULL, good_loop, &good);
    if (e) {
        die("pthread_create: %s", strerror(e));
    }
    good.running = true;
}

/* Stop the good I/O: drain what is in flight (must complete), or abandon
 * it (the device is broken or was reset: a write among it may or may not
 * have reached the disk). */
static void good_stop(bool drain)
{
    if (!good.running) {
        return;
    }
    __atomic_store_n(&good.stop, drain ? GOOD_DRAIN : GOOD_ABANDON, __ATOMIC_RELEASE);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)opt.timeout + 1;
    bool timed_out = pthread_timedjoin_np(good.tid, NULL, &ts) != 0;
    if (timed_out) {
        __atomic_store_n(&good.stop, GOOD_ABANDON, __ATOMIC_RELEASE);
        pthread_join(good.tid, NULL);
    }
    good.running = false;
    if (!drain || timed_out) {
        for (unsigned i = good.first; i < good.last; i++) {
            virtio_abandon(&vqs[i]);
        }
    }
    if (timed_out) {
        fail("the good queue's requests in flight did not complete within %.0fs",
             opt.timeout + 1);
    }
}

/* Wait until queue i has completed n more requests; false after secs. */
static bool good_wait(unsigned i, uint64_t n, double secs)
{
    uint64_t want = completed(i) + n;
    for (double end = now_s() + secs; now_s() < end; sleep_s(0.002)) {
        if (completed(i) >= want) {
            return true;
        }
    }
    return false;
}

/* ---- the hostile queue's ring ---- */

/* One descriptor of a chain; F_NEXT between them is added. */
struct hd { uint64_t addr; uint32_t len; uint16_t flags; };

static uint16_t h_desc_next;        /* split: the next free table entry */
static uint16_t h_taken;            /* used elements the case has accounted for */
static uint16_t h_seen;             /* packed: used elements seen */
static uint16_t h_used_desc;        /* packed: descriptors seen used */
static uint16_t h_next_id;          /* packed: the next buffer id */
static uint16_t h_last_id;          /* packed: the id of the last used element */
static uint16_t h_ndescs[65536];     /* packed: ring descriptors per buffer id */
struct pending { unsigned pos; uint16_t flags; };
static struct pending h_pend[1024]; /* packed: heads not yet made available */
static unsigned h_npend;

/* Is descriptor count i of the hostile ring on an even lap (wrap 1)? */
static bool h_lap_even(uint16_t i)
{
    return !((i / hq->size) & 1);
}

static uint16_t h_avail_bits(uint16_t i)
{
    return h_lap_even(i) ? VRING_PACKED_F_AVAIL : VRING_PACKED_F_USED;
}

/* split: descriptor i of the table, as given */
static void hdesc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
    hq->desc[i] = (struct vdesc){ addr, len, flags, next };
}

/* split: head on the avail ring (published by hpublish) */
static void hpost(uint16_t head)
{
    hq->avail[2 + hq->avail_idx % hq->size] = head;
    hq->avail_idx++;
}

/* packed: descriptor count i; its flags are written last if it is a head */
static void pdesc_put(uint16_t i, uint64_t addr, uint32_t len, uint16_t id, uint16_t flags,
                      bool head)
{
    struct pdesc *d = &hq->pdesc[i % hq->size];
    d->addr = addr;
    d->len = len;
    d->id = id;
    flags |= h_avail_bits(i);
    if (head) {
        h_pend[h_npend++] = (struct pending){ i % hq->size, flags };
    } else {
        __atomic_store_n(&d->flags, flags, __ATOMIC_RELAXED);
    }
}

/*
 * Post a chain of n descriptors, made available at the next hpublish():
 * split, in the next free entries of the table and on the avail ring;
 * packed, at the next ring positions, with buffer id (h_next_id if id < 0).
 * Returns the split head, or the packed buffer id.
 */
static unsigned hchain_id(const struct hd *d, unsigned n, int id)
{
    if (!ring_packed) {
        unsigned head = h_desc_next;
        for (unsigned k = 0; k < n; k++) {
            hdesc(head + k, d[k].addr, d[k].len,
                  d[k].flags | (k + 1 < n ? F_NEXT : 0), k + 1 < n ? head + k + 1 : 0);
        }
        h_desc_next += n;
        hpost(head);
        return head;
    }
    uint16_t bid = id < 0 ? h_next_id++ : (uint16_t)id;
    for (unsigned k = 0; k < n; k++) {
        pdesc_put(hq->avail_idx + k, d[k].addr, d[k].len, bid,
                  d[k].flags | (k + 1 < n ? F_NEXT : 0), k == 0);
    }
    h_ndescs[bid] = (d[0].flags & F_INDIRECT) ? 1 : n;
    hq->avail_idx += n;
    return bid;
}

static unsigned hchain(const struct hd *d, unsigned n)
{
    return hchain_id(d, n, -1);
}

/* Make what was posted available to the device. */
static void hpublish(void)
{
    if (ring_packed) {
        for (unsigned i = 0; i < h_npend; i++) {
            __atomic_store_n(&hq->pdesc[h_pend[i].pos].flags, h_pend[i].flags,
                             __ATOMIC_RELEASE);
        }
        h_npend = 0;
    } else {
        __atomic_store_n(&hq->avail[1], hq->avail_idx, __ATOMIC_RELEASE);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Publish and kick queue 1. */
static void hkick(void)
{
    hpublish();
    writew(hq->notify_addr, hq->idx);
}

/* How many requests of queue 1 the device has completed (free-running). */
static uint16_t hused(void)
{
    if (!ring_packed) {
        return __atomic_load_n(&hq->used_hdr[1], __ATOMIC_ACQUIRE);
    }
    for (;;) {
        struct pdesc *d = &hq->pdesc[h_used_desc % hq->size];
        uint16_t f = __atomic_load_n(&d->flags, __ATOMIC_ACQUIRE);
        bool w = h_lap_even(h_used_desc);
        if (!(f & VRING_PACKED_F_AVAIL) != !w || !(f & VRING_PACKED_F_USED) != !w) {
            return h_seen;
        }
        h_last_id = d->id;
        h_used_desc += h_ndescs[d->id] ? h_ndescs[d->id] : 1;
        h_seen++;
    }
}

/* The device-written part of queue q's rings, as a number that changes
 * when the device completes a request: split, the used index; packed, a
 * hash of the descriptor ring. */
static uint64_t ring_sig(struct vq *q)
{
    if (!ring_packed) {
        return __atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE);
    }
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *p = (const uint8_t *)q->pdesc;
    for (unsigned i = 0; i < 16 * q->size; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

/* QEMU's view of queue i: requests popped and not completed */
static unsigned qemu_inflight(unsigned i)
{
    struct vq_status st;
    qmp_virtqueue_status(VBLK_QOM_PATH, i, &st);
    return ring_packed ? st.inuse / 3 : st.inuse;   /* 3 descriptors a request */
}

static bool needs_reset(void)
{
    return virtio_status() & ST_NEEDS_RESET;
}

/* Header n of the hostile area; its status byte n is set to 0xff. */
static uint64_t hhdr(unsigned n, uint32_t type, uint64_t sector)
{
    uint32_t *h = gpa(h_hdr + 16 * n);
    h[0] = type;
    h[1] = 0;
    memcpy(&h[2], &sector, 8);
    *(volatile uint8_t *)gpa(h_st + n) = 0xff;
    return h_hdr + 16 * n;
}

static uint8_t hstatus(unsigned n)
{
    return *(volatile uint8_t *)gpa(h_st + n);
}

/* A well-formed request, header and status n; in: the device writes the
 * data buffer. */
static void hreq_dir(unsigned n, uint32_t type, uint64_t sector, uint64_t buf, uint32_t len,
                     bool in)
{
    const struct hd d[3] = {
        { hhdr(n, type, sector), 16, 0 },
        { buf, len, in ? F_WRITE : 0 },
        { h_st + n, 1, F_WRITE },
    };
    hchain(d, 3);
}

static void hreq(unsigned n, uint32_t type, uint64_t sector, uint64_t buf, uint32_t len)
{
    hreq_dir(n, type, sector, buf, len, type == T_IN);
}

/* Segment k of request n's discard/write-zeroes data: its guest address. */
static uint64_t hseg(unsigned n, unsigned k, uint64_t sector, uint32_t num, uint32_t flags)
{
    uint64_t a = h_seg + 64 * n + 16 * k;
    uint8_t *p = gpa(a);
    memcpy(p, &sector, 8);
    memcpy(p + 8, &num, 4);
    memcpy(p + 12, &flags, 4);
    return a;
}

/* A discard or write-zeroes request n whose data is len bytes at seg
 * (len 0: no data descriptor at all). */
static void hdwz(unsigned n, uint32_t type, uint64_t seg, uint32_t len)
{
    struct hd d[3] = { { hhdr(n, type, 0), 16, 0 }, { seg, len, 0 }, { h_st + n, 1, F_WRITE } };
    if (!len) {
        d[1] = d[2];
    }
    hchain(d, len ? 3 : 2);
}

/* One segment request: n, type, sector, sectors, flags. */
static void hdwz1(unsigned n, uint32_t type, uint64_t sector, uint32_t num, uint32_t flags)
{
    hdwz(n, type, hseg(n, 0, sector, num, flags), 16);
}

/* Wait for n completions on queue 1. */
static void expect_done(unsigned n)
{
    for (double end = now_s() + opt.timeout; now_s() < end; sleep_s(0.001)) {
        uint16_t got = hused() - h_taken;
        if (got >= n) {
            if (got != n) {
                fail("queue 1 completed %u requests, %u were posted", got, n);
            }
            h_taken += n;
            return;
        }
        if (needs_reset()) {
            fail("the device set NEEDS_RESET instead of completing the request(s)");
        }
    }
    fail("queue 1 completed %u of %u requests within %.0fs", (uint16_t)(hused() - h_taken), n,
         opt.timeout);
}

static const char *status_name(uint8_t s)
{
    static const char *const names[] = { "OK", "IOERR", "UNSUPP" };
    return s < 3 ? names[s] : "?";
}

/* The status byte of completed request n must be want. */
static void expect_status(unsigned n, uint8_t want)
{
    size_t l = strlen(statuses);
    if (hstatus(n) != want) {
        fail("request %u completed with status %u (%s), expected %u (%s)", n, hstatus(n),
             status_name(hstatus(n)), want, status_name(want));
    }
    snprintf(statuses + l, sizeof(statuses) - l, "%s%s", l ? ", " : "", status_name(want));
}

/* Requests 0..n-1 must all have status want. */
static void expect_statuses(unsigned n, uint8_t want)
{
    for (unsigned i = 0; i < n; i++) {
        expect_status(i, want);
    }
}

/* Wait for NEEDS_RESET; unless some may complete first (may_complete),
 * queue 1 must not complete any request. */
static void expect_broken(bool may_complete)
{
    for (double end = now_s() + opt.timeout; !needs_reset(); sleep_s(0.002)) {
        if (!may_complete && hused() != h_taken) {
            fail("queue 1 completed a request (status %u) instead of NEEDS_RESET",
                 hstatus(0));
        }
        if (now_s() > end) {
            fail("the device did not set NEEDS_RESET within %.0fs (queue 1 completed %u)",
                 opt.timeout, (uint16_t)(hused() - h_taken));
        }
    }
}

/* The guest memory at p must hold the image's pattern of n sectors at s. */
static void expect_pattern(const void *p, uint64_t s, unsigned n)
{
    uint8_t want[512];
    for (unsigned i = 0; i < n; i++) {
        image_pattern(want, s + i, 1, IMG_SEED);
        if (memcmp(want, (const uint8_t *)p + 512 * i, 512)) {
            fail("read data of sector %" PRIu64 " is not the disk's", s + i);
        }
    }
}

static void may_change(uint64_t first, uint64_t n)
{
    mods[nmods++] = (struct sector_range){ first, n };
}

/* Read n sectors from s of the image file into buf. */
static void read_image(uint8_t *buf, uint64_t s, unsigned n)
{
    int fd = open(img_path, O_RDONLY);
    if (fd < 0 || pread(fd, buf, 512 * n, s * 512) != (ssize_t)(512 * n)) {
        fail("cannot read back %s", img_path);
    }
    close(fd);
}

/* Sectors [s, s+n) of the image must be zeroes (or, if orig_ok, each
 * either zeroes or its original data). */
static void expect_zeroes(uint64_t s, unsigned n, bool orig_ok)
{
    static const uint8_t zero[512];
    uint8_t buf[512], orig[512];
    for (unsigned i = 0; i < n; i++) {
        read_image(buf, s + i, 1);
        image_pattern(orig, s + i, 1, IMG_SEED);
        if (memcmp(buf, zero, 512) && !(orig_ok && !memcmp(buf, orig, 512))) {
            fail("sector %" PRIu64 " holds neither zeroes%s", s + i,
                 orig_ok ? " nor its old data" : "");
        }
    }
}

/* An I/O limit that holds every request: see qmp_iops_limit().  Returns
 * once the good queue's requests are all held (popped by QEMU, none
 * completing). */
static void hold_io(void)
{
    qmp_iops_limit("vblk0/virtio-backend", 1);
    for (double end = now_s() + opt.timeout;; sleep_s(0.005)) {
        uint64_t c = completed(0);
        if (qemu_inflight(0) == opt.depth) {
            sleep_s(0.05);
            if (completed(0) == c && qemu_inflight(0) == opt.depth) {
                return;
            }
        }
        if (now_s() > end) {
            fail("an I/O limit of 1 request per second (virtual clock) did not hold the "
                 "good queue's %u requests within %.0fs", opt.depth, opt.timeout);
        }
    }
}

static void release_io(void)
{
    qmp_iops_limit("vblk0/virtio-backend", 0);
}

/* ---- the cases ---- */
/* The disk's aio mode is io_uring: QEMU 7.2 submits at each 128 requests
 * queued and processes the completions that are ready by then, so a
 * request can complete while a virtqueue is still being popped. */
static bool io_uring_completes_inline(void)
{
    return opt.aio && !strcmp(opt.aio, "io_uring");
}

static void one_bad_data_desc(uint64_t addr, uint32_t len)
{
    const struct hd d[3] = {
        { hhdr(0, T_IN, HS_READ), 16, 0 }, { addr, len, F_WRITE }, { h_st, 1, F_WRITE },
    };
    hchain(d, 3);
    hkick();
}

static void case_oob_desc(void)
{
    one_bad_data_desc(NO_RAM, 65536);
    expect_broken(false);
}

static void case_oob_small(void)
{
    one_bad_data_desc(NO_RAM, 512);
    expect_done(1);
    expect_status(0, S_OK);
}

static void case_zero_len(void)
{
    one_bad_data_desc(h_buf, 0);
    expect_broken(false);
}

static void case_huge_len(void)
{
    one_bad_data_desc(h_buf, 0xfffff000u);
    expect_broken(false);
}

static void case_ring_desc(void)
{
    static uint8_t table[4096];
    uint64_t ring = (uint8_t *)hq->desc - (uint8_t *)gpa(0);
    /* write the descriptor table (ring) itself, this chain included */
    hreq(0, T_OUT, HS_WRITE, ring, 4096);
    may_change(HS_WRITE, 8);
    /* the table as the device will read it: taken before it is published,
     * since a packed ring's device writes its used descriptor into it */
    memcpy(table, hq->desc, sizeof(table));
    if (ring_packed) {
        memcpy(table + 16 * h_pend[0].pos + 14, &h_pend[0].flags, 2);
    }
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    /* read the disk into the unused upper half of the table (ring) */
    hreq(1, T_IN, HS_READ, ring + 2048, 2048);
    hkick();
    expect_done(1);
    expect_status(1, S_OK);
    expect_pattern((uint8_t *)hq->desc + 2048, HS_READ, 4);
    /* what the first request wrote is the table as it was */
    uint8_t disk[4096];
    read_image(disk, HS_WRITE, 8);
    if (memcmp(disk, table, 4096)) {
        fail("the disk does not hold the descriptor %s that was written",
             ring_packed ? "ring" : "table");
    }
}

static void case_ring_used(void)
{
    if (!ring_packed) {
        /* read one sector into the used ring, past the entry this request gets */
        uint64_t used = (uint8_t *)hq->used_hdr - (uint8_t *)gpa(0);
        hreq(0, T_IN, HS_READ, used + 512, 512);
        hkick();
        expect_done(1);
        expect_status(0, S_OK);
        if (hq->used_ring[0].id != 0) {
            fail("used ring entry 0 names descriptor %u, not 0", hq->used_ring[0].id);
        }
        expect_pattern((uint8_t *)hq->used_hdr + 512, HS_READ, 1);
        return;
    }
    /* packed: read one sector into the ring's own descriptors 32-63, ahead
     * of where the device writes this request's used descriptor (0) */
    uint64_t ring = (uint8_t *)hq->pdesc - (uint8_t *)gpa(0);
    hreq(0, T_IN, HS_READ, ring + 512, 512);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    if (h_last_id != 0) {
        fail("the used descriptor names buffer %u, not 0", h_last_id);
    }
    expect_pattern((uint8_t *)hq->pdesc + 512, HS_READ, 1);
}

static void case_loop(void)
{
    if (!ring_packed) {
        hdesc(0, hhdr(0, T_OUT, HS_WRITE), 16, F_NEXT, 1);
        hdesc(1, h_buf, 512, F_NEXT, 0);
        hpost(0);
        hkick();
        expect_broken(false);
        return;
    }
    /* packed: no next field; a chain that never ends goes round the ring
     * (device-writable all through, so that no other check comes first) */
    static struct hd d[256];
    for (unsigned k = 0; k < hq->size; k++) {
        d[k] = (struct hd){ h_buf, 512, F_WRITE | F_NEXT };
    }
    hchain(d, hq->size);
    hkick();
    expect_broken(false);
}

/* An indirect table at h_ind: entries of the ring's layout, each a
 * (addr, len, flags); split entries chain to the next one when NEXT. */
static void indirect_table(const struct hd *t, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        if (ring_packed) {
            ((struct pdesc *)gpa(h_ind))[k] = (struct pdesc){ t[k].addr, t[k].len, 0,
                                                              t[k].flags };
        } else {
            ((struct vdesc *)gpa(h_ind))[k] = (struct vdesc){ t[k].addr, t[k].len,
                                                              t[k].flags, k + 1 };
        }
    }
}

static void indirect(uint32_t len)
{
    const struct hd d = { h_ind, len, F_INDIRECT };
    hchain(&d, 1);
    hkick();
}

static void case_indirect_len(void)
{
    const struct hd t[2] = { { hhdr(0, T_IN, HS_READ), 16, F_NEXT },
                             { h_buf, 4096, F_WRITE | F_NEXT } };
    indirect_table(t, 2);
    indirect(20);
    expect_broken(false);
}

static void case_indirect_next(void)
{
    const struct hd t[3] = { { hhdr(0, T_IN, HS_READ), 16, F_NEXT },
                             { h_buf, 4096, F_WRITE | F_NEXT }, { h_st, 1, F_WRITE } };
    indirect_table(t, 3);
    indirect(16);       /* one entry, which says that a next one follows */
    expect_broken(false);
}

static void case_indirect_ok(void)
{
    const struct hd t[3] = { { hhdr(0, T_IN, HS_READ), 16, ring_packed ? 0 : F_NEXT },
                             { h_buf, 4096, F_WRITE | (ring_packed ? 0 : F_NEXT) },
                             { h_st, 1, F_WRITE } };
    indirect_table(t, 3);
    memset(gpa(h_buf), 0xa5, 4096);
    indirect(3 * 16);
    expect_done(1);
    expect_status(0, S_OK);
    expect_pattern(gpa(h_buf), HS_READ, 8);
}

static void case_short_hdr(void)
{
    const struct hd d[3] = {
        { hhdr(0, T_IN, HS_READ), 8, 0 }, { h_buf, 4096, F_WRITE }, { h_st, 1, F_WRITE },
    };
    hchain(d, 3);
    hkick();
    expect_broken(false);
}

static void case_no_status(void)
{
    const struct hd d[2] = { { hhdr(0, T_OUT, HS_WRITE), 16, 0 }, { h_buf, 512, 0 } };
    hchain(d, 2);
    hkick();
    expect_broken(false);
}

static void case_bad_type(void)
{
    hreq_dir(0, 0x55, HS_READ, h_buf, 512, true);
    hkick();
    expect_done(1);
    expect_status(0, S_UNSUPP);
}

static void case_past_end(void)
{
    hreq(0, T_IN, IMG_SECTORS - 1, h_buf, 4096);            /* crosses the end */
    hreq(1, T_OUT, IMG_SECTORS, h_buf, 512);                /* just past it */
    hreq(2, T_OUT, ~0ull - 7, h_buf, 4096);                 /* sector + n wraps */
    hkick();
    expect_done(3);
    expect_statuses(3, S_IOERR);
}

static void case_avail_jump(void)
{
    hreq(0, T_IN, HS_READ, h_buf, 512);
    for (unsigned i = 0; i < hq->size; i++) {
        hpost(0);       /* size + 1 heads in all: more than the queue can hold */
    }
    hkick();
    if (!io_uring_completes_inline()) {
        expect_broken(false);
        return;
    }
    /* io_uring: QEMU submits each 128 requests it queues and reaps what
     * completed by then, so inuse may never reach the queue size: either
     * all complete, or the device breaks as above (after some completed) */
    for (double end = now_s() + opt.timeout; (uint16_t)(hused() - h_taken) <= hq->size;
         sleep_s(0.001)) {
        if (needs_reset()) {
            jump_broke = true;
            return;
        }
        if (now_s() > end) {
            fail("queue 1 completed %u of %u requests within %.0fs, and the device is not "
                 "broken", (uint16_t)(hused() - h_taken), hq->size + 1, opt.timeout);
        }
    }
    expect_done(hq->size + 1);
    for (unsigned i = 0; i <= hq->size; i++) {
        if (hq->used_ring[(uint16_t)(h_taken - hq->size - 1 + i) % hq->size].id != 0) {
            fail("used entry %u names another descriptor than 0", i);
        }
    }
    expect_status(0, S_OK);
    snprintf(outcome, sizeof(outcome), "all %u completed with status OK (io_uring "
             "completes them while QEMU pops), no NEEDS_RESET", hq->size + 1);
}

static void case_bad_head(void)
{
    if (!ring_packed) {
        hdesc(0, hhdr(0, T_IN, HS_READ), 16, F_NEXT, 1);
        hdesc(1, h_buf, 512, F_WRITE | F_NEXT, 2);
        hdesc(2, h_st, 1, F_WRITE, 0);
        hpost(0xffff);
        hkick();
        expect_broken(false);
        return;
    }
    /* packed: the buffer id is the driver's own; the device echoes it */
    const struct hd d[3] = {
        { hhdr(0, T_IN, HS_READ), 16, 0 }, { h_buf, 512, F_WRITE }, { h_st, 1, F_WRITE },
    };
    hchain_id(d, 3, 0xffff);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    if (h_last_id != 0xffff) {
        fail("the used descriptor names buffer %u, not 65535", h_last_id);
    }
}

/* packed: a head whose AVAIL/USED bits do not make it available in this
 * lap (as the next lap's available descriptor, or as a used one) must be
 * left alone until the driver sets them right */
static void case_not_avail(void)
{
    hreq(0, T_IN, HS_READ, h_buf, 4096);
    struct pending p = h_pend[0];
    h_npend = 0;
    uint16_t rest = p.flags & ~(VRING_PACKED_F_AVAIL | VRING_PACKED_F_USED);
    const uint16_t wrong[2] = { rest | (p.flags & VRING_PACKED_F_AVAIL ? VRING_PACKED_F_USED
                                                                        : VRING_PACKED_F_AVAIL),
                                rest | (p.flags & VRING_PACKED_F_AVAIL ? 0 :
                                        VRING_PACKED_F_AVAIL | VRING_PACKED_F_USED) };
    for (unsigned i = 0; i < 2; i++) {
        __atomic_store_n(&hq->pdesc[p.pos].flags, wrong[i], __ATOMIC_RELEASE);
        writew(hq->notify_addr, hq->idx);
        sleep_s(0.05);
        if (hq->pdesc[p.pos].flags != wrong[i] || needs_reset()) {
            fail("the device took a head whose flags (0x%x) do not make it available",
                 wrong[i]);
        }
    }
    memset(gpa(h_buf), 0xa5, 4096);
    h_pend[h_npend++] = p;
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    expect_pattern(gpa(h_buf), HS_READ, 8);
    snprintf(outcome, sizeof(outcome), "a head marked available for the other lap, then "
             "used, was left alone for 50 ms each; made available, it completed with "
             "status OK");
}

static void case_kick_unconfigured(void)
{
    writew(virtio_notify_addr(2), 2);       /* exists, never set up */
    writew(virtio_notify_addr(1023), 1023); /* the last queue index virtio has */
    sleep_s(0.05);
    /* queue 1 still works */
    hreq(0, T_IN, HS_READ, h_buf, 4096);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    expect_pattern(gpa(h_buf), HS_READ, 8);
}

/* 64 reads of 64 KiB (into the same buffer), published, not kicked. */
#define SOME_READS 64
static void some_reads(void)
{
    for (unsigned n = 0; n < SOME_READS; n++) {
        hreq(n, T_IN, HS_READ + 128 * (n % 16), h_buf, 65536);
    }
    hpublish();
}

/* The reset found the 64 reads in flight; the drain must complete them
 * all before the reset reads back 0. */
static void expect_drained(void)
{
    uint16_t n = hused() - h_taken;
    if (n != SOME_READS) {
        fail("the reset read back 0 with %u of the %u reads in flight completed; its "
             "drain completes them all (virtio_blk_reset)", n, SOME_READS);
    }
}

static void case_reset_mid_io(void)
{
    hold_io();
    some_reads();
    writew(hq->notify_addr, hq->idx);
    unsigned q1 = 0;
    for (double end = now_s() + opt.timeout; (q1 = qemu_inflight(1)) < SOME_READS;
         sleep_s(0.002)) {
        if (now_s() > end) {
            fail("QEMU took %u of the %u reads within %.0fs", q1, SOME_READS, opt.timeout);
        }
    }
    unsigned q0 = qemu_inflight(0);
    if (hused() != h_taken) {
        fail("a read completed while the I/O limit held it");
    }
    virtio_reset();
    expect_drained();
    release_io();
    snprintf(outcome, sizeof(outcome), "reset with %u reads of queue 1 and %u requests of "
             "queue 0 in flight (QEMU's inuse, held by an I/O limit); all %u reads "
             "completed by its drain before it read back 0", q1, q0, SOME_READS);
}

static void case_reset_racing_kick(void)
{
    hold_io();
    unsigned q0 = qemu_inflight(0);
    some_reads();
    virtio_reset_after_kick(hq);
    expect_drained();
    release_io();
    snprintf(outcome, sizeof(outcome), "reset sent with the kick, before QEMU answered "
             "it, with %u requests of queue 0 held by an I/O limit; the kick's %u reads "
             "were taken and completed by the reset's drain before it read back 0", q0,
             SOME_READS);
}

static void case_reset_engine(void)
{
    some_reads();
    writew(hq->notify_addr, hq->idx);
    int before = (uint16_t)(hused() - h_taken);
    virtio_reset();
    expect_drained();
    snprintf(outcome, sizeof(outcome), "reset read back 0; queue 1 had completed %d of "
             "%u requests when it was written, %u when it read back 0", before, SOME_READS,
             (uint16_t)(hused() - h_taken));
}

static void case_disable_mid_io(void)
{
    some_reads();
    writew(hq->notify_addr, hq->idx);
    virtio_queue_enable(1, 0);
    expect_broken(true);
}

/* ---- discard and write zeroes (virtio 1.1, 5.2.6; QEMU 7.2's
 * virtio_blk_handle_request and virtio_blk_handle_discard_write_zeroes) ---- */

/* The control: valid requests change what they must. */
static void case_dwz_ok(void)
{
    hdwz1(0, T_DISCARD, HS_WRITE, 8, 0);
    hdwz1(1, T_WRITE_ZEROES, HS_WRITE + 8, 8, 0);
    hdwz1(2, T_WRITE_ZEROES, HS_WRITE + 16, 8, DWZ_F_UNMAP);
    may_change(HS_WRITE, 24);
    hkick();
    expect_done(3);
    expect_statuses(3, S_OK);
    expect_zeroes(HS_WRITE, 8, true);       /* a discard may leave the data */
    expect_zeroes(HS_WRITE + 8, 16, false);
}

/* More segments than max_discard_seg / max_write_zeroes_seg (1), or more
 * data than one segment: UNSUPP, nothing changed. */
static void case_dwz_segs(void)
{
    uint32_t md = virtio_devcfg_readl(CFG_MAX_DISCARD_SEG);
    uint32_t mw = virtio_devcfg_readl(CFG_MAX_WZ_SEG);
    if (md != 1 || mw != 1) {
        fail("the device says max_discard_seg %u, max_write_zeroes_seg %u; QEMU 7.2 says 1",
             md, mw);
    }
    static const uint32_t type[2] = { T_DISCARD, T_WRITE_ZEROES };
    unsigned n = 0;
    for (unsigned t = 0; t < 2; t++) {
        /* two segments in one descriptor */
        hseg(n, 0, HS_WRITE, 8, 0);
        hseg(n, 1, HS_WRITE + 8, 8, 0);
        hdwz(n, type[t], h_seg + 64 * n, 32);
        n++;
        /* two segments in two descriptors */
        const struct hd d[4] = {
            { hhdr(n, type[t], 0), 16, 0 }, { hseg(n, 0, HS_WRITE, 8, 0), 16, 0 },
            { hseg(n, 1, HS_WRITE + 8, 8, 0), 16, 0 }, { h_st + n, 1, F_WRITE },
        };
        hchain(d, 4);
        n++;
        /* one segment and a byte */
        hdwz(n, type[t], hseg(n, 0, HS_WRITE, 8, 0), 17);
        n++;
    }
    hkick();
    expect_done(n);
    expect_statuses(n, S_UNSUPP);
}

/* Segments of no sectors: nothing to do, status OK, nothing changed. */
static void case_dwz_empty(void)
{
    hdwz1(0, T_DISCARD, HS_WRITE, 0, 0);
    hdwz1(1, T_WRITE_ZEROES, HS_WRITE, 0, 0);
    hdwz1(2, T_DISCARD, IMG_SECTORS, 0, 0);         /* at the very end */
    hdwz1(3, T_WRITE_ZEROES, IMG_SECTORS, 0, 0);
    hkick();
    expect_done(4);
    expect_statuses(4, S_OK);
}

/* A segment shorter than 16 bytes: the device cannot read it. */
static void case_dwz_short_seg(void)
{
    hdwz(0, T_DISCARD, hseg(0, 0, HS_WRITE, 8, 0), 8);
    hkick();
    expect_broken(false);
}

/* No segment at all (header and status only). */
static void case_dwz_no_seg(void)
{
    hdwz(0, T_WRITE_ZEROES, 0, 0);
    hkick();
    expect_broken(false);
}

/* With 4 KiB logical blocks: a segment that starts or ends inside one. */
static void case_dwz_unaligned(void)
{
    static const uint32_t type[2] = { T_DISCARD, T_WRITE_ZEROES };
    for (unsigned t = 0; t < 2; t++) {
        hdwz1(2 * t, type[t], HS_WRITE + 1, 8, 0);      /* starts inside a block */
        hdwz1(2 * t + 1, type[t], HS_WRITE, 1, 0);      /* 512 bytes of a 4 KiB block */
    }
    hkick();
    expect_done(4);
    expect_statuses(4, S_IOERR);
}

/* Past the end, wrapping, or more sectors than the device's maximum
 * (max-discard-sectors=16, max-write-zeroes-sectors=16). */
static void case_dwz_range(void)
{
    static const uint32_t type[2] = { T_DISCARD, T_WRITE_ZEROES };
    unsigned n = 0;
    for (unsigned t = 0; t < 2; t++) {
        hdwz1(n++, type[t], HS_WRITE, 24, 0);               /* more than 16 */
        hdwz1(n++, type[t], HS_WRITE, 0xffffffffu, 0);      /* far more */
        hdwz1(n++, type[t], IMG_SECTORS - 4, 8, 0);         /* crosses the end */
        hdwz1(n++, type[t], IMG_SECTORS, 1, 0);             /* just past it */
        hdwz1(n++, type[t], ~0ull - 7, 16, 0);              /* sector + n wraps */
    }
    hkick();
    expect_done(n);
    expect_statuses(n, S_IOERR);
}

/* The unmap flag on a discard, and unknown flags on either: UNSUPP, as the
 * spec requires of the device. */
static void case_dwz_flags(void)
{
    hdwz1(0, T_DISCARD, HS_WRITE, 8, DWZ_F_UNMAP);
    hdwz1(1, T_DISCARD, HS_WRITE, 8, 2);
    hdwz1(2, T_WRITE_ZEROES, HS_WRITE, 8, 2);
    hdwz1(3, T_WRITE_ZEROES, HS_WRITE, 8, 0x80000000u | DWZ_F_UNMAP);
    hkick();
    expect_done(4);
    expect_statuses(4, S_UNSUPP);
}

/* Discard and write zeroes without the OUT bit of their type (10, 12). */
static void case_dwz_no_out(void)
{
    hdwz1(0, T_DISCARD & ~T_OUT, HS_WRITE, 8, 0);
    hdwz1(1, T_WRITE_ZEROES & ~T_OUT, HS_WRITE, 8, 0);
    hkick();
    expect_done(2);
    expect_statuses(2, S_UNSUPP);
}

/* ---- negative checks: each must fail, or a check is blind ---- */
static bool late_write;     /* selftest-late-write: check_quiet_after_reset writes */
static bool late_complete;  /* selftest-late-complete: check_good_queue writes */

static void case_selftest_corrupt(void)
{
    /* a valid write where the case did not declare one */
    memset(gpa(h_buf), 0x5a, 4096);
    hreq(0, T_OUT, HS_WRITE, h_buf, 4096);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
}

static void case_selftest_outcome(void)
{
    /* a valid read, declared as one that breaks the device */
    hreq(0, T_IN, HS_READ, h_buf, 4096);
    hkick();
    expect_done(1);
}

static void case_selftest_crash(void)
{
    kill(qemu_pid, SIGSEGV);
    sleep_s(0.2);
}

static void case_selftest_hang(void)
{
    kill(qemu_pid, SIGSTOP);
    hreq(0, T_IN, HS_READ, h_buf, 4096);
    hkick();
}

/* A lost write: the disk loses the good queue's last write to a block,
 * then the good queue reads it; its check must see the old generation. */
static void case_selftest_stale(void)
{
    const uint32_t *gen, *alt;
    unsigned bs;
    uint8_t old[4096];
    for (unsigned tries = 0;; tries++) {
        good_stop(true);
        virtio_verify_state(&gen, &alt, &bs);
        for (uint64_t b = 0; b < GOOD_SECTORS / bs; b++) {
            if (gen[b]) {
                image_pattern(old, b * bs, bs, IMG_SEED);
                int fd = open(img_path, O_WRONLY);
                if (fd < 0 || pwrite(fd, old, 512 * bs, b * bs * 512) != 512 * bs) {
                    fail("cannot write %s", img_path);
                }
                close(fd);
                virtio_verify_read_next(&vqs[0], b);
                good_start(0, 1);
                good_wait(0, MIN_GOOD, opt.timeout);
                fail("the good queue read block %" PRIu64 ", which lost generation %u, "
                     "and did not notice", b, gen[b]);
            }
        }
        if (tries > 10) {
            fail("the good queue wrote no block");
        }
        good_start(0, 1);
        good_wait(0, MIN_GOOD, opt.timeout);
    }
}

static void case_selftest_late_complete(void)
{
    late_complete = true;   /* a used entry after the device is broken */
    case_huge_len();
}

static void case_selftest_late_write(void)
{
    late_write = true;      /* a write to a data buffer after the reset */
    hreq(0, T_IN, HS_READ, h_buf, 4096);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
}

#define SPLIT_ONLY RING_SPLIT, NULL, NULL, false
#define SPLIT(err) RING_SPLIT, err, NULL, false
#define BOTH(err) RING_BOTH, err, NULL, false
#define PACKED_OTHER(err, perr) RING_BOTH, err, perr, true
static const struct chaos_case cases[] = {
    { "oob-desc", case_oob_desc, BOTH("virtio: bogus descriptor or out of resources"),
      false, 0, NULL, NULL, "a 64 KiB buffer at 512 GiB, where there is no RAM" },
    { "oob-small", case_oob_small, BOTH(NULL), false, 0, NULL, NULL,
      "a 512-byte buffer at 512 GiB: mapped through QEMU's bounce buffer, data dropped" },
    { "ring-desc", case_ring_desc, BOTH(NULL), false, 0, NULL, NULL,
      "buffers in the queue's own descriptor table (ring): written to disk, read into it" },
    { "ring-used", case_ring_used, BOTH(NULL), false, 0, NULL, NULL,
      "a read into the used ring (packed: into the ring ahead of the device)" },
    { "zero-len", case_zero_len, BOTH("virtio: zero sized buffers are not allowed"), false,
      0, NULL, NULL, "a data descriptor of length 0" },
    { "huge-len", case_huge_len, BOTH("virtio: bogus descriptor or out of resources"),
      false, 0, NULL, NULL, "a data descriptor of 4 GiB - 4 KiB, past the end of RAM" },
    { "loop", case_loop, BOTH("Looped descriptor"), false, 0, NULL, NULL,
      "a chain that points back to its head (packed: one longer than the ring)" },
    { "indirect-len", case_indirect_len, BOTH("Invalid size for indirect buffer table"),
      false, 0, NULL, NULL, "an indirect table of 20 bytes (not a multiple of 16)" },
    { "indirect-next", case_indirect_next,
      PACKED_OTHER("Desc next is 1", "virtio-blk missing headers"), false, 0, NULL, NULL,
      "an indirect table of one entry that chains to a second (packed: NEXT is not "
      "followed in a table, so the request is its header alone)" },
    { "indirect-ok", case_indirect_ok, BOTH(NULL), false, 0, NULL, NULL,
      "a valid indirect table (control for the two above)" },
    { "short-hdr", case_short_hdr, BOTH("virtio-blk request outhdr too short"), false, 0,
      NULL, NULL, "a request header of 8 bytes instead of 16" },
    { "no-status", case_no_status, BOTH("virtio-blk missing headers"), false, 0, NULL, NULL,
      "a chain with no device-writable descriptor (no status byte)" },
    { "bad-type", case_bad_type, BOTH(NULL), false, 0, NULL, NULL, "request type 0x55" },
    { "past-end", case_past_end, BOTH(NULL), false, 0, NULL, NULL,
      "a read across the disk's end, a write just past it, one whose sector wraps" },
    { "avail-jump", case_avail_jump, SPLIT("Virtqueue size exceeded"), false, 0, NULL, NULL,
      "the avail index moved by queue size + 1 (split only: a packed ring has no avail "
      "index); with aio=io_uring all may complete instead" },
    { "bad-head", case_bad_head,
      PACKED_OTHER("Guest says index 65535 is available", NULL), false, 0, NULL, NULL,
      "an avail ring entry naming descriptor 65535 (packed: buffer id 65535, which the "
      "device echoes)" },
    { "not-avail", case_not_avail, RING_PACKED, NULL, NULL, false, false, 0, NULL, NULL,
      "packed only: a head whose AVAIL/USED bits do not make it available in this lap, "
      "kicked; then made available" },
    { "kick-unconfigured", case_kick_unconfigured, BOTH(NULL), false, 0, NULL, NULL,
      "kicks on queue 2 (never set up) and on queue 1023, then a valid request" },
    { "reset-mid-io", case_reset_mid_io, BOTH(NULL), true, 0, NULL, NULL,
      "a device reset while QEMU holds 64 reads of 64 KiB of queue 1 and the good queue's "
      "requests (an I/O limit holds them)" },
    { "reset-racing-kick", case_reset_racing_kick, BOTH(NULL), true, 0, NULL, NULL,
      "the same, with the kick of the 64 reads and the reset sent before QEMU answered the "
      "kick" },
    { "reset-engine", case_reset_engine, BOTH(NULL), true, 0, NULL, NULL,
      "a reset right after 64 reads of 64 KiB were kicked, no limit: they are in the aio "
      "engine or done, as the scheduler has it" },
    { "disable-mid-io", case_disable_mid_io, BOTH("wrong value for queue_enable 0"), false,
      0, NULL, NULL, "queue_enable = 0 on queue 1 right after 64 reads of 64 KiB were kicked" },
    { "dwz-ok", case_dwz_ok, BOTH(NULL), false, 0, NULL, NULL,
      "a discard, a write zeroes and one with the unmap flag, 8 sectors each (the control)" },
    { "dwz-segs", case_dwz_segs, BOTH(NULL), false, 0, NULL, NULL,
      "discard and write zeroes with 2 segments (max_*_seg is 1) in one or two "
      "descriptors, or a segment and a byte" },
    { "dwz-empty", case_dwz_empty, BOTH(NULL), false, 0, NULL, NULL,
      "discard and write zeroes of 0 sectors, inside the disk and at its end" },
    { "dwz-short-seg", case_dwz_short_seg,
      BOTH("virtio-blk discard/write_zeroes header too short"), false, 0, NULL, NULL,
      "a discard whose segment is 8 bytes" },
    { "dwz-no-seg", case_dwz_no_seg,
      BOTH("virtio-blk discard/write_zeroes header too short"), false, 0, NULL, NULL,
      "a write zeroes with no segment at all" },
    { "dwz-unaligned", case_dwz_unaligned, BOTH(NULL), false, 0, NULL,
      "logical_block_size=4096,physical_block_size=4096",
      "4 KiB logical blocks: segments that start inside a block or cover 512 bytes" },
    { "dwz-range", case_dwz_range, BOTH(NULL), false, 0, NULL,
      "max-discard-sectors=16,max-write-zeroes-sectors=16",
      "segments of more sectors than the maximum (16, and 2^32-1), across or past the "
      "end, or whose sector wraps" },
    { "dwz-flags", case_dwz_flags, BOTH(NULL), false, 0, NULL, NULL,
      "the unmap flag on a discard; unknown flags on discard and write zeroes" },
    { "dwz-no-out", case_dwz_no_out, BOTH(NULL), false, 0, NULL, NULL,
      "types 10 and 12: discard and write zeroes without the OUT bit" },
    { "selftest-corrupt", case_selftest_corrupt, SPLIT_ONLY, false, 1, "sector 4096 changed",
      NULL, "a valid write to sectors the case did not declare: the image check fails" },
    { "selftest-outcome", case_selftest_outcome, RING_SPLIT, "(no error)", NULL, false,
      false, 1, "expected NEEDS_RESET", NULL,
      "a valid read declared as breaking the device: the outcome check fails" },
    { "selftest-crash", case_selftest_crash, SPLIT_ONLY, false, CHAOS_CRASH, "", NULL,
      "QEMU killed by SIGSEGV: reported as a crash" },
    { "selftest-hang", case_selftest_hang, SPLIT_ONLY, false, CHAOS_HANG, "", NULL,
      "QEMU stopped (SIGSTOP): reported as a hang" },
    { "selftest-stale", case_selftest_stale, SPLIT_ONLY, false, 1, "a lost or stale write",
      NULL, "the disk loses the good queue's last write to a block, which it then reads: "
      "its check sees the old data" },
    { "selftest-late-complete", case_selftest_late_complete, RING_SPLIT,
      "virtio: bogus descriptor or out of resources", NULL, false, false, 1,
      "completed requests after it was marked broken", NULL,
      "the good queue's used index moves (through qtest, as a device would) after the "
      "device is broken: the quiet check fails" },
    { "selftest-late-write", case_selftest_late_write, SPLIT_ONLY, false, 1,
      "wrote guest RAM after its reset read back 0", NULL,
      "a write to a data buffer (through qtest, as a device would) after the reset read "
      "back 0: the quiet check fails" },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* ---- the checks after a case ---- */

/* QEMU must still run; if it is gone, die() reaps it and says how. */
static void check_alive(const char *when)
{
    siginfo_t si = { 0 };
    if (!waitid(P_PID, qemu_pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == qemu_pid) {
        fail("QEMU went away %s", when);
    }
}

/* How many lines of QEMU's stderr contain s (all lines if s is NULL). */
static unsigned log_lines(const char *s, char *first, size_t len)
{
    char line[512];
    unsigned n = 0;
    FILE *f = fopen(qemu_log(), "r");
    if (!f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        if (!s || strstr(line, s)) {
            if (!n++ && first) {
                line[strcspn(line, "\n")] = 0;
                snprintf(first, len, "%s", line);
            }
        }
    }
    fclose(f);
    return n;
}

/* virtio_error() sets NEEDS_RESET, sends the configuration interrupt and
 * only then marks the device broken; another thread (an IOThread) may still
 * be inside it when this one sees NEEDS_RESET.  Its end is QEMU's state,
 * not a time: wait until QEMU says the device is broken. */
static void wait_broken(void)
{
    for (double end = now_s() + opt.timeout; !qmp_virtio_broken(VBLK_QOM_PATH);
         sleep_s(0.002)) {
        if (now_s() > end) {
            fail("NEEDS_RESET, but QEMU did not mark the device broken within %.0fs",
                 opt.timeout);
        }
    }
}

/* NEEDS_RESET, the message and the config interrupt, or none of them. */
static void check_outcome(void)
{
    char line[512] = "";
    const char *error = case_error();
    bool broken = needs_reset();
    if (!error) {
        if (broken) {
            log_lines(NULL, line, sizeof(line));
            fail("the device set NEEDS_RESET (QEMU said: %s)", line);
        }
        if (log_lines(NULL, line, sizeof(line))) {
            fail("QEMU printed an error: %s", line);
        }
        if (!outcome[0]) {
            snprintf(outcome, sizeof(outcome), "completed with status %s, no NEEDS_RESET",
                     statuses);
        }
        return;
    }
    if (!broken) {
        fail("expected NEEDS_RESET and '%s', the device is not broken", error);
    }
    wait_broken();
    if (!log_lines(error, line, sizeof(line))) {
        log_lines(NULL, line, sizeof(line));
        fail("NEEDS_RESET, but QEMU did not say '%s' (it said: %s)", error, line);
    }
    if (log_lines(NULL, NULL, 0) != log_lines(error, NULL, 0)) {
        fail("QEMU printed other errors besides '%s'", error);
    }
    if (!*virtio_config_msi()) {
        fail("NEEDS_RESET without a configuration-change interrupt");
    }
    snprintf(outcome, sizeof(outcome), "NEEDS_RESET + config interrupt, \"%s\"", line);
}

/* The good queue after the hostile act: it must still complete requests,
 * unless the device is (legitimately) broken. */
static uint64_t check_good_queue(void)
{
    uint64_t before = completed(0);
    if (cur->resets) {
        return 0;
    }
    if (case_error()) {
        /*
         * A broken device pops and completes nothing (virtio_device_disabled).
         * The packed signature covers the whole descriptor ring, which the
         * driver writes too: stop the good thread first, or its late refill
         * (it may run long after NEEDS_RESET on a loaded host) is taken for
         * the device's write.  check_outcome() waited for broken, so from
         * here on any change to either ring is the device's.
         */
        good_stop(false);
        uint64_t s0 = ring_sig(&vqs[0]), s1 = ring_sig(hq);
        if (late_complete) {
            uint64_t idx = (uint64_t)((uint8_t *)&vqs[0].used_hdr[1] - (uint8_t *)gpa(0));
            writew(idx, vqs[0].used_hdr[1] + 1);
        }
        sleep_s(0.1);
        if (ring_sig(&vqs[0]) != s0 || ring_sig(hq) != s1) {
            fail("the device completed requests after it was marked broken");
        }
        return completed(0) - before;
    }
    if (!good_wait(0, MIN_GOOD, opt.timeout)) {
        fail("the good queue completed %" PRIu64 " requests in %.0fs after the case",
             completed(0) - before, opt.timeout);
    }
    return completed(0) - before;
}

/* Name the guest address a for a report: which buffer or ring it is in. */
static void describe_gpa(uint64_t a, char *out, size_t len)
{
    for (unsigned i = 0; i < 2; i++) {
        struct vq *q = &vqs[i];
        uint64_t ring = (uint8_t *)q->desc - (uint8_t *)gpa(0);
        uint64_t drv = (uint8_t *)q->avail - (uint8_t *)gpa(0);
        uint64_t devr = (uint8_t *)q->used_hdr - (uint8_t *)gpa(0);
        if (a >= ring && a < ring + 16 * q->size) {
            snprintf(out, len, "queue %u's descriptor %s", i, ring_packed ? "ring" : "table");
            return;
        }
        if (a >= drv && a < drv + 4096) {
            snprintf(out, len, "queue %u's %s", i,
                     ring_packed ? "driver event structure" : "avail ring");
            return;
        }
        if (a >= devr && a < devr + 4096) {
            snprintf(out, len, "queue %u's %s", i,
                     ring_packed ? "device event structure" : "used ring");
            return;
        }
        for (unsigned s = 0; s < opt.depth; s++) {
            struct slot *sl = &q->slots[s];
            if (a >= sl->buf_gpa && a < sl->buf_gpa + opt.bs) {
                snprintf(out, len, "queue %u's data buffer of slot %u", i, s);
                return;
            }
            if (a == sl->st_gpa) {
                snprintf(out, len, "queue %u's status byte of slot %u", i, s);
                return;
            }
        }
    }
    if (a >= h_buf && a < h_buf + 65536) {
        snprintf(out, len, "queue 1's hostile data buffer");
    } else if (a >= h_st && a < h_st + 128) {
        snprintf(out, len, "queue 1's hostile status bytes");
    } else {
        snprintf(out, len, "other guest RAM of the driver");
    }
}

/* After a reset reads back 0 the device must not write guest RAM: every
 * byte the driver uses (rings, headers, status bytes, data buffers, MSI-X
 * message words) stays as it is.  The data buffers and status bytes are
 * filled with a byte no request returns first, so that a late read
 * completion shows too. */
static void check_quiet_after_reset(void)
{
    for (unsigned i = 0; i < 2; i++) {
        for (unsigned s = 0; s < opt.depth; s++) {
            memset(gpa(vqs[i].slots[s].buf_gpa), 0xee, opt.bs);
            *(uint8_t *)gpa(vqs[i].slots[s].st_gpa) = 0xee;
        }
    }
    memset(gpa(h_buf), 0xee, 65536);
    memset(gpa(h_st), 0xee, 128);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t start = RAM_ALLOC_START, n = ram_alloc_end() - start;
    uint8_t *snap = malloc(n);
    if (!snap) {
        die("out of memory");
    }
    memcpy(snap, gpa(start), n);
    if (late_write) {
        writel(vqs[0].slots[0].buf_gpa + 64, 0x1badcafe);
    }
    sleep_s(0.05);
    const uint8_t *now = gpa(start);
    for (uint64_t i = 0; i < n; i++) {
        if (snap[i] != now[i]) {
            char what[96];
            describe_gpa(start + i, what, sizeof(what));
            free(snap);
            fail("the device wrote guest RAM after its reset read back 0: %s, guest "
                 "address 0x%" PRIx64, what, start + i);
        }
    }
    free(snap);
}

static void check_image(const char *when)
{
    char why[320];
    struct image_rules r = {
        .sectors = IMG_SECTORS, .seed = IMG_SEED, .good_sectors = GOOD_SECTORS,
        .good_seed = opt.seed, .mod = mods, .nmod = nmods,
    };
    virtio_verify_state(&r.good_gen, &r.good_alt, &r.good_block);
    uint64_t bad = image_check(img_path, &r, why, sizeof(why));
    if (bad) {
        fail("%s: %" PRIu64 " sectors are not what they must be: %s", when, bad, why);
    }
}

/* Reset, re-initialise, verified I/O on both queues, reset again. */
static void check_reset_works(void)
{
    virtio_reinit();
    uint64_t c0 = completed(0), c1 = completed(1);
    uint64_t v0 = vqs[0].n.verified, v1 = vqs[1].n.verified;
    good_start(0, 2);
    double end = now_s() + opt.timeout;
    while (completed(0) - c0 < MIN_GOOD * 4 || completed(1) - c1 < MIN_GOOD * 4 ||
           vqs[0].n.verified - v0 < 4 || vqs[1].n.verified - v1 < 4) {
        if (now_s() > end) {
            good_stop(false);
            fail("after reset and re-init, queues 0 and 1 completed %" PRIu64 " and %"
                 PRIu64 " requests (%" PRIu64 " and %" PRIu64 " reads verified) in %.0fs",
                 completed(0) - c0, completed(1) - c1, vqs[0].n.verified - v0,
                 vqs[1].n.verified - v1, opt.timeout);
        }
        sleep_s(0.005);
    }
    good_stop(true);
    virtio_reset();
}

/* ---- running a case ---- */
static void remove_image(void)
{
    if (img_path[0]) {
        unlink(img_path);
    }
}

static void chaos_options(void)
{
    static char bdev[384];
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    const char *aio = !opt.aio || !strcmp(opt.aio, "threads") ? "" :
                      !strcmp(opt.aio, "native") ? ",aio=native,cache.direct=on" :
                      ",aio=io_uring";
    snprintf(img_path, sizeof(img_path), "%s/vblk-chaos-%d.img", shm, (int)getpid());
    snprintf(bdev, sizeof(bdev), "driver=file,filename=%s,node-name=disk0,discard=unmap%s",
             img_path, aio);
    opt.blockdev = bdev;
    opt.extra_dev = cur->devopts;
    opt.queues = 2;         /* 0: good, 1: hostile */
    opt.dev_queues = 3;     /* 2: never set up */
    opt.depth = 8;
    opt.bs = 4096;
    opt.rw = RW_RANDRW;
    opt.verify = true;
    opt.queue_size = 256;
}

static void start(void)
{
    image_create(img_path, IMG_SECTORS, IMG_SEED);
    atexit(remove_image);
    ram_create(virtio_ram_needed());
    struct qemu_conn conn;
    qemu_start(&conn);
    qtest_attach(conn.qtest_fd);
    cfg_rl(0);
    ram_unlink();
    qmp_attach(conn.qmp_fd);
    virtio_io_range(0, GOOD_SECTORS);
    virtio_verify_original(IMG_SEED);
    virtio_init();
    if (capacity_sectors != IMG_SECTORS) {
        die("capacity %" PRIu64 " sectors, the image has %u", capacity_sectors, IMG_SECTORS);
    }
    hq = &vqs[1];
    h_hdr = ram_alloc(16 * 128, 16);
    h_st = ram_alloc(128, 64);
    h_buf = ram_alloc(65536, 4096);
    h_ind = ram_alloc(4096, 4096);
    h_seg = ram_alloc(64 * 128, 4096);
}

/* QEMU must exit by itself on SIGTERM, with status 0. */
static void stop(void)
{
    int st = qemu_stop(5);
    if (st == -1) {
        qemu_hung = true;
        fail("QEMU did not exit within 5s of SIGTERM");
    }
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "vblk-load: error: chaos %s: QEMU died on signal %d at exit\n",
                cur->name, WTERMSIG(st));
        cleanup();
        exit(CHAOS_CRASH);
    }
    if (WEXITSTATUS(st)) {
        fail("QEMU exited with status %d on SIGTERM", WEXITSTATUS(st));
    }
}

static void run_case(void)
{
    start();
    good_start(0, 1);
    if (!good_wait(0, MIN_GOOD, opt.timeout)) {
        fail("the good queue did not complete %u requests before the case", MIN_GOOD);
    }
    uint64_t during = completed(0);
    cur->run();
    check_alive("during the case");
    check_outcome();
    uint64_t after = check_good_queue();
    during = completed(0) - during;
    good_stop(!case_error() && !cur->resets);
    check_alive("after the case");
    if (!cur->resets) {
        virtio_reset();
    }
    check_quiet_after_reset();
    check_image("after the case");
    check_reset_works();
    check_image("after the good I/O that followed the reset");
    check_alive("at the end");
    stop();
    printf("ok   %s (%s): %s; good queue: %" PRIu64 " completions during the "
           "case, %s %" PRIu64 "; image intact, the good queue's blocks at their last "
           "writes; quiet after reset; reset, re-init, verified I/O on both queues: "
           "ok\n", cur->name, config_name(), outcome, during,
           cur->resets ? "none expected after the reset," : case_error() ?
           "none after NEEDS_RESET, reaped after it:" : "after it:", after);
}

static const char *ring_names(unsigned rings)
{
    return rings == RING_BOTH ? "split,packed" : rings == RING_SPLIT ? "split" : "packed";
}

int chaos_main(void)
{
    if (!strcmp(opt.chaos, "list") || !strcmp(opt.chaos, "selftests")) {
        bool self = !strcmp(opt.chaos, "selftests");
        for (unsigned i = 0; i < NCASES; i++) {
            const struct chaos_case *c = &cases[i];
            if (self && c->selftest) {
                /* tab-separated: name, exit status, what its message must say */
                printf("%s\t%d\t%s\t%s\n", c->name, c->selftest,
                       c->expect && *c->expect ? c->expect : "-", c->what);
            } else if (!self && !c->selftest) {
                printf("%-18s %-13s %s", c->name, ring_names(c->rings), c->what);
                if (c->error || (c->packed_differs && c->error_packed)) {
                    printf(": %s", c->error ? c->error : "completes");
                    if (c->packed_differs) {
                        printf(" (packed: %s)", c->error_packed ? c->error_packed :
                               "completes");
                    }
                }
                printf("\n");
            }
        }
        return 0;
    }
    for (unsigned i = 0; i < NCASES; i++) {
        if (!strcmp(opt.chaos, cases[i].name)) {
            cur = &cases[i];
        }
    }
    if (!cur) {
        fprintf(stderr, "vblk-load: unknown --chaos case '%s' (see --chaos list)\n", opt.chaos);
        return 2;
    }
    if (!(cur->rings & (opt.packed ? RING_PACKED : RING_SPLIT))) {
        fprintf(stderr, "vblk-load: --chaos %s applies to %s rings only\n", cur->name,
                ring_names(cur->rings));
        return 2;
    }
    chaos_options();
    run_case();
    cleanup();
    return 0;
}
