/*
 * --kick eventfd (evkick.h): each queue's ioeventfd, taken from QEMU with
 * pidfd_getfd(2) and written by the driver, as KVM writes it for a guest.
 *
 * QEMU does not say which of its file descriptors is which, so the queue's
 * eventfd is found by trying: with one request published and not kicked,
 * each of QEMU's eventfds (newest first: the host notifiers are made last,
 * at DRIVER_OK) is written once, and the one after which the request
 * completes is confirmed twice more.  Writing another eventfd of QEMU's is
 * harmless: they are wake-ups that tolerate spurious writes; a guest
 * notifier's makes an MSI-X message, which is cleared here before the run
 * and before QEMU's counters are first read.
 */
#include "evkick.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "qmp.h"
#include "qtest.h"
#include "vblk-load.h"
#include "virtio.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/*
 * How long a kicked probe may take (QEMU's IOThread may wait for a CPU on
 * a busy machine), and how long an unkicked one must stay pending.
 */
#define IOTHREAD_QOM_PATH "/objects/iothread0"
#define KICKED_S 0.5
#define NOT_KICKED_S 0.1

struct cand { int remote, local; bool taken; };

static int cmp_desc(const void *a, const void *b)
{
    return ((const struct cand *)b)->remote - ((const struct cand *)a)->remote;
}

/* QEMU's eventfds, duplicated into this process, newest (highest) first. */
static struct cand *eventfds(pid_t pid, int *n)
{
    char path[64], link[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        die("--kick eventfd: cannot list %s: %s", path, strerror(errno));
    }
    int pidfd = syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        die("--kick eventfd: pidfd_open: %s (needs Linux 5.6)", strerror(errno));
    }
    struct cand *c = NULL;
    int nc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char fp[352];
        snprintf(fp, sizeof(fp), "%s/%s", path, de->d_name);
        ssize_t l = readlink(fp, link, sizeof(link) - 1);
        if (l < 0) {
            continue;
        }
        link[l] = 0;
        if (strcmp(link, "anon_inode:[eventfd]")) {
            continue;
        }
        int remote = atoi(de->d_name);
        int local = syscall(SYS_pidfd_getfd, pidfd, remote, 0);
        if (local < 0) {
            die("--kick eventfd: pidfd_getfd of QEMU's fd %d: %s (needs Linux 5.6 and "
                "ptrace rights over QEMU)", remote, strerror(errno));
        }
        c = realloc(c, (nc + 1) * sizeof(*c));
        if (!c) {
            die("out of memory");
        }
        c[nc++] = (struct cand){ remote, local, false };
    }
    closedir(d);
    close(pidfd);
    qsort(c, nc, sizeof(*c), cmp_desc);
    *n = nc;
    return c;
}

static void publish(struct vq *q)
{
    submit_slot(q, &q->slots[0]);
    __atomic_store_n(&q->avail[1], q->avail_idx, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static bool completes_within(struct vq *q, double secs)
{
    for (double end = now_s() + secs; now_s() < end; usleep(50)) {
        if (__atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE) != q->last_used) {
            return true;
        }
    }
    return false;
}

/* Reap the probe and forget it: the run starts from a clean queue. */
static void finish(struct vq *q)
{
    reap(q, false);
    q->nfree = 0;
    q->n.all = 0;
    __atomic_store_n(q->msi_word, 0, __ATOMIC_RELEASE);
}

static void write_fd(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) != sizeof(one)) {
        die("--kick eventfd: write: %s", strerror(errno));
    }
}

/* Complete a probe that no eventfd completed: kick it the qtest way. */
static void flush(struct vq *q)
{
    qtest_kick(q->notify_addr, q->idx, false);
    if (!completes_within(q, opt.timeout)) {
        die("--kick eventfd: a probe request on queue %u did not complete", q->idx);
    }
    finish(q);
}

/*
 * Publish one request that stays pending: right after DRIVER_OK the device
 * looks at its queues once by itself, and an IOThread that has just
 * completed something polls the queue for a while and takes requests
 * without a kick.
 */
static void publish_pending(struct vq *q)
{
    for (int tries = 0;; tries++) {
        usleep(10000);
        publish(q);
        if (!completes_within(q, NOT_KICKED_S)) {
            return;
        }
        finish(q);
        if (tries == 20) {
            die("--kick eventfd: queue %u keeps completing requests that were not "
                "kicked; cannot tell its eventfd", q->idx);
        }
    }
}

void evkick_attach(pid_t pid)
{
    int nc;
    struct cand *c = eventfds(pid, &nc);
    /*
     * A polling IOThread looks at the queue whenever anything wakes it,
     * e.g. a write to its own AioContext notifier, which would then pass
     * for the queue's eventfd: no polling while probing.
     */
    long long poll_max = 0;
    if (opt.iothread) {
        poll_max = qmp_qom_get_int(IOTHREAD_QOM_PATH, "poll-max-ns");
        qmp_qom_set_int(IOTHREAD_QOM_PATH, "poll-max-ns", 0);
    }
    for (unsigned i = 0; i < opt.queues; i++) {
        struct vq *q = &vqs[i];
        publish_pending(q);
        int found = -1;
        for (int k = 0; k < nc && found < 0; k++) {
            if (c[k].taken) {
                continue;
            }
            write_fd(c[k].local);
            if (!completes_within(q, KICKED_S)) {
                continue;
            }
            finish(q);
            bool ok = true;
            for (int r = 0; r < 2 && ok; r++) {
                publish_pending(q);
                write_fd(c[k].local);
                ok = completes_within(q, KICKED_S);
                if (ok) {
                    finish(q);
                } else {
                    flush(q);
                }
            }
            if (ok) {
                found = k;
            } else {
                publish_pending(q);     /* a new probe for the next candidate */
            }
        }
        if (found < 0) {
            flush(q);
            die("--kick eventfd: none of QEMU's %d eventfds kicks queue %u", nc, i);
        }
        c[found].taken = true;
        q->kick_fd = c[found].local;
        q->has_kick_fd = true;
    }
    for (int k = 0; k < nc; k++) {
        if (!c[k].taken) {
            close(c[k].local);
        }
    }
    free(c);
    if (opt.iothread) {
        qmp_qom_set_int(IOTHREAD_QOM_PATH, "poll-max-ns", poll_max);
    }
}
