/*
 * The qtest protocol client: one text command per line on a unix socket,
 * answered "OK [value]" by QEMU's main loop.  Setup uses it for port and
 * MMIO accesses, the data path only for kicks.  The socket is one channel:
 * a mutex serialises commands from several driver threads (--threads), and
 * its contention is counted.  Kicks may be pipelined (--kick async): sent
 * without waiting for the answer, which is read later.
 */
#ifndef VBLK_QTEST_H
#define VBLK_QTEST_H

#include <stdbool.h>
#include <stdint.h>

/* Use this connected socket for all commands. */
void qtest_attach(int fd);

/* Send one command (printf format, no newline), wait for "OK"; returns the
 * value of "OK value", or 0.  Dies on a failure or after opt.timeout. */
uint64_t qtest_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Counters of the command channel, cumulative. */
struct qtest_counts {
    uint64_t cmds;          /* commands sent */
    uint64_t contended;     /* commands that found the channel busy */
    uint64_t wait_ns;       /* time spent waiting for the channel */
    uint64_t busy_ns;       /* time the channel was held (round trips) */
    uint64_t max_outstanding;   /* most pipelined kicks not yet answered */
};
void qtest_counts(struct qtest_counts *c);

/* A kick: writew to the notify address; pipelined, it returns once sent. */
void qtest_kick(uint64_t addr, uint16_t val, bool pipelined);
/* writeb/w/l (size 'b', 'w', 'l'), pipelined: returns once sent. */
void qtest_write_pipelined(char size, uint64_t addr, uint32_t val);

void outl(uint16_t port, uint32_t v);
void outw(uint16_t port, uint16_t v);
void outb(uint16_t port, uint8_t v);
uint32_t inl(uint16_t port);
uint16_t inw(uint16_t port);
uint8_t inb(uint16_t port);
void writel(uint64_t a, uint32_t v);
void writew(uint64_t a, uint16_t v);
void writeb(uint64_t a, uint8_t v);
uint32_t readl(uint64_t a);
uint16_t readw(uint64_t a);
uint8_t readb(uint64_t a);

#endif
