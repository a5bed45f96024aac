/*
 * The qtest protocol client (see qtest.h).  Lines starting with "IRQ " are
 * interrupt notifications that QEMU may interleave; they are skipped.
 */
#include "qtest.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "vblk-load.h"

static int qfd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* all below under lock */
static char rbuf[65536];
static size_t rlen, rpos;
static char last_cmd[256];
static struct qtest_counts counts;
static uint64_t outstanding;    /* pipelined commands not answered yet */

void qtest_attach(int fd)
{
    qfd = fd;
}

void qtest_counts(struct qtest_counts *c)
{
    pthread_mutex_lock(&lock);
    *c = counts;
    pthread_mutex_unlock(&lock);
}

static void qtest_send(const char *cmd)
{
    size_t len = strlen(cmd), off = 0;
    while (off < len) {
        ssize_t n = send(qfd, cmd + off, len - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("qtest send failed: %s (did QEMU exit?)", strerror(errno));
        }
        off += n;
    }
}

/* Take one complete line, IRQ notifications skipped, from what was read. */
static bool take_line(char *line, size_t size)
{
    for (;;) {
        char *nl = memchr(rbuf + rpos, '\n', rlen - rpos);
        if (!nl) {
            return false;
        }
        size_t l = nl - (rbuf + rpos);
        if (l >= size) {
            l = size - 1;
        }
        memcpy(line, rbuf + rpos, l);
        line[l] = 0;
        rpos = nl - rbuf + 1;
        if (strncmp(line, "IRQ ", 4)) {
            return true;
        }
    }
}

/* Read what QEMU sent; wait for it (until deadline) only when block. */
static void fill(bool block, double deadline)
{
    if (rpos > 0) {
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos;
        rpos = 0;
    }
    if (rlen == sizeof(rbuf)) {
        die("qtest response line too long");
    }
    for (;;) {
        if (block) {
            double left = deadline - now_s();
            if (left <= 0) {
                qemu_hung = true;
                die("timeout (%.1fs) waiting for QEMU to answer the qtest command '%s' "
                    "(QEMU's main loop is stuck, or the device never answers)", opt.timeout,
                    last_cmd);
            }
            struct pollfd pfd = { .fd = qfd, .events = POLLIN };
            int r = poll(&pfd, 1, (int)(left * 1000) + 1);
            if (r < 0 && errno != EINTR) {
                die("poll: %s", strerror(errno));
            }
            if (got_signal) {
                die("interrupted by signal %d", (int)got_signal);
            }
            if (r <= 0) {
                continue;
            }
        }
        ssize_t n = recv(qfd, rbuf + rlen, sizeof(rbuf) - rlen, block ? 0 : MSG_DONTWAIT);
        if (n == 0) {
            die("QEMU closed the qtest connection");
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN && !block) {
                return;
            }
            if (errno == EAGAIN) {
                continue;
            }
            if (errno == ECONNRESET) {
                die("QEMU closed the qtest connection");
            }
            die("qtest recv: %s", strerror(errno));
        }
        rlen += n;
        return;
    }
}

/* Read one line into line; bounded by timeout. */
static void qtest_readline(char *line, size_t size)
{
    double deadline = now_s() + opt.timeout;
    while (!take_line(line, size)) {
        fill(true, deadline);
    }
}

static void check_ok(const char *cmd, const char *line)
{
    if (strncmp(line, "OK", 2) || (line[2] && line[2] != ' ')) {
        die("qtest command '%s' failed: '%s'", cmd, line);
    }
}

/* Answers to pipelined commands: all of them (block), or those already here. */
static void drain(bool block)
{
    char line[256];
    if (!outstanding) {
        return;
    }
    if (!block) {
        fill(false, 0);
    }
    while (outstanding) {
        if (block) {
            qtest_readline(line, sizeof(line));
        } else if (!take_line(line, sizeof(line))) {
            return;
        }
        check_ok("(a pipelined kick)", line);
        outstanding--;
    }
}

/* Take the channel; count whether it was taken and how long we waited. */
static uint64_t lock_channel(void)
{
    uint64_t t0 = 0;
    bool contended = pthread_mutex_trylock(&lock) != 0;
    if (contended) {
        t0 = now_ns();
        pthread_mutex_lock(&lock);
    }
    uint64_t t1 = now_ns();
    if (contended) {
        counts.contended++;
        counts.wait_ns += t1 - t0;
    }
    return t1;
}

static void unlock_channel(uint64_t t1)
{
    counts.busy_ns += now_ns() - t1;
    pthread_mutex_unlock(&lock);
}

uint64_t qtest_cmd(const char *fmt, ...)
{
    char cmd[256], line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(cmd) - 1) {
        die("qtest command too long");
    }
    cmd[n] = '\n';
    cmd[n + 1] = 0;

    uint64_t t1 = lock_channel();
    drain(true);
    memcpy(last_cmd, cmd, n);
    last_cmd[n] = 0;
    qtest_send(cmd);
    counts.cmds++;
    qtest_readline(line, sizeof(line));
    unlock_channel(t1);

    cmd[n] = 0;
    check_ok(cmd, line);
    if (line[2] == ' ') {
        return strtoull(line + 3, NULL, 0);
    }
    return 0;
}

void qtest_kick(uint64_t addr, uint16_t val, bool pipelined)
{
    if (!pipelined) {
        writew(addr, val);
        return;
    }
    qtest_write_pipelined('w', addr, val);
}

void qtest_write_pipelined(char size, uint64_t addr, uint32_t val)
{
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "write%c 0x%" PRIx64 " 0x%x\n", size, addr, val);
    uint64_t t1 = lock_channel();
    memcpy(last_cmd, cmd, strlen(cmd) - 1);
    last_cmd[strlen(cmd) - 1] = 0;
    qtest_send(cmd);
    counts.cmds++;
    outstanding++;
    if (outstanding > counts.max_outstanding) {
        counts.max_outstanding = outstanding;
    }
    drain(false);
    unlock_channel(t1);
}

void outl(uint16_t port, uint32_t v) { qtest_cmd("outl 0x%x 0x%x", port, v); }
void outw(uint16_t port, uint16_t v) { qtest_cmd("outw 0x%x 0x%x", port, v); }
void outb(uint16_t port, uint8_t v) { qtest_cmd("outb 0x%x 0x%x", port, v); }
uint32_t inl(uint16_t port) { return qtest_cmd("inl 0x%x", port); }
uint16_t inw(uint16_t port) { return qtest_cmd("inw 0x%x", port); }
uint8_t inb(uint16_t port) { return qtest_cmd("inb 0x%x", port); }
void writel(uint64_t a, uint32_t v) { qtest_cmd("writel 0x%" PRIx64 " 0x%x", a, v); }
void writew(uint64_t a, uint16_t v) { qtest_cmd("writew 0x%" PRIx64 " 0x%x", a, v); }
void writeb(uint64_t a, uint8_t v) { qtest_cmd("writeb 0x%" PRIx64 " 0x%x", a, v); }
uint32_t readl(uint64_t a) { return qtest_cmd("readl 0x%" PRIx64, a); }
uint16_t readw(uint64_t a) { return qtest_cmd("readw 0x%" PRIx64, a); }
uint8_t readb(uint64_t a) { return qtest_cmd("readb 0x%" PRIx64, a); }
