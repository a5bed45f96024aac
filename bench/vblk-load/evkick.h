/*
 * --kick eventfd: kicks that bypass QEMU's main loop, as a KVM guest's do.
 * KVM turns the guest's write to the notify address into a write to the
 * queue's ioeventfd, in the kernel; QEMU's IOThread is woken by that
 * eventfd and its main loop takes no part.  Under qtest the write goes
 * through the main loop instead (qtest command, memory dispatch, eventfd
 * write).  Here the driver takes a duplicate of each queue's ioeventfd
 * from QEMU with pidfd_getfd(2) and writes it itself.
 */
#ifndef VBLK_EVKICK_H
#define VBLK_EVKICK_H

#include <sys/types.h>

/*
 * Find the host notifier (ioeventfd) of each queue in QEMU (pid) and set
 * vqs[i].kick_fd.  Call after DRIVER_OK and before any request is in
 * flight: each queue is probed with one request, which is reaped again.
 * Dies with a message if a queue's eventfd cannot be found.
 */
void evkick_attach(pid_t pid);

#endif
