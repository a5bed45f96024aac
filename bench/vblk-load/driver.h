/*
 * The driver: keeps --depth requests in flight on every queue, in poll or
 * irq mode, through a ramp, the measured window and the drain.  One thread
 * drives all queues, or with --threads one thread per queue (like vCPUs
 * that each own a queue) while the main thread keeps time.
 */
#ifndef VBLK_DRIVER_H
#define VBLK_DRIVER_H

#include <stdbool.h>
#include <sys/resource.h>

#include "qmp.h"
#include "qtest.h"
#include "stats.h"

/* QOM path of the device's VirtIODevice, for x-query-virtio-queue-stats */
#define VBLK_QOM_PATH "/machine/peripheral/vblk0/virtio-backend"

/* What is read at the edges of the measured window and of the run. */
struct window {
    double elapsed;                 /* seconds measured */
    struct rusage ru0, ru1;         /* our own CPU */
    struct qtest_counts qt0, qt1;   /* the qtest channel */
    struct host_cpu host0, host1;   /* /proc/stat */
    bool have_qstats;               /* QEMU has x-query-virtio-queue-stats */
    struct qstats run0, win0, win1, run1;   /* run start, window, after drain */
};
extern struct window win;

/* Run: submit, ramp, measure, drain; fills win (but run1). */
void drive(void);

#endif
