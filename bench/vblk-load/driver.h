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

#include "qtest.h"
#include "stats.h"

/* What is read at the edges of the measured window. */
struct window {
    double elapsed;                 /* seconds measured */
    struct rusage ru0, ru1;         /* our own CPU */
    struct qtest_counts qt0, qt1;   /* the qtest channel */
    struct host_cpu host0, host1;   /* /proc/stat */
};
extern struct window win;

/* Run: submit, ramp, measure, drain; fills win. */
void drive(void);

#endif
