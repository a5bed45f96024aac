/*
 * vblk-load: a guest-less virtio-blk load generator.
 *
 * Starts qemu-system-x86_64 under the qtest accelerator, with guest RAM in
 * a shared file that this program maps as well.  It then acts as the guest
 * driver of one virtio-blk-pci device: PCI enumeration and BAR/MSI-X setup
 * through qtest port/MMIO commands, virtio 1.x initialisation through the
 * PCI capabilities, and a data path of split virtqueues built directly in
 * the shared RAM.  Only kicks (and setup) go through the qtest socket.
 *
 * See docs/vblk-load.md.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

/* ---- constants from the virtio 1.x and PCI specifications ---- */
#define PCI_VENDOR_REDHAT_QUMRANET 0x1af4
#define PCI_CMD_IO      0x1
#define PCI_CMD_MEM     0x2
#define PCI_CMD_MASTER  0x4
#define PCI_CAP_ID_VNDR 0x09
#define PCI_CAP_ID_MSIX 0x11

#define VCAP_COMMON 1
#define VCAP_NOTIFY 2
#define VCAP_ISR    3
#define VCAP_DEVICE 4

#define ST_ACK         1
#define ST_DRIVER      2
#define ST_DRIVER_OK   4
#define ST_FEATURES_OK 8
#define ST_FAILED      128

#define F_BLK_MQ        12
#define F_RING_EVENT_IDX 29
#define F_VERSION_1     32

/* common configuration structure offsets */
#define CC_DFSELECT   0
#define CC_DF         4
#define CC_GFSELECT   8
#define CC_GF         12
#define CC_MSIX       16
#define CC_NUMQ       18
#define CC_STATUS     20
#define CC_QSELECT    22
#define CC_QSIZE      24
#define CC_QMSIX      26
#define CC_QENABLE    28
#define CC_QNOTIFYOFF 30
#define CC_QDESC      32
#define CC_QAVAIL     40
#define CC_QUSED      48

#define NO_VECTOR 0xffff

#define VRING_DESC_F_NEXT  1
#define VRING_DESC_F_WRITE 2
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

#define BLK_T_IN  0
#define BLK_T_OUT 1
#define BLK_S_OK  0

/* guest physical layout chosen by this program */
#define MMIO_BASE 0xe0000000ULL
#define MMIO_LIMIT 0xfe000000ULL
#define PIO_BASE 0xc000
#define RAM_ALLOC_START (16u << 20)

struct vdesc { uint64_t addr; uint32_t len; uint16_t flags; uint16_t next; };
struct vused_elem { uint32_t id; uint32_t len; };
struct blk_hdr { uint32_t type; uint32_t ioprio; uint64_t sector; };

/* ---- options ---- */
enum rwmode { RW_READ, RW_WRITE, RW_RANDREAD, RW_RANDWRITE, RW_RANDRW };
static const char *rw_names[] = { "read", "write", "randread", "randwrite", "randrw" };

static struct {
    const char *qemu;
    unsigned queues, depth, bs;
    enum rwmode rw;
    unsigned rwmix_read;
    double duration, ramp;
    bool strace, spin;
    long poll_max_ns;
    bool event_idx, iothread, irq, json, verify;
    const char *blockdev;
    double timeout;
    unsigned queue_size;
    const char *extra_dev;
    uint64_t seed;
} opt = {
    .qemu = "qemu-system-x86_64",
    .queues = 1, .depth = 32, .bs = 4096, .rw = RW_RANDREAD, .rwmix_read = 50,
    .duration = 5, .event_idx = true, .iothread = true, .irq = false,
    .blockdev = "driver=null-co,node-name=disk0,read-zeroes=on",
    .timeout = 10, .seed = 1, .poll_max_ns = -1,
};

/* ---- global state for cleanup ---- */
static pid_t qemu_pid = -1;
static char sock_path[108];
static char mem_path[256];
static char log_path[256];
static int qfd = -1;
static volatile sig_atomic_t got_signal;
static pid_t strace_pid = -1;
static char strace_path[256];

static void cleanup(void)
{
    if (strace_pid > 0) {
        kill(strace_pid, SIGKILL);
        waitpid(strace_pid, NULL, 0);
        strace_pid = -1;
    }
    if (strace_path[0]) {
        unlink(strace_path);
        strace_path[0] = 0;
    }
    if (qemu_pid > 0) {
        /* QEMU runs in its own process group: this also stops wrappers' children */
        kill(-qemu_pid, SIGTERM);
        kill(qemu_pid, SIGTERM);
        for (int i = 0; i < 200; i++) {
            if (waitpid(qemu_pid, NULL, WNOHANG) == qemu_pid) {
                qemu_pid = -1;
                break;
            }
            usleep(10000);
        }
        if (qemu_pid > 0) {
            kill(-qemu_pid, SIGKILL);
            kill(qemu_pid, SIGKILL);
            waitpid(qemu_pid, NULL, 0);
            qemu_pid = -1;
        }
    }
    if (sock_path[0]) {
        unlink(sock_path);
        sock_path[0] = 0;
    }
    if (mem_path[0]) {
        unlink(mem_path);
        mem_path[0] = 0;
    }
    if (log_path[0]) {
        unlink(log_path);
        log_path[0] = 0;
    }
}

static void print_qemu_log(void)
{
    if (!log_path[0]) {
        return;
    }
    FILE *f = fopen(log_path, "r");
    if (!f) {
        return;
    }
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n < 40) {
        if (n++ == 0) {
            fprintf(stderr, "vblk-load: QEMU stderr:\n");
        }
        fprintf(stderr, "  %s", line);
    }
    fclose(f);
}

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vblk-load: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (qemu_pid > 0) {
        int st;
        if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
            qemu_pid = -1;
            if (WIFEXITED(st)) {
                fprintf(stderr, "vblk-load: QEMU exited with status %d\n", WEXITSTATUS(st));
            } else if (WIFSIGNALED(st)) {
                fprintf(stderr, "vblk-load: QEMU killed by signal %d\n", WTERMSIG(st));
            }
        }
    }
    print_qemu_log();
    cleanup();
    exit(1);
}

static void on_signal(int sig)
{
    got_signal = sig;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* ---- qtest protocol client ---- */
static char rbuf[65536];
static size_t rlen, rpos;
static unsigned long qtest_cmds;
static char last_cmd[256];

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

/* Read one line (without IRQ notifications) into line; bounded by timeout. */
static void qtest_readline(char *line, size_t size)
{
    double deadline = now_s() + opt.timeout;
    for (;;) {
        char *nl = memchr(rbuf + rpos, '\n', rlen - rpos);
        if (nl) {
            size_t l = nl - (rbuf + rpos);
            if (l >= size) {
                l = size - 1;
            }
            memcpy(line, rbuf + rpos, l);
            line[l] = 0;
            rpos = nl - rbuf + 1;
            if (!strncmp(line, "IRQ ", 4)) {
                continue;           /* IRQ raise/lower: ignore */
            }
            return;
        }
        if (rpos > 0) {
            memmove(rbuf, rbuf + rpos, rlen - rpos);
            rlen -= rpos;
            rpos = 0;
        }
        if (rlen == sizeof(rbuf)) {
            die("qtest response line too long");
        }
        double left = deadline - now_s();
        if (left <= 0) {
            die("timeout (%.1fs) waiting for QEMU to answer the qtest command '%s' "
                "(QEMU's main loop is stuck, or the device never answers)", opt.timeout, last_cmd);
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
        ssize_t n = recv(qfd, rbuf + rlen, sizeof(rbuf) - rlen, 0);
        if (n == 0) {
            die("QEMU closed the qtest connection");
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            if (errno == ECONNRESET) {
                die("QEMU closed the qtest connection");
            }
            die("qtest recv: %s", strerror(errno));
        }
        rlen += n;
    }
}

static uint64_t qtest_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static uint64_t qtest_cmd(const char *fmt, ...)
{
    char cmd[256], line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(cmd) - 1) {
        die("qtest command too long");
    }
    memcpy(last_cmd, cmd, n + 1);
    cmd[n] = '\n';
    cmd[n + 1] = 0;
    qtest_send(cmd);
    qtest_cmds++;
    qtest_readline(line, sizeof(line));
    if (strncmp(line, "OK", 2) || (line[2] && line[2] != ' ')) {
        cmd[n] = 0;
        die("qtest command '%s' failed: '%s'", cmd, line);
    }
    if (line[2] == ' ') {
        return strtoull(line + 3, NULL, 0);
    }
    return 0;
}

static void outl(uint16_t port, uint32_t v) { qtest_cmd("outl 0x%x 0x%x", port, v); }
static void outw(uint16_t port, uint16_t v) { qtest_cmd("outw 0x%x 0x%x", port, v); }
static void outb(uint16_t port, uint8_t v) { qtest_cmd("outb 0x%x 0x%x", port, v); }
static uint32_t inl(uint16_t port) { return qtest_cmd("inl 0x%x", port); }
static uint16_t inw(uint16_t port) { return qtest_cmd("inw 0x%x", port); }
static uint8_t inb(uint16_t port) { return qtest_cmd("inb 0x%x", port); }
static void writel(uint64_t a, uint32_t v) { qtest_cmd("writel 0x%" PRIx64 " 0x%x", a, v); }
static void writew(uint64_t a, uint16_t v) { qtest_cmd("writew 0x%" PRIx64 " 0x%x", a, v); }
static void writeb(uint64_t a, uint8_t v) { qtest_cmd("writeb 0x%" PRIx64 " 0x%x", a, v); }
static uint32_t readl(uint64_t a) { return qtest_cmd("readl 0x%" PRIx64, a); }
static uint16_t readw(uint64_t a) { return qtest_cmd("readw 0x%" PRIx64, a); }
static uint8_t readb(uint64_t a) { return qtest_cmd("readb 0x%" PRIx64, a); }

/* ---- PCI configuration space through 0xcf8/0xcfc ---- */
static unsigned pci_devfn;

static void cfg_addr(unsigned reg)
{
    outl(0xcf8, 0x80000000u | (pci_devfn << 8) | (reg & 0xfc));
}
static uint32_t cfg_rl(unsigned reg) { cfg_addr(reg); return inl(0xcfc); }
static uint16_t cfg_rw(unsigned reg) { cfg_addr(reg); return inw(0xcfc + (reg & 2)); }
static uint8_t cfg_rb(unsigned reg) { cfg_addr(reg); return inb(0xcfc + (reg & 3)); }
static void cfg_wl(unsigned reg, uint32_t v) { cfg_addr(reg); outl(0xcfc, v); }
static void cfg_ww(unsigned reg, uint16_t v) { cfg_addr(reg); outw(0xcfc + (reg & 2), v); }
static void __attribute__((unused)) cfg_wb(unsigned reg, uint8_t v) { cfg_addr(reg); outb(0xcfc + (reg & 3), v); }

/* ---- guest RAM ---- */
static uint8_t *ram;
static uint64_t ram_size, ram_next = RAM_ALLOC_START;

static uint64_t ram_alloc(uint64_t size, uint64_t align)
{
    uint64_t a = (ram_next + align - 1) & ~(align - 1);
    if (a + size > ram_size) {
        die("internal: guest RAM exhausted");
    }
    ram_next = a + size;
    memset(ram + a, 0, size);
    return a;
}

static void *gpa(uint64_t a) { return ram + a; }

/* ---- latency histogram: 64 sub-buckets per power of two ---- */
#define HIST_SUB 64
#define HIST_N (128 + 58 * HIST_SUB)
static uint64_t hist[HIST_N];

static unsigned hist_idx(uint64_t v)
{
    if (v < 128) {
        return v;
    }
    int e = 63 - __builtin_clzll(v);
    if (e > 64) {
        e = 64;
    }
    unsigned i = 128 + (e - 7) * HIST_SUB + ((v >> (e - 6)) & (HIST_SUB - 1));
    return i < HIST_N ? i : HIST_N - 1;
}

static double hist_val(unsigned i)
{
    if (i < 128) {
        return i;
    }
    unsigned e = (i - 128) / HIST_SUB + 7, m = (i - 128) % HIST_SUB;
    double lo = (double)((uint64_t)(HIST_SUB + m) << (e - 6));
    return lo + (double)(1ull << (e - 6)) / 2;
}

static double hist_pct(uint64_t total, double p)
{
    uint64_t want = (uint64_t)(total * p / 100.0);
    if (want >= total) {
        want = total - 1;
    }
    uint64_t acc = 0;
    for (unsigned i = 0; i < HIST_N; i++) {
        acc += hist[i];
        if (acc > want) {
            return hist_val(i);
        }
    }
    return 0;
}

/* ---- per-queue state ---- */
struct slot {
    uint64_t hdr_gpa, buf_gpa, st_gpa;
    uint64_t submit_ns;
    uint64_t sector;
    bool inflight, write, check;
};

struct vq {
    unsigned idx, size;
    struct vdesc *desc;
    uint16_t *avail;              /* flags, idx, ring[size], used_event */
    volatile uint16_t *used_hdr;  /* flags, idx */
    struct vused_elem *used_ring;
    volatile uint16_t *avail_event;
    uint16_t avail_idx, last_used;
    uint64_t notify_addr;
    volatile uint32_t *msi_word;
    struct slot *slots;
    uint64_t seq_next;
    bool irq_pending;
    unsigned inflight;
    unsigned *free, nfree;
};

static struct vq *vqs;
static bool use_event_idx;
static uint64_t capacity_sectors, io_sectors;
/* counted only while measuring (after --ramp, before the final drain) */
static uint64_t n_done, n_reads, n_writes, n_kicks, n_notifs;
/* counted always */
static uint64_t n_all, n_verified;
static bool stopping, measuring;
static uint64_t rng_state;
static uint8_t *written_map;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void fill_pattern(uint8_t *buf, uint64_t sector, unsigned len)
{
    for (unsigned off = 0; off < len; off += 8) {
        uint64_t v = (sector + off / 512) * 0x9e3779b97f4a7c15ull ^ (off % 512) ^ opt.seed;
        memcpy(buf + off, &v, 8);
    }
}

static void prepare_request(struct vq *q, struct slot *s)
{
    bool write;
    uint64_t blocks = io_sectors / (opt.bs / 512);
    uint64_t blk;
    switch (opt.rw) {
    case RW_READ: write = false; break;
    case RW_WRITE: write = true; break;
    case RW_RANDREAD: write = false; break;
    case RW_RANDWRITE: write = true; break;
    default: write = (rnd() % 100) >= opt.rwmix_read; break;
    }
    if (opt.rw == RW_READ || opt.rw == RW_WRITE) {
        /* each queue streams through its own share of the disk */
        uint64_t per = blocks / opt.queues;
        if (per == 0) {
            per = 1;
        }
        blk = (q->idx * per + q->seq_next++ % per) % blocks;
    } else {
        blk = rnd() % blocks;
    }
    s->sector = blk * (opt.bs / 512);
    s->write = write;
    s->check = false;
    struct blk_hdr *h = gpa(s->hdr_gpa);
    h->type = write ? BLK_T_OUT : BLK_T_IN;
    h->ioprio = 0;
    h->sector = s->sector;
    struct vdesc *d = &q->desc[(s - q->slots) * 3 + 1];
    d->flags = VRING_DESC_F_NEXT | (write ? 0 : VRING_DESC_F_WRITE);
    if (opt.verify) {
        if (write) {
            fill_pattern(gpa(s->buf_gpa), s->sector, opt.bs);
        } else {
            s->check = written_map[blk];
            if (s->check) {
                memset(gpa(s->buf_gpa), 0xa5, opt.bs);
            }
        }
    }
    *(volatile uint8_t *)gpa(s->st_gpa) = 0xff;
}

static void kick_if_needed(struct vq *q, uint16_t old)
{
    uint16_t new = q->avail_idx;
    if (new == old) {
        return;
    }
    __atomic_store_n(&q->avail[1], new, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    bool kick;
    if (use_event_idx) {
        uint16_t ev = *q->avail_event;
        kick = (uint16_t)(new - ev - 1) < (uint16_t)(new - old);
    } else {
        kick = !(q->used_hdr[0] & VRING_USED_F_NO_NOTIFY);
    }
    if (kick) {
        writew(q->notify_addr, q->idx);
        n_kicks += measuring;
    }
}

static void submit_slot(struct vq *q, struct slot *s)
{
    prepare_request(q, s);
    s->inflight = true;
    q->inflight++;
    s->submit_ns = now_ns();
    q->avail[2 + (q->avail_idx % q->size)] = (s - q->slots) * 3;
    q->avail_idx++;
}

static void verify_read(struct slot *s)
{
    uint8_t *buf = gpa(s->buf_gpa);
    uint8_t expect[512];
    for (unsigned off = 0; off < opt.bs; off += 512) {
        fill_pattern(expect, s->sector + off / 512, 512);
        if (memcmp(expect, buf + off, 512)) {
            die("verify: data mismatch at sector %" PRIu64 " (reading back what this run "
                "wrote; a null-co backend cannot pass --verify)", s->sector + off / 512);
        }
    }
    n_verified++;
}

/* Reap completions into the queue's free list; returns number reaped. */
static unsigned reap(struct vq *q)
{
    uint16_t used = __atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE);
    unsigned n = 0;
    uint64_t t = 0;
    while (q->last_used != used) {
        struct vused_elem *e = &q->used_ring[q->last_used % q->size];
        uint32_t id = e->id;
        q->last_used++;
        if (id % 3 || id / 3 >= opt.depth || !q->slots[id / 3].inflight) {
            die("device returned a bad used id %u on queue %u", id, q->idx);
        }
        struct slot *s = &q->slots[id / 3];
        uint8_t st = *(volatile uint8_t *)gpa(s->st_gpa);
        if (st != BLK_S_OK) {
            die("request %s sector %" PRIu64 " on queue %u: status %u (not VIRTIO_BLK_S_OK)",
                s->write ? "write" : "read", s->sector, q->idx, st);
        }
        if (!t) {
            t = now_ns();
        }
        s->inflight = false;
        q->inflight--;
        n_all++;
        if (measuring) {
            hist[hist_idx(t - s->submit_ns)]++;
            n_done++;
            n_writes += s->write;
            n_reads += !s->write;
        }
        if (s->write) {
            if (opt.verify) {
                written_map[s->sector / (opt.bs / 512)] = 1;
            }
        } else if (s->check) {
            verify_read(s);
        }
        q->free[q->nfree++] = id / 3;
        n++;
    }
    if (n && use_event_idx && !opt.irq) {
        /* poll mode: keep the device's interrupt threshold far away */
        q->avail[2 + q->size] = q->last_used + 0x7fff;
    }
    return n;
}

/* Submit all free slots (unless stopping) and kick if the device wants it. */
static void refill(struct vq *q)
{
    uint16_t old = q->avail_idx;
    if (!stopping) {
        for (unsigned i = 0; i < q->nfree; i++) {
            submit_slot(q, &q->slots[q->free[i]]);
        }
    }
    q->nfree = 0;
    kick_if_needed(q, old);
}

/* irq mode: ask for an interrupt at the next completion */
static void arm_irq(struct vq *q)
{
    if (use_event_idx) {
        __atomic_store_n(&q->avail[2 + q->size], q->last_used, __ATOMIC_RELAXED);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- /proc thread CPU accounting ---- */
#define MAX_THREADS 256
struct thr {
    int tid;
    char name[32];
    double cpu0, cpu1;   /* seconds, from schedstat if present else stat */
    bool seen0, seen1;
};
static struct thr thrs[MAX_THREADS];
static int nthr;
static bool have_schedstat;

static bool read_thread(int pid, int tid, char *name, size_t nsz, double *cpu)
{
    char path[128], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return false;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return false;
    }
    buf[n] = 0;
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (!l || !r || r < l) {
        return false;
    }
    size_t len = r - l - 1;
    if (len >= nsz) {
        len = nsz - 1;
    }
    memcpy(name, l + 1, len);
    name[len] = 0;
    /* fields after ')': 3=state ... 14=utime 15=stime */
    char *p = r + 2;
    unsigned long long ut = 0, st = 0;
    for (int field = 3; field <= 15 && *p; field++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (field == 14) {
            ut = v;
        } else if (field == 15) {
            st = v;
        }
        p = strchr(p, ' ');
        if (!p) {
            break;
        }
        p++;
    }
    *cpu = (double)(ut + st) / sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            *cpu = strtoull(buf, NULL, 10) * 1e-9;
            have_schedstat = true;
        }
    }
    return true;
}

static void snapshot_threads(int which)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", qemu_pid);
    DIR *d = opendir(path);
    if (!d) {
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        int tid = atoi(de->d_name);
        char name[32];
        double cpu;
        if (!read_thread(qemu_pid, tid, name, sizeof(name), &cpu)) {
            continue;
        }
        int i;
        for (i = 0; i < nthr && thrs[i].tid != tid; i++) {
        }
        if (i == nthr) {
            if (nthr == MAX_THREADS) {
                continue;
            }
            nthr++;
            memset(&thrs[i], 0, sizeof(thrs[i]));
            thrs[i].tid = tid;
        }
        if (tid == qemu_pid) {
            snprintf(thrs[i].name, sizeof(thrs[i].name), "main");
        } else {
            snprintf(thrs[i].name, sizeof(thrs[i].name), "%s", name);
        }
        if (which == 0) {
            thrs[i].cpu0 = cpu;
            thrs[i].seen0 = true;
        } else {
            thrs[i].cpu1 = cpu;
            thrs[i].seen1 = true;
        }
    }
    closedir(d);
}

/* Group threads by name (all "worker" threads together). */
struct tgroup { char name[32]; int count; double cpu; };
static struct tgroup groups[MAX_THREADS];
static int ngroups;

static void group_threads(void)
{
    for (int i = 0; i < nthr; i++) {
        if (!thrs[i].seen1) {
            continue;       /* exited before the end: its time is lost */
        }
        double c = thrs[i].cpu1 - (thrs[i].seen0 ? thrs[i].cpu0 : 0);
        int g;
        for (g = 0; g < ngroups && strcmp(groups[g].name, thrs[i].name); g++) {
        }
        if (g == ngroups) {
            ngroups++;
            snprintf(groups[g].name, sizeof(groups[g].name), "%s", thrs[i].name);
        }
        groups[g].count++;
        groups[g].cpu += c;
    }
}

/* ---- optional: syscalls per request by strace -f -c ---- */
struct sysc { char name[40]; uint64_t calls, errors; };
static struct sysc syscs[512];
static int nsyscs;

static bool all_threads_traced(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", qemu_pid);
    DIR *d = opendir(path);
    if (!d) {
        return false;
    }
    struct dirent *de;
    bool all = true;
    int n = 0;
    while (all && (de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        char p2[128], buf[2048];
        snprintf(p2, sizeof(p2), "/proc/%d/task/%d/status", qemu_pid, atoi(de->d_name));
        int fd = open(p2, O_RDONLY);
        if (fd < 0) {
            continue;
        }
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (r <= 0) {
            continue;
        }
        buf[r] = 0;
        char *t = strstr(buf, "TracerPid:");
        if (!t || atoi(t + 10) != strace_pid) {
            all = false;
        }
        n++;
    }
    closedir(d);
    return all && n > 0;
}

static void strace_start(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(strace_path, sizeof(strace_path), "%s/vblk-load-%d.strace",
             tmp && *tmp ? tmp : "/tmp", (int)getpid());
    char pidstr[16];
    snprintf(pidstr, sizeof(pidstr), "%d", (int)qemu_pid);
    pid_t pid = fork();
    if (pid < 0) {
        die("fork: %s", strace_path);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        execlp("strace", "strace", "-f", "-c", "-qq", "-o", strace_path, "-p", pidstr,
               (char *)NULL);
        _exit(127);
    }
    strace_pid = pid;
    double deadline = now_s() + opt.timeout;
    while (!all_threads_traced()) {
        int st;
        if (waitpid(strace_pid, &st, WNOHANG) == strace_pid) {
            strace_pid = -1;
            die("strace failed to attach to QEMU (is strace installed, and ptrace allowed?)");
        }
        if (now_s() > deadline) {
            die("strace did not attach to all QEMU threads within %.1fs", opt.timeout);
        }
        usleep(10000);
    }
}

static void strace_stop(void)
{
    kill(strace_pid, SIGINT);
    double deadline = now_s() + opt.timeout;
    int st;
    while (waitpid(strace_pid, &st, WNOHANG) != strace_pid) {
        if (now_s() > deadline) {
            die("strace did not finish within %.1fs", opt.timeout);
        }
        usleep(10000);
    }
    strace_pid = -1;
    FILE *f = fopen(strace_path, "r");
    if (!f) {
        die("strace wrote no summary");
    }
    char line[256];
    int dashes = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "------", 6)) {
            dashes++;
            continue;
        }
        if (dashes != 1) {
            continue;
        }
        char *tok[8];
        int nt = 0;
        for (char *p = strtok(line, " \t\n"); p && nt < 8; p = strtok(NULL, " \t\n")) {
            tok[nt++] = p;
        }
        /* % time, seconds, usecs/call, calls, [errors], syscall */
        if (nt < 5 || nsyscs == (int)(sizeof(syscs) / sizeof(syscs[0]))) {
            continue;
        }
        struct sysc *c = &syscs[nsyscs++];
        snprintf(c->name, sizeof(c->name), "%s", tok[nt - 1]);
        c->calls = strtoull(tok[3], NULL, 10);
        c->errors = nt >= 6 ? strtoull(tok[4], NULL, 10) : 0;
    }
    fclose(f);
    if (dashes < 1) {
        die("cannot parse the strace summary %s", strace_path);
    }
}

/* ---- option parsing ---- */
static void usage(FILE *f)
{
    fprintf(f,
"usage: vblk-load [options]\n"
"Drive one virtio-blk-pci device of QEMU (qtest accelerator, no guest CPU).\n"
"  --qemu PATH          qemu-system-x86_64 binary (default: from PATH)\n"
"  --queues N           virtqueues (1..64, default 1)\n"
"  --depth N            requests in flight per queue (1..341, default 32)\n"
"  --bs BYTES           block size, multiple of 512 (default 4096)\n"
"  --rw MODE            read|write|randread|randwrite|randrw (default randread)\n"
"  --rwmixread PCT      reads in randrw, percent (default 50)\n"
"  --duration SECONDS   measured run time (default 5)\n"
"  --ramp SECONDS       run this long before measuring (default 0)\n"
"  --event-idx on|off   negotiate VIRTIO_RING_F_EVENT_IDX (default on)\n"
"  --iothread on|off    put the device on an IOThread (default on)\n"
"  --poll-max-ns N      the IOThread's poll-max-ns (default: QEMU's)\n"
"  --mode poll|irq      completions by polling the used ring, or by\n"
"                       waiting for the MSI-X message (default poll)\n"
"  --blockdev STRING    -blockdev option (default %s);\n"
"                       node-name=disk0 is added if none is given\n"
"  --device-opts STRING extra virtio-blk-pci properties, e.g. seg_max_adjust=off\n"
"  --queue-size N       virtqueue size (default: 256, or larger if depth needs it)\n"
"  --verify             check data read back against what this run wrote\n"
"                       (needs a real backend, e.g. a file; not null-co)\n"
"  --spin               busy-wait for completions without ever yielding the CPU\n"
"                       (default: yield after a short spin, as an idle vCPU\n"
"                       would halt; spinning starves QEMU on a small machine)\n"
"  --strace             count QEMU's syscalls per request with strace -f -c\n"
"                       (slows QEMU down a lot; its IOPS are not comparable)\n"
"  --seed N             random seed (default 1)\n"
"  --timeout SECONDS    give up when QEMU or the device is silent this long (default 10)\n"
"  --json               machine-readable output\n"
"  -h, --help           this help\n",
        opt.blockdev);
}

static void bad_opt(const char *name, const char *val, const char *why)
{
    fprintf(stderr, "vblk-load: invalid %s '%s': %s\n", name, val, why);
    fprintf(stderr, "Try 'vblk-load --help'.\n");
    exit(2);
}

static unsigned long parse_uint(const char *name, const char *v, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    if (!*v || !isdigit((unsigned char)*v)) {
        bad_opt(name, v, "not a number");
    }
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || *end) {
        bad_opt(name, v, "not a number");
    }
    if (x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof(why), "must be in %lu..%lu", lo, hi);
        bad_opt(name, v, why);
    }
    return x;
}

static double parse_double(const char *name, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || errno || *end || !(x >= lo && x <= hi)) {
        char why[96];
        snprintf(why, sizeof(why), "must be a number in %g..%g", lo, hi);
        bad_opt(name, v, why);
    }
    return x;
}

static bool parse_onoff(const char *name, const char *v)
{
    if (!strcmp(v, "on")) {
        return true;
    }
    if (!strcmp(v, "off")) {
        return false;
    }
    bad_opt(name, v, "expected on or off");
    return false;
}

static void parse_args(int argc, char **argv)
{
    enum { O_QEMU = 256, O_QUEUES, O_DEPTH, O_BS, O_RW, O_MIX, O_DUR, O_EVIDX, O_IOT,
           O_MODE, O_BDEV, O_JSON, O_VERIFY, O_TIMEOUT, O_QSIZE, O_DEVOPTS, O_SEED, O_RAMP, O_STRACE, O_POLLMAX, O_SPIN };
    static const struct option lo[] = {
        { "qemu", 1, 0, O_QEMU }, { "queues", 1, 0, O_QUEUES }, { "depth", 1, 0, O_DEPTH },
        { "bs", 1, 0, O_BS }, { "rw", 1, 0, O_RW }, { "rwmixread", 1, 0, O_MIX },
        { "duration", 1, 0, O_DUR }, { "event-idx", 1, 0, O_EVIDX },
        { "iothread", 1, 0, O_IOT }, { "mode", 1, 0, O_MODE }, { "blockdev", 1, 0, O_BDEV },
        { "json", 0, 0, O_JSON }, { "verify", 0, 0, O_VERIFY }, { "timeout", 1, 0, O_TIMEOUT },
        { "queue-size", 1, 0, O_QSIZE }, { "device-opts", 1, 0, O_DEVOPTS },
        { "seed", 1, 0, O_SEED }, { "ramp", 1, 0, O_RAMP }, { "strace", 0, 0, O_STRACE },
        { "poll-max-ns", 1, 0, O_POLLMAX }, { "spin", 0, 0, O_SPIN }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 }
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_QEMU: opt.qemu = optarg; break;
        case O_QUEUES: opt.queues = parse_uint("--queues", optarg, 1, 64); break;
        case O_DEPTH: opt.depth = parse_uint("--depth", optarg, 1, 341); break;
        case O_BS:
            opt.bs = parse_uint("--bs", optarg, 512, 1u << 20);
            if (opt.bs % 512) {
                bad_opt("--bs", optarg, "must be a multiple of 512");
            }
            break;
        case O_RW: {
            unsigned i;
            for (i = 0; i < 5 && strcmp(optarg, rw_names[i]); i++) {
            }
            if (i == 5) {
                bad_opt("--rw", optarg, "expected read, write, randread, randwrite or randrw");
            }
            opt.rw = i;
            break;
        }
        case O_MIX: opt.rwmix_read = parse_uint("--rwmixread", optarg, 0, 100); break;
        case O_DUR: opt.duration = parse_double("--duration", optarg, 0.01, 86400); break;
        case O_RAMP: opt.ramp = parse_double("--ramp", optarg, 0, 3600); break;
        case O_EVIDX: opt.event_idx = parse_onoff("--event-idx", optarg); break;
        case O_IOT: opt.iothread = parse_onoff("--iothread", optarg); break;
        case O_MODE:
            if (!strcmp(optarg, "poll")) {
                opt.irq = false;
            } else if (!strcmp(optarg, "irq")) {
                opt.irq = true;
            } else {
                bad_opt("--mode", optarg, "expected poll or irq");
            }
            break;
        case O_BDEV:
            if (!*optarg) {
                bad_opt("--blockdev", optarg, "must not be empty");
            }
            opt.blockdev = optarg;
            break;
        case O_JSON: opt.json = true; break;
        case O_VERIFY: opt.verify = true; break;
        case O_STRACE: opt.strace = true; break;
        case O_SPIN: opt.spin = true; break;
        case O_POLLMAX: opt.poll_max_ns = parse_uint("--poll-max-ns", optarg, 0, 1000000000); break;
        case O_TIMEOUT: opt.timeout = parse_double("--timeout", optarg, 0.1, 3600); break;
        case O_QSIZE:
            opt.queue_size = parse_uint("--queue-size", optarg, 4, 1024);
            if (opt.queue_size & (opt.queue_size - 1)) {
                bad_opt("--queue-size", optarg, "must be a power of two");
            }
            break;
        case O_DEVOPTS: opt.extra_dev = optarg; break;
        case O_SEED: opt.seed = parse_uint("--seed", optarg, 0, ~0ul); break;
        case 'h': usage(stdout); exit(0);
        case ':':
            fprintf(stderr, "vblk-load: option '%s' needs an argument\n", argv[optind - 1]);
            exit(2);
        default:
            fprintf(stderr, "vblk-load: unknown option '%s'\nTry 'vblk-load --help'.\n",
                    argv[optind - 1]);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vblk-load: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    unsigned need = 3 * opt.depth;
    if (!opt.queue_size) {
        opt.queue_size = 256;
        while (opt.queue_size < need) {
            opt.queue_size *= 2;
        }
    } else if (opt.queue_size < need) {
        fprintf(stderr, "vblk-load: --queue-size %u is too small for --depth %u "
                "(3 descriptors per request)\n", opt.queue_size, opt.depth);
        exit(2);
    }
}

/* ---- QEMU start ---- */
static char node_name[64] = "disk0";

static int listen_socket(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) {
        tmp = "/tmp";
    }
    int n = snprintf(sock_path, sizeof(sock_path), "%s/vblk-load-%d.sock", tmp, (int)getpid());
    if (n >= (int)sizeof(sock_path)) {
        snprintf(sock_path, sizeof(sock_path), "/tmp/vblk-load-%d.sock", (int)getpid());
    }
    unlink(sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("bind %s: %s", sock_path, strerror(errno));
    }
    if (listen(fd, 1) < 0) {
        die("listen: %s", strerror(errno));
    }
    return fd;
}

static void start_qemu(int lfd)
{
    char mem_obj[512], dev[512], bdev[1024], mname[64];
    /* a top-level node-name= option: at the start or after a comma */
    const char *m = NULL;
    for (const char *p = opt.blockdev; (p = strstr(p, "node-name=")); p++) {
        if (p == opt.blockdev || p[-1] == ',') {
            m = p;
            break;
        }
    }
    if (m) {
        size_t l = strcspn(m + 10, ",");
        if (l == 0 || l >= sizeof(node_name)) {
            die("bad node-name in --blockdev");
        }
        memcpy(node_name, m + 10, l);
        node_name[l] = 0;
        snprintf(bdev, sizeof(bdev), "%s", opt.blockdev);
    } else {
        snprintf(bdev, sizeof(bdev), "%s,node-name=%s", opt.blockdev, node_name);
    }
    snprintf(mem_obj, sizeof(mem_obj),
             "memory-backend-file,id=mem,size=%" PRIu64 ",mem-path=%s,share=on",
             ram_size, mem_path);
    snprintf(mname, sizeof(mname), "%" PRIu64 "M", ram_size >> 20);
    int n = snprintf(dev, sizeof(dev), "virtio-blk-pci,id=vblk0,drive=%s,num-queues=%u,"
                     "queue-size=%u,event_idx=%s%s%s%s", node_name, opt.queues,
                     opt.queue_size, opt.event_idx ? "on" : "off",
                     opt.iothread ? ",iothread=iothread0" : "",
                     opt.extra_dev ? "," : "", opt.extra_dev ? opt.extra_dev : "");
    if (n >= (int)sizeof(dev)) {
        die("--device-opts too long");
    }
    char qtest_arg[160];
    snprintf(qtest_arg, sizeof(qtest_arg), "unix:%s", sock_path);
    const char *argv[40];
    int a = 0;
    argv[a++] = opt.qemu;
    argv[a++] = "-accel"; argv[a++] = "qtest";
    argv[a++] = "-qtest"; argv[a++] = qtest_arg;
    argv[a++] = "-qtest-log"; argv[a++] = "/dev/null";
    argv[a++] = "-display"; argv[a++] = "none";
    argv[a++] = "-nodefaults";
    argv[a++] = "-M"; argv[a++] = "q35";
    argv[a++] = "-name"; argv[a++] = "vblk,debug-threads=on";
    argv[a++] = "-m"; argv[a++] = mname;
    argv[a++] = "-object"; argv[a++] = mem_obj;
    argv[a++] = "-machine"; argv[a++] = "memory-backend=mem";
    char iot[96];
    if (opt.poll_max_ns >= 0) {
        snprintf(iot, sizeof(iot), "iothread,id=iothread0,poll-max-ns=%ld", opt.poll_max_ns);
    } else {
        snprintf(iot, sizeof(iot), "iothread,id=iothread0");
    }
    if (opt.iothread) {
        argv[a++] = "-object"; argv[a++] = iot;
    } else if (opt.poll_max_ns >= 0) {
        fprintf(stderr, "vblk-load: --poll-max-ns needs --iothread on\n");
        exit(2);
    }
    argv[a++] = "-blockdev"; argv[a++] = bdev;
    argv[a++] = "-device"; argv[a++] = dev;
    argv[a] = NULL;

    const char *tmp = getenv("TMPDIR");
    snprintf(log_path, sizeof(log_path), "%s/vblk-load-%d.log",
             tmp && *tmp ? tmp : "/tmp", (int)getpid());
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        die("cannot create %s: %s", log_path, strerror(errno));
    }
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        die("pipe: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        die("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127);
        }
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        execvp(opt.qemu, (char **)argv);
        int e = errno;
        if (write(errpipe[1], &e, sizeof(e)) < 0) {
            /* nothing to do */
        }
        _exit(127);
    }
    qemu_pid = pid;
    close(logfd);
    close(errpipe[1]);
    int e;
    ssize_t r = read(errpipe[0], &e, sizeof(e));
    close(errpipe[0]);
    if (r == sizeof(e)) {
        waitpid(pid, NULL, 0);
        qemu_pid = -1;
        die("cannot execute %s: %s", opt.qemu, strerror(e));
    }

    /* wait for QEMU to connect, watching for its early exit */
    double deadline = now_s() + opt.timeout;
    for (;;) {
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        int pr = poll(&pfd, 1, 100);
        if (got_signal) {
            die("interrupted by signal %d", (int)got_signal);
        }
        if (pr > 0) {
            qfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (qfd >= 0) {
                break;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            qemu_pid = -1;
            fprintf(stderr, "vblk-load: QEMU exited before connecting (%s %d)\n",
                    WIFEXITED(st) ? "status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            die("QEMU failed to start: %s", opt.qemu);
        }
        if (now_s() > deadline) {
            die("QEMU did not connect to %s within %.1fs", sock_path, opt.timeout);
        }
    }
    close(lfd);
}

/* ---- device setup ---- */
struct bar { uint64_t addr, size; bool io; };
static struct bar bars[6];
static uint64_t common_addr, notify_base, devcfg_addr;
static uint32_t notify_mult;
static uint64_t msix_table;
static unsigned msix_nvec;
static unsigned msix_cap;

static void pci_find_device(void)
{
    for (unsigned dev = 0; dev < 32; dev++) {
        pci_devfn = dev << 3;
        uint32_t id = cfg_rl(0);
        if ((id & 0xffff) != PCI_VENDOR_REDHAT_QUMRANET) {
            continue;
        }
        uint16_t did = id >> 16;
        if (did == 0x1001 || did == 0x1042) {
            return;
        }
    }
    die("no virtio-blk-pci device found on PCI bus 0");
}

static void pci_assign_bars(void)
{
    uint64_t mmio = MMIO_BASE;
    uint32_t pio = PIO_BASE;
    cfg_ww(4, 0);
    for (unsigned i = 0; i < 6; i++) {
        unsigned reg = 0x10 + 4 * i;
        uint32_t orig = cfg_rl(reg);
        cfg_wl(reg, 0xffffffff);
        uint32_t sz = cfg_rl(reg);
        if (sz == 0) {
            continue;
        }
        if (orig & 1) {
            uint32_t size = ~(sz & ~3u) + 1;
            size &= 0xffff;
            pio = (pio + size - 1) & ~(size - 1);
            cfg_wl(reg, pio);
            bars[i] = (struct bar){ .addr = pio, .size = size, .io = true };
            pio += size;
            continue;
        }
        bool is64 = ((orig >> 1) & 3) == 2;
        uint64_t mask = sz & ~0xfull;
        if (is64) {
            cfg_wl(reg + 4, 0xffffffff);
            mask |= (uint64_t)cfg_rl(reg + 4) << 32;
        } else {
            mask |= 0xffffffff00000000ull;
        }
        uint64_t size = ~mask + 1;
        mmio = (mmio + size - 1) & ~(size - 1);
        if (mmio + size > MMIO_LIMIT) {
            die("PCI BARs do not fit the MMIO window");
        }
        cfg_wl(reg, (uint32_t)mmio);
        if (is64) {
            cfg_wl(reg + 4, mmio >> 32);
        }
        bars[i] = (struct bar){ .addr = mmio, .size = size };
        mmio += size;
        if (is64) {
            i++;
        }
    }
    cfg_ww(4, PCI_CMD_IO | PCI_CMD_MEM | PCI_CMD_MASTER);
}

static void pci_find_caps(void)
{
    if (!(cfg_rw(6) & 0x10)) {
        die("device has no PCI capability list");
    }
    unsigned p = cfg_rb(0x34) & 0xfc;
    int guard = 0;
    bool have_common = false, have_notify = false, have_dev = false;
    while (p && guard++ < 48) {
        uint8_t id = cfg_rb(p);
        if (id == PCI_CAP_ID_VNDR) {
            uint8_t type = cfg_rb(p + 3), bar = cfg_rb(p + 4);
            uint32_t off = cfg_rl(p + 8);
            if (bar < 6 && bars[bar].size && !bars[bar].io) {
                uint64_t a = bars[bar].addr + off;
                if (type == VCAP_COMMON && !have_common) {
                    common_addr = a;
                    have_common = true;
                } else if (type == VCAP_NOTIFY && !have_notify) {
                    notify_base = a;
                    notify_mult = cfg_rl(p + 16);
                    have_notify = true;
                } else if (type == VCAP_DEVICE && !have_dev) {
                    devcfg_addr = a;
                    have_dev = true;
                }
            }
        } else if (id == PCI_CAP_ID_MSIX) {
            msix_cap = p;
            uint16_t ctl = cfg_rw(p + 2);
            msix_nvec = (ctl & 0x7ff) + 1;
            uint32_t t = cfg_rl(p + 4);
            if (!bars[t & 7].size) {
                die("MSI-X table in an unassigned BAR");
            }
            msix_table = bars[t & 7].addr + (t & ~7u);
        }
        p = cfg_rb(p + 1) & 0xfc;
    }
    if (!have_common || !have_notify || !have_dev) {
        die("device lacks virtio 1.x PCI capabilities (common %d notify %d device %d)",
            have_common, have_notify, have_dev);
    }
    if (!msix_cap) {
        die("device has no MSI-X capability");
    }
}

static void set_status(uint8_t s)
{
    writeb(common_addr + CC_STATUS, s);
}

static void virtio_init(void)
{
    /* reset and wait for it to complete */
    set_status(0);
    double deadline = now_s() + opt.timeout;
    while (readb(common_addr + CC_STATUS) != 0) {
        if (now_s() > deadline) {
            die("device did not complete reset");
        }
    }
    set_status(ST_ACK);
    set_status(ST_ACK | ST_DRIVER);

    writel(common_addr + CC_DFSELECT, 0);
    uint64_t f = readl(common_addr + CC_DF);
    writel(common_addr + CC_DFSELECT, 1);
    f |= (uint64_t)readl(common_addr + CC_DF) << 32;
    if (!(f & (1ull << F_VERSION_1))) {
        die("device does not offer VIRTIO_F_VERSION_1");
    }
    uint64_t want = 1ull << F_VERSION_1;
    if (opt.event_idx) {
        if (!(f & (1ull << F_RING_EVENT_IDX))) {
            die("device does not offer VIRTIO_RING_F_EVENT_IDX");
        }
        want |= 1ull << F_RING_EVENT_IDX;
    }
    if (opt.queues > 1) {
        if (!(f & (1ull << F_BLK_MQ))) {
            die("device does not offer VIRTIO_BLK_F_MQ");
        }
        want |= 1ull << F_BLK_MQ;
    }
    use_event_idx = opt.event_idx;
    writel(common_addr + CC_GFSELECT, 0);
    writel(common_addr + CC_GF, (uint32_t)want);
    writel(common_addr + CC_GFSELECT, 1);
    writel(common_addr + CC_GF, want >> 32);
    set_status(ST_ACK | ST_DRIVER | ST_FEATURES_OK);
    if (!(readb(common_addr + CC_STATUS) & ST_FEATURES_OK)) {
        die("device rejected the features 0x%" PRIx64, want);
    }

    /* device configuration: capacity, and num_queues with MQ */
    capacity_sectors = readl(devcfg_addr) | (uint64_t)readl(devcfg_addr + 4) << 32;
    if (opt.queues > 1) {
        uint16_t nq = readw(devcfg_addr + 34);
        if (nq < opt.queues) {
            die("device offers %u queues, %u requested", nq, opt.queues);
        }
    }
    uint16_t numq = readw(common_addr + CC_NUMQ);
    if (numq < opt.queues) {
        die("device has %u virtqueues, %u requested", numq, opt.queues);
    }
    if (capacity_sectors < opt.bs / 512) {
        die("disk too small (%" PRIu64 " sectors) for --bs %u", capacity_sectors, opt.bs);
    }
    io_sectors = capacity_sectors - capacity_sectors % (opt.bs / 512);
    if (opt.verify) {
        uint64_t blocks = io_sectors / (opt.bs / 512);
        if (blocks > (256ull << 20)) {
            die("--verify: disk too large to track (%" PRIu64 " blocks)", blocks);
        }
        written_map = calloc(blocks, 1);
        if (!written_map) {
            die("out of memory");
        }
    }

    /* MSI-X: enable with the function masked, program the table, unmask */
    if (msix_nvec < opt.queues + 1) {
        die("device has %u MSI-X vectors, need %u", msix_nvec, opt.queues + 1);
    }
    uint16_t ctl = cfg_rw(msix_cap + 2);
    cfg_ww(msix_cap + 2, ctl | 0x8000 | 0x4000);
    uint64_t msi_area = ram_alloc(64 * (opt.queues + 1), 4096);
    for (unsigned v = 0; v <= opt.queues; v++) {
        uint64_t e = msix_table + 16 * v;
        uint64_t a = msi_area + 64 * v;
        writel(e + 0, (uint32_t)a);
        writel(e + 4, a >> 32);
        writel(e + 8, 0x100 + v);
        writel(e + 12, 0);
    }
    cfg_ww(msix_cap + 2, (ctl | 0x8000) & ~0x4000);
    writew(common_addr + CC_MSIX, 0);
    if (readw(common_addr + CC_MSIX) != 0) {
        die("device refused the MSI-X config vector");
    }

    vqs = calloc(opt.queues, sizeof(*vqs));
    for (unsigned i = 0; i < opt.queues; i++) {
        struct vq *q = &vqs[i];
        q->idx = i;
        q->msi_word = (volatile uint32_t *)gpa(msi_area + 64 * (i + 1));
        writew(common_addr + CC_QSELECT, i);
        unsigned qs = readw(common_addr + CC_QSIZE);
        if (qs == 0) {
            die("virtqueue %u does not exist", i);
        }
        if (qs < 3 * opt.depth) {
            die("virtqueue %u has size %u, too small for depth %u", i, qs, opt.depth);
        }
        q->size = qs;
        uint64_t d = ram_alloc(16 * qs, 4096);
        uint64_t av = ram_alloc(6 + 2 * qs, 4096);
        uint64_t us = ram_alloc(6 + 8 * qs, 4096);
        q->desc = gpa(d);
        q->avail = gpa(av);
        q->used_hdr = gpa(us);
        q->used_ring = gpa(us + 4);
        q->avail_event = gpa(us + 4 + 8 * qs);
        if (!opt.irq) {
            q->avail[0] = use_event_idx ? 0 : VRING_AVAIL_F_NO_INTERRUPT;
            q->avail[2 + qs] = 0x7fff;
        }
        q->slots = calloc(opt.depth, sizeof(struct slot));
        q->free = calloc(opt.depth, sizeof(unsigned));
        if (!q->slots || !q->free) {
            die("out of memory");
        }
        for (unsigned s = 0; s < opt.depth; s++) {
            struct slot *sl = &q->slots[s];
            sl->hdr_gpa = ram_alloc(16, 16);
            sl->st_gpa = ram_alloc(1, 1);
            sl->buf_gpa = ram_alloc(opt.bs, 4096);
            q->desc[3 * s] = (struct vdesc){ sl->hdr_gpa, 16, VRING_DESC_F_NEXT, 3 * s + 1 };
            q->desc[3 * s + 1] = (struct vdesc){ sl->buf_gpa, opt.bs, VRING_DESC_F_NEXT, 3 * s + 2 };
            q->desc[3 * s + 2] = (struct vdesc){ sl->st_gpa, 1, VRING_DESC_F_WRITE, 0 };
        }
        writel(common_addr + CC_QDESC, (uint32_t)d);
        writel(common_addr + CC_QDESC + 4, d >> 32);
        writel(common_addr + CC_QAVAIL, (uint32_t)av);
        writel(common_addr + CC_QAVAIL + 4, av >> 32);
        writel(common_addr + CC_QUSED, (uint32_t)us);
        writel(common_addr + CC_QUSED + 4, us >> 32);
        writew(common_addr + CC_QMSIX, i + 1);
        if (readw(common_addr + CC_QMSIX) != i + 1) {
            die("device refused MSI-X vector %u for queue %u", i + 1, i);
        }
        unsigned noff = readw(common_addr + CC_QNOTIFYOFF);
        q->notify_addr = notify_base + (uint64_t)noff * notify_mult;
        writew(common_addr + CC_QENABLE, 1);
    }
    set_status(ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
    uint8_t st = readb(common_addr + CC_STATUS);
    if (st & ST_FAILED || !(st & ST_DRIVER_OK)) {
        die("device did not accept DRIVER_OK (status 0x%x)", st);
    }
}

static uint64_t ram_needed(void)
{
    uint64_t per_q = 3 * 4096 + 16 * 1024 + 8 * 1024 + (uint64_t)opt.depth * (opt.bs + 4096 + 64);
    uint64_t need = RAM_ALLOC_START + 4096 * 2 + opt.queues * per_q;
    uint64_t sz = 64ull << 20;
    while (sz < need + (4u << 20)) {
        sz += 64ull << 20;
    }
    return sz;
}

/* ---- main loop ---- */
static struct rusage ru0, ru1;

static void start_measuring(void)
{
    measuring = true;
    n_done = n_reads = n_writes = n_kicks = n_notifs = 0;
    memset(hist, 0, sizeof(hist));
    getrusage(RUSAGE_SELF, &ru0);
    snapshot_threads(0);
}

static void stop_measuring(void)
{
    measuring = false;
    snapshot_threads(1);
    getrusage(RUSAGE_SELF, &ru1);
}

static void run(double *elapsed)
{
    stopping = false;
    if (opt.ramp == 0) {
        start_measuring();
    }
    for (unsigned i = 0; i < opt.queues; i++) {
        struct vq *q = &vqs[i];
        uint16_t old = q->avail_idx;
        for (unsigned s = 0; s < opt.depth; s++) {
            submit_slot(q, &q->slots[s]);
        }
        if (opt.irq) {
            arm_irq(q);
        }
        kick_if_needed(q, old);
    }
    double start = now_s();
    double mstart = start + opt.ramp;
    double end = mstart + opt.duration;
    double last_progress = start;
    uint64_t last_done = 0;
    unsigned long iter = 0;
    unsigned total_inflight = opt.queues * opt.depth;
    unsigned idle = 0;
    while (total_inflight > 0) {
        bool progressed = false;
        for (unsigned i = 0; i < opt.queues; i++) {
            struct vq *q = &vqs[i];
            if (*q->msi_word) {
                __atomic_exchange_n(q->msi_word, 0, __ATOMIC_ACQ_REL);
                n_notifs += measuring;
                q->irq_pending = true;
            }
            if (!opt.irq || q->irq_pending) {
                /*
                 * Like a guest driver: reap, re-enable the interrupt and
                 * check again (irq mode), then submit the freed slots.
                 */
                unsigned before = q->inflight;
                if (reap(q)) {
                    progressed = true;
                }
                if (opt.irq) {
                    arm_irq(q);
                    if (__atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE) == q->last_used) {
                        q->irq_pending = false;
                    }
                }
                refill(q);
                total_inflight -= before - q->inflight;
            }
        }
        if ((++iter & 255) == 0 || progressed) {
            double t = now_s();
            if (!measuring && !stopping && t >= mstart) {
                start_measuring();
                mstart = t;
            }
            if (!stopping && t >= end) {
                stop_measuring();
                *elapsed = t - mstart;
                stopping = true;
            }
            if (n_all != last_done) {
                last_done = n_all;
                last_progress = t;
            } else if (t - last_progress > opt.timeout) {
                die("device did not complete any request for %.1fs "
                    "(%u requests in flight, %" PRIu64 " done)",
                    opt.timeout, total_inflight, n_all);
            }
            if (got_signal) {
                die("interrupted by signal %d", (int)got_signal);
            }
            if ((iter & 65535) == 0) {
                int st;
                if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
                    qemu_pid = -1;
                    die("QEMU exited during the run");
                }
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
}

static const char *json_str(const char *s, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 7 < n; s++) {
        if (*s == '"' || *s == '\\') {
            out[o++] = '\\';
            out[o++] = *s;
        } else if ((unsigned char)*s < 0x20) {
            o += snprintf(out + o, n - o, "\\u%04x", *s);
        } else {
            out[o++] = *s;
        }
    }
    out[o] = 0;
    return out;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    rng_state = opt.seed * 0x9e3779b97f4a7c15ull + 0x1234567;
    if (!rng_state) {
        rng_state = 1;
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ram_size = ram_needed();
    if (ram_size > (2ull << 30)) {
        fprintf(stderr, "vblk-load: needs %" PRIu64 " MiB of guest RAM; at most 2048 "
                "(reduce --queues, --depth or --bs)\n", ram_size >> 20);
        return 2;
    }
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(mem_path, sizeof(mem_path), "%s/vblk-load-%d.mem", shm, (int)getpid());
    int mfd = open(mem_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (mfd < 0) {
        mem_path[0] = 0;
        die("cannot create guest RAM file: %s", strerror(errno));
    }
    if (ftruncate(mfd, ram_size) < 0) {
        die("ftruncate guest RAM: %s", strerror(errno));
    }
    ram = mmap(NULL, ram_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (ram == MAP_FAILED) {
        die("mmap guest RAM: %s", strerror(errno));
    }
    close(mfd);

    int lfd = listen_socket();
    start_qemu(lfd);
    /* QEMU has opened the RAM file once it answers a command */
    pci_devfn = 0;
    cfg_rl(0);
    unlink(mem_path);
    mem_path[0] = 0;

    pci_find_device();
    pci_assign_bars();
    pci_find_caps();
    virtio_init();
    unsigned long setup_cmds = qtest_cmds;

    double elapsed = 0;
    if (opt.strace) {
        strace_start();
    }
    run(&elapsed);
    if (opt.strace) {
        strace_stop();
    }
    group_threads();

    /* reset the device before stopping QEMU */
    set_status(0);

    double iops = n_done / elapsed;
    double p50 = hist_pct(n_done, 50), p99 = hist_pct(n_done, 99), p999 = hist_pct(n_done, 99.9);
    double lat_sum = 0;
    for (unsigned i = 0; i < HIST_N; i++) {
        lat_sum += hist[i] * hist_val(i);
    }
    double lat_avg = n_done ? lat_sum / n_done : 0;
    double own_cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                     (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                     ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                      (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) * 1e-6;
    double qemu_cpu = 0;
    for (int g = 0; g < ngroups; g++) {
        qemu_cpu += groups[g].cpu;
    }
    double per = n_done ? 1e6 / n_done : 0;   /* seconds -> us per request */

    if (opt.json) {
        char buf[256];
        printf("{\n");
        printf("  \"qemu\": \"%s\",\n", json_str(opt.qemu, buf, sizeof(buf)));
        printf("  \"blockdev\": \"%s\",\n", json_str(opt.blockdev, buf, sizeof(buf)));
        printf("  \"rw\": \"%s\", \"bs\": %u, \"queues\": %u, \"depth\": %u, "
               "\"queue_size\": %u,\n", rw_names[opt.rw], opt.bs, opt.queues, opt.depth,
               vqs[0].size);
        printf("  \"poll_max_ns\": %ld, \"spin\": %s,\n", opt.poll_max_ns,
               opt.spin ? "true" : "false");
        printf("  \"event_idx\": %s, \"iothread\": %s, \"mode\": \"%s\", \"verify\": %s,\n",
               opt.event_idx ? "true" : "false", opt.iothread ? "true" : "false",
               opt.irq ? "irq" : "poll", opt.verify ? "true" : "false");
        printf("  \"elapsed_s\": %.6f, \"requests\": %" PRIu64 ", \"reads\": %" PRIu64
               ", \"writes\": %" PRIu64 ", \"verified_reads\": %" PRIu64 ",\n",
               elapsed, n_done, n_reads, n_writes, n_verified);
        printf("  \"iops\": %.1f,\n", iops);
        printf("  \"lat_us\": {\"avg\": %.2f, \"p50\": %.2f, \"p99\": %.2f, \"p99.9\": %.2f},\n",
               lat_avg / 1e3, p50 / 1e3, p99 / 1e3, p999 / 1e3);
        printf("  \"kicks\": %" PRIu64 ", \"kicks_per_req\": %.4f,\n", n_kicks,
               n_done ? (double)n_kicks / n_done : 0);
        printf("  \"notifications\": %" PRIu64 ", \"notifications_per_req\": %.4f,\n",
               n_notifs, n_done ? (double)n_notifs / n_done : 0);
        printf("  \"cpu_source\": \"%s\",\n", have_schedstat ? "schedstat" : "stat");
        printf("  \"qemu_cpu_us_per_req\": %.3f, \"loadgen_cpu_us_per_req\": %.3f,\n",
               qemu_cpu * per, own_cpu * per);
        printf("  \"threads\": [");
        for (int g = 0; g < ngroups; g++) {
            printf("%s\n    {\"name\": \"%s\", \"count\": %d, \"cpu_s\": %.6f, "
                   "\"cpu_us_per_req\": %.3f}", g ? "," : "",
                   json_str(groups[g].name, buf, sizeof(buf)), groups[g].count,
                   groups[g].cpu, groups[g].cpu * per);
        }
        printf("\n  ],\n");
        if (opt.strace) {
            printf("  \"strace_requests\": %" PRIu64 ",\n  \"syscalls_per_req\": {", n_all);
            for (int i = 0; i < nsyscs; i++) {
                printf("%s\"%s\": %.4f", i ? ", " : "", json_str(syscs[i].name, buf, sizeof(buf)),
                       n_all ? (double)syscs[i].calls / n_all : 0);
            }
            printf("},\n");
        }
        printf("  \"setup_qtest_cmds\": %lu\n}\n", setup_cmds);
    } else {
        printf("vblk-load: %s bs=%u queues=%u depth=%u qsize=%u event_idx=%s iothread=%s mode=%s\n",
               rw_names[opt.rw], opt.bs, opt.queues, opt.depth, vqs[0].size,
               opt.event_idx ? "on" : "off", opt.iothread ? "on" : "off",
               opt.irq ? "irq" : "poll");
        printf("  qemu:     %s\n  blockdev: %s\n", opt.qemu, opt.blockdev);
        printf("  requests: %" PRIu64 " in %.3f s (%" PRIu64 " reads, %" PRIu64 " writes",
               n_done, elapsed, n_reads, n_writes);
        if (opt.verify) {
            printf(", %" PRIu64 " reads verified", n_verified);
        }
        printf("), all status OK\n");
        printf("  IOPS:     %.0f\n", iops);
        printf("  latency:  avg %.1f us, p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n",
               lat_avg / 1e3, p50 / 1e3, p99 / 1e3, p999 / 1e3);
        printf("  kicks/req: %.4f   notifications/req: %.4f (MSI-X messages observed)\n",
               n_done ? (double)n_kicks / n_done : 0, n_done ? (double)n_notifs / n_done : 0);
        printf("  CPU per request (us, from %s):\n", have_schedstat ? "schedstat" : "stat ticks");
        for (int g = 0; g < ngroups; g++) {
            if (groups[g].count > 1) {
                printf("    %-18s x%-3d %8.3f\n", groups[g].name, groups[g].count,
                       groups[g].cpu * per);
            } else {
                printf("    %-23s %8.3f\n", groups[g].name, groups[g].cpu * per);
            }
        }
        printf("    %-23s %8.3f\n", "QEMU total", qemu_cpu * per);
        printf("    %-23s %8.3f\n", "vblk-load (this)", own_cpu * per);
        if (opt.strace) {
            printf("  QEMU syscalls per request (strace -f -c, over all %" PRIu64
                   " requests incl. ramp and drain):\n", n_all);
            for (int i = 0; i < nsyscs; i++) {
                if (strcmp(syscs[i].name, "total")) {
                    printf("    %-23s %8.4f\n", syscs[i].name,
                           n_all ? (double)syscs[i].calls / n_all : 0);
                }
            }
        }
    }
    fflush(stdout);
    cleanup();
    return 0;
}
