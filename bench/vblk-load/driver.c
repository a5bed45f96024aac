/*
 * The load loop (driver.h).  A loop drives a range of queues: it looks at
 * each queue's MSI-X word (irq mode) or used ring (poll mode), reaps,
 * re-arms, resubmits, and yields the CPU after 64 looks that found nothing,
 * as an idle vCPU would halt.  The phase (ramp, measuring, stopping) is one
 * shared variable; whoever keeps time switches it and reads the counters at
 * the window's edges.
 */
#include "driver.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>

#include "qemu.h"
#include "stats.h"
#include "vblk-load.h"
#include "virtio.h"

enum { PH_RAMP, PH_MEASURE, PH_STOP };
static int phase = PH_RAMP;
struct window win;
static double mstart;

static void start_measuring(double t)
{
    if (win.have_qstats) {
        qmp_queue_stats(VBLK_QOM_PATH, &win.win0);
    }
    qtest_counts(&win.qt0);
    snapshot_threads(qemu_pid, 0);
    getrusage(RUSAGE_SELF, &win.ru0);
    host_cpu_sample(&win.host0);
    mstart = t;
    __atomic_store_n(&phase, PH_MEASURE, __ATOMIC_RELEASE);
}

static void stop_measuring(double t)
{
    __atomic_store_n(&phase, PH_STOP, __ATOMIC_RELEASE);
    win.elapsed = t - mstart;
    host_cpu_sample(&win.host1);
    getrusage(RUSAGE_SELF, &win.ru1);
    snapshot_threads(qemu_pid, 1);
    qtest_counts(&win.qt1);
    if (win.have_qstats) {
        qmp_queue_stats(VBLK_QOM_PATH, &win.win1);
    }
}

static void check_qemu(void)
{
    int st;
    if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
        qemu_pid = -1;
        die("QEMU exited during the run");
    }
}

struct range { unsigned first, last; bool timekeeper; double end; };

/* Drive queues [first, last) until they are drained after PH_STOP. */
static void *drive_range(void *arg)
{
    struct range *r = arg;
    int ph = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
    for (unsigned i = r->first; i < r->last; i++) {
        struct vq *q = &vqs[i];
        uint16_t old = q->avail_idx;
        for (unsigned s = 0; s < opt.depth; s++) {
            submit_slot(q, &q->slots[s]);
        }
        if (opt.irq) {
            arm_irq(q);
        }
        kick_if_needed(q, old, ph == PH_MEASURE);
    }
    double last_progress = now_s();
    uint64_t last_done = 0;
    unsigned long iter = 0;
    unsigned total_inflight = (r->last - r->first) * opt.depth;
    unsigned idle = 0;
    while (total_inflight > 0) {
        bool progressed = false;
        ph = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
        bool count = ph == PH_MEASURE, stopping = ph == PH_STOP;
        for (unsigned i = r->first; i < r->last; i++) {
            struct vq *q = &vqs[i];
            unsigned before = q->inflight;
            if (service_queue(q, stopping, count)) {
                progressed = true;
            }
            total_inflight -= before - q->inflight;
        }
        if ((++iter & 255) == 0 || progressed) {
            double t = now_s();
            if (r->timekeeper) {
                if (ph == PH_RAMP && t >= mstart) {
                    start_measuring(t);
                }
                if (ph == PH_MEASURE && t >= r->end) {
                    stop_measuring(t);
                }
                if ((iter & 65535) == 0) {
                    check_qemu();
                }
            }
            uint64_t done = 0;
            for (unsigned i = r->first; i < r->last; i++) {
                done += vqs[i].n.all;
            }
            if (done != last_done) {
                last_done = done;
                last_progress = t;
            } else if (t - last_progress > opt.timeout) {
                die("device did not complete any request for %.1fs "
                    "(%u requests in flight on queues %u-%u, %" PRIu64 " done)",
                    opt.timeout, total_inflight, r->first, r->last - 1, done);
            }
            if (got_signal) {
                die("interrupted by signal %d", (int)got_signal);
            }
        }
        if (progressed) {
            idle = 0;
        } else if (!opt.spin && ++idle > 64) {
            sched_yield();      /* let QEMU's threads have the CPU */
        } else {
            cpu_relax();
        }
    }
    return NULL;
}

void drive(void)
{
    double start = now_s();
    if (opt.ramp == 0) {
        start_measuring(start);
    }
    mstart = start + opt.ramp;
    double end = mstart + opt.duration;
    if (!opt.threads) {
        struct range r = { 0, opt.queues, true, end };
        drive_range(&r);
        return;
    }
    pthread_t *tids = calloc(opt.queues, sizeof(*tids));
    struct range *rs = calloc(opt.queues, sizeof(*rs));
    if (!tids || !rs) {
        die("out of memory");
    }
    for (unsigned i = 0; i < opt.queues; i++) {
        rs[i] = (struct range){ i, i + 1, false, end };
        int e = pthread_create(&tids[i], NULL, drive_range, &rs[i]);
        if (e) {
            die("pthread_create: %s", strerror(e));
        }
    }
    /* keep time: switch the phase, watch QEMU and signals */
    for (;;) {
        double t = now_s();
        int ph = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
        if (ph == PH_RAMP && t >= mstart) {
            start_measuring(t);
        } else if (ph == PH_MEASURE && t >= end) {
            stop_measuring(t);
            break;
        }
        if (got_signal) {
            die("interrupted by signal %d", (int)got_signal);
        }
        check_qemu();
        double next = __atomic_load_n(&phase, __ATOMIC_ACQUIRE) == PH_RAMP ? mstart : end;
        double wait = next - now_s();
        if (wait > 0.005) {
            wait = 0.005;
        }
        if (wait > 0) {
            struct timespec ts = { 0, (long)(wait * 1e9) };
            nanosleep(&ts, NULL);
        }
    }
    for (unsigned i = 0; i < opt.queues; i++) {
        pthread_join(tids[i], NULL);
    }
    free(tids);
    free(rs);
}
