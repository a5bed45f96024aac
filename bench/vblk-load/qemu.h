/*
 * The QEMU process: the guest RAM file it shares with us, the unix
 * sockets it connects to (qtest, QMP), starting it with the device, and
 * stopping it (cleanup, also on every error exit).
 */
#ifndef VBLK_QEMU_H
#define VBLK_QEMU_H

#include <stdint.h>
#include <sys/types.h>

extern pid_t qemu_pid;

/* Guest RAM: a file in /dev/shm mapped here and given to QEMU.  The first
 * RAM_ALLOC_START bytes are left alone; ram_alloc() hands out the rest. */
#define RAM_ALLOC_START (16u << 20)
void ram_create(uint64_t size);
void ram_unlink(void);          /* once QEMU has opened it */
uint64_t ram_alloc(uint64_t size, uint64_t align);   /* zeroed; a guest address */
void *gpa(uint64_t addr);
/* The end of what ram_alloc() has handed out so far. */
uint64_t ram_alloc_end(void);

/* Start QEMU with one virtio-blk-pci device (id vblk0) from the options;
 * returns once it has connected to both sockets. */
struct qemu_conn { int qtest_fd, qmp_fd; };
void qemu_start(struct qemu_conn *c);
/* The -blockdev node name of the disk. */
const char *qemu_node_name(void);

/* The file that has QEMU's stderr (until cleanup). */
const char *qemu_log(void);
/* SIGTERM, then wait up to secs for QEMU to exit: its wait status, or -1
 * if it is still running (cleanup() kills it). */
int qemu_stop(double secs);

/*
 * --pin: a CPU of its own for each IOThread, the other allowed CPUs for
 * every other thread (ours, QEMU's main loop and workers).  pin_prepare()
 * runs before qemu_start() and any thread, so that everything started
 * later inherits the shared CPUs; pin_iothreads() then moves QEMU's
 * IOThreads, once QEMU is up.  pin_cpu[i] is IOThread i's CPU.
 */
void pin_prepare(void);
void pin_iothreads(void);
extern int pin_cpu[16];

/* Stop QEMU and strace, remove the files.  Idempotent. */
void cleanup(void);

#endif
