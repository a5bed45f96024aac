/*
 * vblk-load: a guest-less virtio-blk load generator (docs/vblk-load.md).
 *
 * What every part shares: the options, the error exit, clocks.  The parts,
 * split the way QEMU's libqos is:
 *   qtest.c   the qtest protocol client (setup and kicks)
 *   qmp.c     the QMP client and QEMU's virtqueue statistics
 *   qemu.c    the QEMU process, its sockets and the guest RAM file
 *   pci.c     PCI configuration space, BARs, capabilities
 *   virtio.c  virtio-pci initialisation, split and packed virtqueues
 *   driver.c  the load loop, the measured window, --threads
 *   stats.c   latency histogram, CPU per thread, strace
 *   image.c   the disk image of --chaos and the check of what changed
 *   chaos.c   --chaos: a hostile guest on one queue, checked I/O on another
 *   main.c    options and the report
 */
#ifndef VBLK_LOAD_H
#define VBLK_LOAD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum rwmode { RW_READ, RW_WRITE, RW_RANDREAD, RW_RANDWRITE, RW_RANDRW };
extern const char *const rw_names[];

struct options {
    const char *qemu;
    unsigned queues, depth, bs;
    enum rwmode rw;
    unsigned rwmix_read;
    double duration, ramp;
    bool strace, spin, threads, kick_async, kick_eventfd;
    bool pin;               /* --pin: each IOThread on a CPU of its own */
    long poll_max_ns;
    bool event_idx, iothread, irq, json, verify;
    unsigned iothreads;     /* >= 2: the queues over this many IOThreads */
    const char *blockdev;
    double timeout;
    unsigned queue_size;
    const char *extra_dev;
    uint64_t seed;
    bool packed;            /* --ring packed: VIRTIO_F_RING_PACKED */
    const char *chaos;      /* --chaos CASE: a hostile guest (chaos.c) */
    const char *aio;        /* --aio: the --chaos disk's aio mode */
    unsigned dev_queues;    /* the device's num-queues, if not opt.queues */
    const char *qtest_log;  /* -qtest-log: "none", or a file QEMU writes */
};
extern struct options opt;

/* set by the signal handler; every wait loop checks it */
extern volatile sig_atomic_t got_signal;

/* Print the error (and QEMU's stderr), stop QEMU, exit 1.  Any thread.
 * With --chaos, exit CHAOS_CRASH if QEMU died on a signal, CHAOS_HANG if it
 * stopped answering (qemu_hung set before the call). */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
extern bool qemu_hung;
#define CHAOS_CRASH 3
#define CHAOS_HANG 4

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* The IOThread setup as the reports name it: "on", "off", or "xN" for
 * --iothreads N */
const char *iothread_label(void);
/* How many IOThreads QEMU gets: 0 with --iothread off, else 1 or N */
unsigned iothread_count(void);

#endif
