/*
 * --chaos CASE: vblk-load as a broken or malicious guest (docs/vblk-load.md,
 * "A hostile driver").  Queue 0 of the device does good I/O, checked, in a
 * thread of its own; queue 1 gets one hostile case from the main thread;
 * queue 2 exists but is never set up.  Each case names what QEMU does with
 * it (completes the requests with a status, or marks the device broken
 * through virtio_error(): NEEDS_RESET and a message), and the run asserts
 * exactly that, then that the good queue kept completing, that nothing
 * outside the requested sectors of the disk image changed, that the device
 * stops writing guest RAM once a reset reads back 0, that both queues do
 * verified I/O after the reset, and that QEMU stays up and exits cleanly.
 * The good queue polls its used ring, or with --mode irq waits for its
 * MSI-X messages, so that a lost notification shows as a stalled queue.
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

#include "image.h"
#include "pci.h"
#include "qemu.h"
#include "qtest.h"
#include "vblk-load.h"
#include "virtio.h"

#define ST_NEEDS_RESET 0x40
#define F_NEXT     1
#define F_WRITE    2
#define F_INDIRECT 4
#define T_IN  0
#define T_OUT 1
#define S_OK     0
#define S_IOERR  1
#define S_UNSUPP 2

/* The disk: the good queue's region, then sectors the cases use. */
#define IMG_SECTORS  8192       /* 4 MiB */
#define GOOD_SECTORS 2048       /* [0, 1 MiB): queue 0's verified I/O */
#define HS_WRITE     4096       /* where a case may write */
#define HS_READ      6144       /* where cases read from (never written) */
#define IMG_SEED     0xc4a05c4a05ull
/* Guest-physical address with nothing behind it (q35, no RAM above 4G). */
#define NO_RAM       0x8000000000ull

#define MIN_GOOD     16         /* good completions that show a queue works */

/* A case: what it does to queue 1, and what QEMU must do about it. */
struct chaos_case {
    const char *name;
    void (*run)(void);
    const char *error;      /* the virtio_error() message, NULL: no error */
    bool resets;            /* the case resets the device itself */
    int selftest;           /* if not 0: a negative check, which must exit
                               with this status (a check that catches it) */
    const char *what;
};

static const struct chaos_case *cur;
static char img_path[256];
static struct vq *hq;                       /* the hostile queue */
static uint64_t h_hdr, h_st, h_buf, h_ind;  /* its buffers (guest addresses) */
static struct sector_range mods[4];         /* what the case may change */
static unsigned nmods;
static char outcome[256];                   /* what QEMU did, for the report */
static char statuses[64];                   /* of queue 1's completed requests */

/* "iothread on, poll, EVENT_IDX": how the device and the good queue run */
static const char *config_name(void)
{
    static char s[64];
    snprintf(s, sizeof(s), "iothread %s, %s, %s", opt.iothread ? "on" : "off",
             opt.irq ? "irq" : "poll", opt.event_idx ? "EVENT_IDX" : "no EVENT_IDX");
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
        for (unsigned s = 0; s < opt.depth; s++) {
            submit_slot(&vqs[i], &vqs[i].slots[s]);
        }
        if (opt.irq) {
            arm_irq(&vqs[i]);
        }
        kick_if_needed(&vqs[i], 0, false);
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
 * it (the device is broken or was reset). */
static void good_stop(bool drain)
{
    if (!good.running) {
        return;
    }
    __atomic_store_n(&good.stop, drain ? GOOD_DRAIN : GOOD_ABANDON, __ATOMIC_RELEASE);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)opt.timeout + 1;
    if (pthread_timedjoin_np(good.tid, NULL, &ts)) {
        __atomic_store_n(&good.stop, GOOD_ABANDON, __ATOMIC_RELEASE);
        pthread_join(good.tid, NULL);
        good.running = false;
        fail("the good queue's requests in flight did not complete within %.0fs",
             opt.timeout + 1);
    }
    good.running = false;
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

/* ---- the hostile queue's requests ---- */
static void hdesc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
    hq->desc[i] = (struct vdesc){ addr, len, flags, next };
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

/* A well-formed request in descriptors d..d+2, header and status n. */
static void hreq(unsigned d, unsigned n, uint32_t type, uint64_t sector, uint64_t buf,
                 uint32_t len)
{
    hdesc(d, hhdr(n, type, sector), 16, F_NEXT, d + 1);
    hdesc(d + 1, buf, len, F_NEXT | (type == T_IN ? F_WRITE : 0), d + 2);
    hdesc(d + 2, h_st + n, 1, F_WRITE, 0);
}

static void hpost(uint16_t head)
{
    hq->avail[2 + hq->avail_idx % hq->size] = head;
    hq->avail_idx++;
}

static void hpublish(void)
{
    __atomic_store_n(&hq->avail[1], hq->avail_idx, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Publish the avail index and kick queue 1. */
static void hkick(void)
{
    hpublish();
    writew(hq->notify_addr, hq->idx);
}

static uint16_t hused(void)
{
    return __atomic_load_n(&hq->used_hdr[1], __ATOMIC_ACQUIRE);
}

static bool needs_reset(void)
{
    return virtio_status() & ST_NEEDS_RESET;
}

/* Wait for n completions on queue 1 (false if the device broke first). */
static void expect_done(unsigned n)
{
    uint16_t want = hq->last_used + n;
    for (double end = now_s() + opt.timeout; now_s() < end; sleep_s(0.001)) {
        if ((uint16_t)(hused() - hq->last_used) >= n) {
            if (hused() != want) {
                fail("queue 1 completed %u requests, %u were posted",
                     (uint16_t)(hused() - hq->last_used), n);
            }
            hq->last_used = want;
            return;
        }
        if (needs_reset()) {
            fail("the device set NEEDS_RESET instead of completing the request(s)");
        }
    }
    fail("queue 1 completed %u of %u requests within %.0fs", (uint16_t)(hused() - hq->last_used),
         n, opt.timeout);
}

/* The status byte of completed request n must be want. */
static void expect_status(unsigned n, uint8_t want)
{
    static const char *const names[] = { "OK", "IOERR", "UNSUPP" };
    size_t l = strlen(statuses);
    if (hstatus(n) != want) {
        fail("request %u completed with status %u, expected %u", n, hstatus(n), want);
    }
    snprintf(statuses + l, sizeof(statuses) - l, "%s%s", l ? ", " : "",
             want < 3 ? names[want] : "?");
}

/* Wait for NEEDS_RESET; unless some may complete first (may_complete),
 * queue 1 must not complete any request. */
static void expect_broken(bool may_complete)
{
    for (double end = now_s() + opt.timeout; !needs_reset(); sleep_s(0.002)) {
        if (!may_complete && hused() != hq->last_used) {
            fail("queue 1 completed a request (status %u) instead of NEEDS_RESET",
                 hstatus(0));
        }
        if (now_s() > end) {
            fail("the device did not set NEEDS_RESET within %.0fs (queue 1 completed %u)",
                 opt.timeout, (uint16_t)(hused() - hq->last_used));
        }
    }
}

/* The guest memory at p must hold the image's pattern of n sectors at s. */
static void expect_pattern(const void *p, uint64_t s, unsigned n)
{
    uint8_t want[4096];
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

/* ---- the cases ---- */
static void one_bad_data_desc(uint64_t addr, uint32_t len)
{
    hdesc(0, hhdr(0, T_IN, HS_READ), 16, F_NEXT, 1);
    hdesc(1, addr, len, F_WRITE | F_NEXT, 2);
    hdesc(2, h_st, 1, F_WRITE, 0);
    hpost(0);
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
    /* write the descriptor table itself (this chain included) to the disk */
    hreq(0, 0, T_OUT, HS_WRITE, (uint8_t *)hq->desc - (uint8_t *)gpa(0), 4096);
    memcpy(table, hq->desc, sizeof(table));
    may_change(HS_WRITE, 8);
    hpost(0);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    /* read the disk into the unused upper half of the table */
    hreq(3, 1, T_IN, HS_READ, (uint8_t *)hq->desc - (uint8_t *)gpa(0) + 2048, 2048);
    hpost(3);
    hkick();
    expect_done(1);
    expect_status(1, S_OK);
    expect_pattern((uint8_t *)hq->desc + 2048, HS_READ, 4);
    /* what the first request wrote is the table as it was */
    int fd = open(img_path, O_RDONLY);
    uint8_t disk[4096];
    if (fd < 0 || pread(fd, disk, 4096, HS_WRITE * 512ull) != 4096) {
        fail("cannot read back %s", img_path);
    }
    close(fd);
    if (memcmp(disk, table, 4096)) {
        fail("the disk does not hold the descriptor table that was written");
    }
}

static void case_ring_used(void)
{
    /* read one sector into the used ring, past the entry this request gets */
    uint64_t used = (uint8_t *)hq->used_hdr - (uint8_t *)gpa(0);
    hreq(0, 0, T_IN, HS_READ, used + 512, 512);
    hpost(0);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    if (hq->used_ring[0].id != 0) {
        fail("used ring entry 0 names descriptor %u, not 0", hq->used_ring[0].id);
    }
    expect_pattern((uint8_t *)hq->used_hdr + 512, HS_READ, 1);
}

static void case_loop(void)
{
    hdesc(0, hhdr(0, T_OUT, HS_WRITE), 16, F_NEXT, 1);
    hdesc(1, h_buf, 512, F_NEXT, 0);
    hpost(0);
    hkick();
    expect_broken(false);
}

static void indirect(uint32_t len)
{
    hdesc(0, h_ind, len, F_INDIRECT, 0);
    hpost(0);
    hkick();
}

static void case_indirect_len(void)
{
    struct vdesc *t = gpa(h_ind);
    t[0] = (struct vdesc){ hhdr(0, T_IN, HS_READ), 16, F_NEXT, 1 };
    t[1] = (struct vdesc){ h_buf, 4096, F_WRITE | F_NEXT, 2 };
    indirect(20);
    expect_broken(false);
}

static void case_indirect_next(void)
{
    struct vdesc *t = gpa(h_ind);
    t[0] = (struct vdesc){ hhdr(0, T_IN, HS_READ), 16, F_NEXT, 1 };
    t[1] = (struct vdesc){ h_buf, 4096, F_WRITE | F_NEXT, 2 };
    t[2] = (struct vdesc){ h_st, 1, F_WRITE, 0 };
    indirect(16);       /* one entry, which says that a next one follows */
    expect_broken(false);
}

static void case_indirect_ok(void)
{
    struct vdesc *t = gpa(h_ind);
    t[0] = (struct vdesc){ hhdr(0, T_IN, HS_READ), 16, F_NEXT, 1 };
    t[1] = (struct vdesc){ h_buf, 4096, F_WRITE | F_NEXT, 2 };
    t[2] = (struct vdesc){ h_st, 1, F_WRITE, 0 };
    memset(gpa(h_buf), 0xa5, 4096);
    indirect(3 * 16);
    expect_done(1);
    expect_status(0, S_OK);
    expect_pattern(gpa(h_buf), HS_READ, 8);
}

static void case_short_hdr(void)
{
    hreq(0, 0, T_IN, HS_READ, h_buf, 4096);
    hq->desc[0].len = 8;
    hpost(0);
    hkick();
    expect_broken(false);
}

static void case_no_status(void)
{
    hdesc(0, hhdr(0, T_OUT, HS_WRITE), 16, F_NEXT, 1);
    hdesc(1, h_buf, 512, 0, 0);
    hpost(0);
    hkick();
    expect_broken(false);
}

static void case_bad_type(void)
{
    hreq(0, 0, 0x55, HS_READ, h_buf, 512);
    hq->desc[1].flags |= F_WRITE;
    hpost(0);
    hkick();
    expect_done(1);
    expect_status(0, S_UNSUPP);
}

static void case_past_end(void)
{
    hreq(0, 0, T_IN, IMG_SECTORS - 1, h_buf, 4096);         /* crosses the end */
    hreq(3, 1, T_OUT, IMG_SECTORS, h_buf, 512);             /* just past it */
    hreq(6, 2, T_OUT, ~0ull - 7, h_buf, 4096);              /* sector + n wraps */
    hpost(0);
    hpost(3);
    hpost(6);
    hkick();
    expect_done(3);
    for (unsigned n = 0; n < 3; n++) {
        expect_status(n, S_IOERR);
    }
}

static void case_avail_jump(void)
{
    hreq(0, 0, T_IN, HS_READ, h_buf, 512);
    for (unsigned i = 0; i <= hq->size; i++) {
        hpost(0);       /* size + 1 heads: more than the queue can hold */
    }
    hkick();
    expect_broken(false);
}

static void case_bad_head(void)
{
    hreq(0, 0, T_IN, HS_READ, h_buf, 512);
    hpost(0xffff);
    hkick();
    expect_broken(false);
}

static void case_kick_unconfigured(void)
{
    writew(virtio_notify_addr(2), 2);       /* exists, never set up */
    writew(virtio_notify_addr(1023), 1023); /* the last queue index virtio has */
    sleep_s(0.05);
    /* queue 1 still works */
    hreq(0, 0, T_IN, HS_READ, h_buf, 4096);
    hpost(0);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
    expect_pattern(gpa(h_buf), HS_READ, 8);
}

/* 64 reads of 64 KiB (into the same buffer), posted. */
#define SOME_READS 64
static void some_reads(void)
{
    for (unsigned n = 0; n < SOME_READS; n++) {
        hreq(3 * n, n, T_IN, HS_READ + 128 * (n % 16), h_buf, 65536);
        hpost(3 * n);
    }
    hpublish();
}

/* before: requests done when the reset was written, -1 if sent with the kick */
static void reset_outcome(int before)
{
    char b[64] = "the reset was sent with the kick";
    if (before >= 0) {
        snprintf(b, sizeof(b), "queue 1 had completed %d of %u requests when it was written",
                 before, SOME_READS);
    }
    snprintf(outcome, sizeof(outcome), "reset read back 0; %s, %u when it read back 0", b,
             (uint16_t)(hused() - hq->last_used));
}

static void case_reset_mid_io(void)
{
    some_reads();
    writew(hq->notify_addr, hq->idx);
    int before = (uint16_t)(hused() - hq->last_used);
    virtio_reset();
    reset_outcome(before);
}

static void case_reset_racing_kick(void)
{
    some_reads();
    virtio_reset_after_kick(hq);
    reset_outcome(-1);
}

static void case_disable_mid_io(void)
{
    some_reads();
    writew(hq->notify_addr, hq->idx);
    virtio_queue_enable(1, 0);
    expect_broken(true);
}

/* Negative checks: each must fail, or a check is blind. */
static void case_selftest_corrupt(void)
{
    /* a valid write where the case did not declare one */
    memset(gpa(h_buf), 0x5a, 4096);
    hreq(0, 0, T_OUT, HS_WRITE, h_buf, 4096);
    hpost(0);
    hkick();
    expect_done(1);
    expect_status(0, S_OK);
}

static void case_selftest_outcome(void)
{
    /* a valid read, declared as one that breaks the device */
    hreq(0, 0, T_IN, HS_READ, h_buf, 4096);
    hpost(0);
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
    hreq(0, 0, T_IN, HS_READ, h_buf, 4096);
    hpost(0);
    hkick();
}

static const struct chaos_case cases[] = {
    { "oob-desc", case_oob_desc, "virtio: bogus descriptor or out of resources", false, false,
      "a 64 KiB buffer at 512 GiB, where there is no RAM" },
    { "oob-small", case_oob_small, NULL, false, false,
      "a 512-byte buffer at 512 GiB: mapped through QEMU's bounce buffer, data dropped" },
    { "ring-desc", case_ring_desc, NULL, false, false,
      "buffers in the queue's own descriptor table: written to disk, read into it" },
    { "ring-used", case_ring_used, NULL, false, false,
      "a read into the used ring, which the device writes too" },
    { "zero-len", case_zero_len, "virtio: zero sized buffers are not allowed", false, false,
      "a data descriptor of length 0" },
    { "huge-len", case_huge_len, "virtio: bogus descriptor or out of resources", false, false,
      "a data descriptor of 4 GiB - 4 KiB, past the end of RAM" },
    { "loop", case_loop, "Looped descriptor", false, false,
      "a chain whose second descriptor points back to the first" },
    { "indirect-len", case_indirect_len, "Invalid size for indirect buffer table", false,
      false, "an indirect table of 20 bytes (not a multiple of 16)" },
    { "indirect-next", case_indirect_next, "Desc next is 1", false, false,
      "an indirect table of one entry that chains to a second" },
    { "indirect-ok", case_indirect_ok, NULL, false, false,
      "a valid indirect table (control for the two above)" },
    { "short-hdr", case_short_hdr, "virtio-blk request outhdr too short", false, false,
      "a request header of 8 bytes instead of 16" },
    { "no-status", case_no_status, "virtio-blk missing headers", false, false,
      "a chain with no device-writable descriptor (no status byte)" },
    { "bad-type", case_bad_type, NULL, false, false,
      "request type 0x55" },
    { "past-end", case_past_end, NULL, false, false,
      "a read across the disk's end, a write just past it, one whose sector wraps" },
    { "avail-jump", case_avail_jump, "Virtqueue size exceeded", false, false,
      "the avail index moved by queue size + 1" },
    { "bad-head", case_bad_head, "Guest says index 65535 is available", false, false,
      "an avail ring entry naming descriptor 65535" },
    { "kick-unconfigured", case_kick_unconfigured, NULL, false, false,
      "kicks on queue 2 (never set up) and on queue 1023, then a valid request" },
    { "reset-mid-io", case_reset_mid_io, NULL, true, false,
      "a device reset right after 64 reads of 64 KiB were kicked, the good queue busy" },
    { "reset-racing-kick", case_reset_racing_kick, NULL, true, false,
      "the same, with the reset sent before QEMU answered the kick" },
    { "disable-mid-io", case_disable_mid_io, "wrong value for queue_enable 0", false, false,
      "queue_enable = 0 on queue 1 right after 64 reads of 64 KiB were kicked" },
    { "selftest-corrupt", case_selftest_corrupt, NULL, false, 1,
      "a valid write to sectors the case did not declare: the image check fails" },
    { "selftest-outcome", case_selftest_outcome, "(no error)", false, 1,
      "a valid read declared as breaking the device: the outcome check fails" },
    { "selftest-crash", case_selftest_crash, NULL, false, CHAOS_CRASH,
      "QEMU killed by SIGSEGV: reported as a crash" },
    { "selftest-hang", case_selftest_hang, NULL, false, CHAOS_HANG,
      "QEMU stopped (SIGSTOP): reported as a hang" },
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

/* NEEDS_RESET, the message and the config interrupt, or none of them. */
static void check_outcome(void)
{
    char line[512] = "";
    bool broken = needs_reset();
    if (!cur->error) {
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
        fail("expected NEEDS_RESET and '%s', the device is not broken", cur->error);
    }
    if (!log_lines(cur->error, line, sizeof(line))) {
        log_lines(NULL, line, sizeof(line));
        fail("NEEDS_RESET, but QEMU did not say '%s' (it said: %s)", cur->error, line);
    }
    if (log_lines(NULL, NULL, 0) != log_lines(cur->error, NULL, 0)) {
        fail("QEMU printed other errors besides '%s'", cur->error);
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
    if (cur->error) {
        /* a broken device pops and completes nothing (virtio_device_disabled) */
        sleep_s(0.02);
        uint16_t u0 = vqs[0].used_hdr[1], u1 = hused();
        sleep_s(0.1);
        if (vqs[0].used_hdr[1] != u0 || hused() != u1) {
            fail("the device completed requests after it set NEEDS_RESET");
        }
        return completed(0) - before;
    }
    if (!good_wait(0, MIN_GOOD, opt.timeout)) {
        fail("the good queue completed %" PRIu64 " requests in %.0fs after the case",
             completed(0) - before, opt.timeout);
    }
    return completed(0) - before;
}

/* After a reset reads back 0 the device must not write guest RAM: the
 * used rings, the status bytes and the MSI-X message words stay as they
 * are. */
static void check_quiet_after_reset(void)
{
    size_t ul = 6 + 8 * vqs[0].size, n = 2 * ul + 64 + 3 * 4;
    uint8_t *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        die("out of memory");
    }
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *p = pass ? b : a;
        uint32_t w[3] = { *virtio_config_msi(), *vqs[0].msi_word, *vqs[1].msi_word };
        memcpy(p, (void *)vqs[0].used_hdr, ul);
        memcpy(p + ul, (void *)vqs[1].used_hdr, ul);
        memcpy(p + 2 * ul, gpa(h_st), 64);
        memcpy(p + 2 * ul + 64, w, sizeof(w));
        if (!pass) {
            sleep_s(0.05);
        }
    }
    bool same = !memcmp(a, b, n);
    free(a);
    free(b);
    if (!same) {
        fail("the device wrote guest RAM after its reset read back 0");
    }
}

static void check_image(const char *when)
{
    char why[256];
    struct image_rules r = {
        .sectors = IMG_SECTORS, .seed = IMG_SEED, .good_sectors = GOOD_SECTORS,
        .good_seed = opt.seed, .mod = mods, .nmod = nmods,
    };
    uint64_t bad = image_check(img_path, &r, why, sizeof(why));
    if (bad) {
        fail("%s: %" PRIu64 " sectors changed that must not: %s", when, bad, why);
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
    snprintf(img_path, sizeof(img_path), "%s/vblk-chaos-%d.img", shm, (int)getpid());
    snprintf(bdev, sizeof(bdev), "driver=file,filename=%s,node-name=disk0", img_path);
    opt.blockdev = bdev;
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
    virtio_io_range(0, GOOD_SECTORS);
    virtio_init();
    if (capacity_sectors != IMG_SECTORS) {
        die("capacity %" PRIu64 " sectors, the image has %u", capacity_sectors, IMG_SECTORS);
    }
    hq = &vqs[1];
    h_hdr = ram_alloc(16 * 32, 16);
    h_st = ram_alloc(64, 64);
    h_buf = ram_alloc(65536, 4096);
    h_ind = ram_alloc(4096, 4096);
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
    good_stop(!cur->error && !cur->resets);
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
           "case, %s %" PRIu64 "; image intact; reset, re-init, verified I/O on both queues: "
           "ok\n", cur->name, config_name(), outcome, during,
           cur->resets ? "none expected after the reset," : cur->error ?
           "none after NEEDS_RESET, reaped after it:" : "after it:", after);
}

int chaos_main(void)
{
    if (!strcmp(opt.chaos, "list") || !strcmp(opt.chaos, "selftests")) {
        bool self = !strcmp(opt.chaos, "selftests");
        for (unsigned i = 0; i < NCASES; i++) {
            if (self && cases[i].selftest) {
                printf("%-18s %d %s\n", cases[i].name, cases[i].selftest, cases[i].what);
            } else if (!self && !cases[i].selftest) {
                printf("%-18s %s%s%s\n", cases[i].name, cases[i].what,
                       cases[i].error ? ": " : "", cases[i].error ? cases[i].error : "");
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
    chaos_options();
    run_case();
    cleanup();
    return 0;
}
