/*
 * virtio-pci setup and the split virtqueues (virtio.h): reset, feature
 * negotiation (VERSION_1, EVENT_IDX, BLK_F_MQ), MSI-X vectors whose message
 * address is a word in guest RAM, queue setup; then requests: prepare,
 * submit, kick as EVENT_IDX/NO_NOTIFY asks, reap and check status.
 */
#include "virtio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "pci.h"
#include "qemu.h"
#include "qtest.h"
#include "stats.h"
#include "vblk-load.h"

#define ST_ACK         1
#define ST_DRIVER      2
#define ST_DRIVER_OK   4
#define ST_FEATURES_OK 8
#define ST_FAILED      128

#define F_BLK_MQ        12
#define F_INDIRECT_DESC 28
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

#define VRING_DESC_F_NEXT  1
#define VRING_DESC_F_WRITE 2
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

#define BLK_T_IN  0
#define BLK_T_OUT 1
#define BLK_S_OK  0

struct blk_hdr { uint32_t type; uint32_t ioprio; uint64_t sector; };

struct vq *vqs;
uint64_t capacity_sectors;
static struct vpci dev;
static bool use_event_idx;
static uint64_t io_first, io_limit, io_sectors;   /* the sectors requests go to */
static uint8_t *written_map;    /* --verify: blocks a completed write covered */
static uint64_t msi_area;       /* MSI-X message words: config, then a queue each */

static uint64_t rnd(struct vq *q)
{
    /* xorshift64* */
    q->rng ^= q->rng >> 12;
    q->rng ^= q->rng << 25;
    q->rng ^= q->rng >> 27;
    return q->rng * 2685821657736338717ull;
}

static void fill_pattern(uint8_t *buf, uint64_t sector, unsigned len)
{
    image_pattern(buf, sector, len / 512, opt.seed);
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
    default: write = (rnd(q) % 100) >= opt.rwmix_read; break;
    }
    if (opt.rw == RW_READ || opt.rw == RW_WRITE) {
        /* each queue streams through its own share of the disk */
        uint64_t per = blocks / opt.queues;
        if (per == 0) {
            per = 1;
        }
        blk = (q->idx * per + q->seq_next++ % per) % blocks;
    } else {
        blk = rnd(q) % blocks;
    }
    s->sector = io_first + blk * (opt.bs / 512);
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
            s->check = __atomic_load_n(&written_map[blk], __ATOMIC_RELAXED);
            if (s->check) {
                memset(gpa(s->buf_gpa), 0xa5, opt.bs);
            }
        }
    }
    *(volatile uint8_t *)gpa(s->st_gpa) = 0xff;
}

void kick_if_needed(struct vq *q, uint16_t old, bool count)
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
    if (kick && q->has_kick_fd) {
        uint64_t one = 1;
        if (write(q->kick_fd, &one, sizeof(one)) != sizeof(one)) {
            die("kick: write to queue %u's ioeventfd: %s", q->idx, strerror(errno));
        }
        q->n.kicks += count;
    } else if (kick) {
        qtest_kick(q->notify_addr, q->idx, opt.kick_async);
        q->n.kicks += count;
    }
}

void submit_slot(struct vq *q, struct slot *s)
{
    prepare_request(q, s);
    s->inflight = true;
    q->inflight++;
    s->submit_ns = now_ns();
    q->avail[2 + (q->avail_idx % q->size)] = (s - q->slots) * 3;
    q->avail_idx++;
}

static void verify_read(struct vq *q, struct slot *s)
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
    q->n.verified++;
}

unsigned reap(struct vq *q, bool count)
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
        q->n.all++;
        if (count) {
            q->hist[hist_idx(t - s->submit_ns)]++;
            q->n.done++;
            q->n.writes += s->write;
            q->n.reads += !s->write;
        }
        if (s->write) {
            if (opt.verify) {
                __atomic_store_n(&written_map[(s->sector - io_first) / (opt.bs / 512)], 1,
                                 __ATOMIC_RELAXED);
            }
        } else if (s->check) {
            verify_read(q, s);
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

void refill(struct vq *q, bool stopping, bool count)
{
    uint16_t old = q->avail_idx;
    if (!stopping) {
        for (unsigned i = 0; i < q->nfree; i++) {
            submit_slot(q, &q->slots[q->free[i]]);
        }
    }
    q->nfree = 0;
    kick_if_needed(q, old, count);
}

void arm_irq(struct vq *q)
{
    if (use_event_idx) {
        __atomic_store_n(&q->avail[2 + q->size], q->last_used, __ATOMIC_RELAXED);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/*
 * One look at queue q, as a guest driver takes it: with --mode irq only
 * when its MSI-X message came, then reap, re-enable the interrupt and look
 * again (what completed in between may not interrupt), and submit the
 * freed slots.  Returns the requests reaped; count: inside the measured
 * window.
 */
unsigned service_queue(struct vq *q, bool stopping, bool count)
{
    unsigned n = 0;
    if (*q->msi_word) {
        __atomic_exchange_n(q->msi_word, 0, __ATOMIC_ACQ_REL);
        q->n.notifs += count;
        q->n.notifs_all++;
        q->irq_pending = true;
    }
    if (!opt.irq || q->irq_pending) {
        n = reap(q, count);
        if (opt.irq) {
            arm_irq(q);
            if (__atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE) == q->last_used) {
                q->irq_pending = false;
            }
        }
        refill(q, stopping, count);
    }
    return n;
}

/* ---- setup ---- */
uint64_t virtio_ram_needed(void)
{
    uint64_t per_q = 3 * 4096 + 16 * 1024 + 8 * 1024 + (uint64_t)opt.depth * (opt.bs + 4096 + 64);
    uint64_t need = RAM_ALLOC_START + 4096 * 2 + opt.queues * per_q;
    if (opt.chaos) {
        need += 1u << 20;       /* chaos.c's own buffers */
    }
    uint64_t sz = 64ull << 20;
    while (sz < need + (4u << 20)) {
        sz += 64ull << 20;
    }
    return sz;
}

static void set_status(uint8_t s)
{
    writeb(dev.common + CC_STATUS, s);
}

uint8_t virtio_status(void)
{
    return readb(dev.common + CC_STATUS);
}

static void wait_reset(void)
{
    double deadline = now_s() + opt.timeout;
    while (virtio_status() != 0) {
        if (now_s() > deadline) {
            qemu_hung = true;
            die("device did not complete reset within %.1fs", opt.timeout);
        }
    }
}

void virtio_reset_after_kick(struct vq *q)
{
    qtest_kick(q->notify_addr, q->idx, true);
    qtest_write_pipelined('b', dev.common + CC_STATUS, 0);
    wait_reset();
}

void virtio_reset(void)
{
    set_status(0);
    wait_reset();
}

void virtio_io_range(uint64_t first, uint64_t n)
{
    io_first = first;
    io_limit = n;
}

uint64_t virtio_notify_addr(unsigned i)
{
    writew(dev.common + CC_QSELECT, i);
    return dev.notify_base + (uint64_t)readw(dev.common + CC_QNOTIFYOFF) * dev.notify_mult;
}

void virtio_queue_enable(unsigned i, uint16_t v)
{
    writew(dev.common + CC_QSELECT, i);
    writew(dev.common + CC_QENABLE, v);
}

volatile uint32_t *virtio_config_msi(void)
{
    return gpa(msi_area);
}

/* Zero q's rings and slots, write its descriptors, give it to the device. */
static void program_queue(struct vq *q)
{
    unsigned qs = q->size;
    memset(q->desc, 0, 16 * qs);
    memset(q->avail, 0, 6 + 2 * qs);
    memset((void *)q->used_hdr, 0, 6 + 8 * qs);
    *q->msi_word = 0;
    if (!opt.irq) {
        q->avail[0] = use_event_idx ? 0 : VRING_AVAIL_F_NO_INTERRUPT;
        q->avail[2 + qs] = 0x7fff;
    }
    q->avail_idx = q->last_used = 0;
    q->inflight = q->nfree = 0;
    q->irq_pending = false;
    for (unsigned s = 0; s < opt.depth; s++) {
        struct slot *sl = &q->slots[s];
        sl->inflight = false;
        q->desc[3 * s] = (struct vdesc){ sl->hdr_gpa, 16, VRING_DESC_F_NEXT, 3 * s + 1 };
        q->desc[3 * s + 1] = (struct vdesc){ sl->buf_gpa, opt.bs, VRING_DESC_F_NEXT, 3 * s + 2 };
        q->desc[3 * s + 2] = (struct vdesc){ sl->st_gpa, 1, VRING_DESC_F_WRITE, 0 };
    }
    uint64_t d = (uint8_t *)q->desc - (uint8_t *)gpa(0);
    uint64_t av = (uint8_t *)q->avail - (uint8_t *)gpa(0);
    uint64_t us = (uint8_t *)q->used_hdr - (uint8_t *)gpa(0);
    writew(dev.common + CC_QSELECT, q->idx);
    writel(dev.common + CC_QDESC, (uint32_t)d);
    writel(dev.common + CC_QDESC + 4, d >> 32);
    writel(dev.common + CC_QAVAIL, (uint32_t)av);
    writel(dev.common + CC_QAVAIL + 4, av >> 32);
    writel(dev.common + CC_QUSED, (uint32_t)us);
    writel(dev.common + CC_QUSED + 4, us >> 32);
    writew(dev.common + CC_QMSIX, q->idx + 1);
    if (readw(dev.common + CC_QMSIX) != q->idx + 1) {
        die("device refused MSI-X vector %u for queue %u", q->idx + 1, q->idx);
    }
    unsigned noff = readw(dev.common + CC_QNOTIFYOFF);
    q->notify_addr = dev.notify_base + (uint64_t)noff * dev.notify_mult;
    writew(dev.common + CC_QENABLE, 1);
}

static void setup_queue(struct vq *q, unsigned i)
{
    q->idx = i;
    q->msi_word = (volatile uint32_t *)gpa(msi_area + 64 * (i + 1));
    q->rng = (opt.seed + i) * 0x9e3779b97f4a7c15ull + 0x1234567;
    if (!q->rng) {
        q->rng = 1;
    }
    writew(dev.common + CC_QSELECT, i);
    unsigned qs = readw(dev.common + CC_QSIZE);
    if (qs == 0) {
        die("virtqueue %u does not exist", i);
    }
    if (qs < 3 * opt.depth) {
        die("virtqueue %u has size %u, too small for depth %u", i, qs, opt.depth);
    }
    q->size = qs;
    q->desc = gpa(ram_alloc(16 * qs, 4096));
    q->avail = gpa(ram_alloc(6 + 2 * qs, 4096));
    uint64_t us = ram_alloc(6 + 8 * qs, 4096);
    q->used_hdr = gpa(us);
    q->used_ring = gpa(us + 4);
    q->avail_event = gpa(us + 4 + 8 * qs);
    q->slots = calloc(opt.depth, sizeof(struct slot));
    q->free = calloc(opt.depth, sizeof(unsigned));
    q->hist = calloc(HIST_N, sizeof(uint64_t));
    if (!q->slots || !q->free || !q->hist) {
        die("out of memory");
    }
    for (unsigned s = 0; s < opt.depth; s++) {
        struct slot *sl = &q->slots[s];
        sl->hdr_gpa = ram_alloc(16, 16);
        sl->st_gpa = ram_alloc(1, 1);
        sl->buf_gpa = ram_alloc(opt.bs, 4096);
    }
    program_queue(q);
}

/* Reset, then ACKNOWLEDGE, DRIVER, the features, FEATURES_OK. */
static void negotiate(void)
{
    virtio_reset();
    set_status(ST_ACK);
    set_status(ST_ACK | ST_DRIVER);

    writel(dev.common + CC_DFSELECT, 0);
    uint64_t f = readl(dev.common + CC_DF);
    writel(dev.common + CC_DFSELECT, 1);
    f |= (uint64_t)readl(dev.common + CC_DF) << 32;
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
    if (opt.chaos) {
        if (!(f & (1ull << F_INDIRECT_DESC))) {
            die("device does not offer VIRTIO_RING_F_INDIRECT_DESC");
        }
        want |= 1ull << F_INDIRECT_DESC;
    }
    use_event_idx = opt.event_idx;
    writel(dev.common + CC_GFSELECT, 0);
    writel(dev.common + CC_GF, (uint32_t)want);
    writel(dev.common + CC_GFSELECT, 1);
    writel(dev.common + CC_GF, want >> 32);
    set_status(ST_ACK | ST_DRIVER | ST_FEATURES_OK);
    if (!(readb(dev.common + CC_STATUS) & ST_FEATURES_OK)) {
        die("device rejected the features 0x%" PRIx64, want);
    }
}

/* Capacity and queue counts from the device; the sectors requests go to. */
static void read_config(void)
{
    capacity_sectors = readl(dev.devcfg) | (uint64_t)readl(dev.devcfg + 4) << 32;
    if (opt.queues > 1) {
        uint16_t nq = readw(dev.devcfg + 34);
        if (nq < opt.queues) {
            die("device offers %u queues, %u requested", nq, opt.queues);
        }
    }
    uint16_t numq = readw(dev.common + CC_NUMQ);
    if (numq < opt.queues) {
        die("device has %u virtqueues, %u requested", numq, opt.queues);
    }
    if (capacity_sectors < opt.bs / 512) {
        die("disk too small (%" PRIu64 " sectors) for --bs %u", capacity_sectors, opt.bs);
    }
    uint64_t n = capacity_sectors;
    if (io_limit && io_first + io_limit <= capacity_sectors) {
        n = io_limit;
    } else {
        io_first = 0;
    }
    io_sectors = n - n % (opt.bs / 512);
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
}

/* MSI-X: enable with the function masked, program the table, unmask. */
static void setup_msix(void)
{
    if (dev.msix_nvec < opt.queues + 1) {
        die("device has %u MSI-X vectors, need %u", dev.msix_nvec, opt.queues + 1);
    }
    uint16_t ctl = cfg_rw(dev.msix_cap + 2);
    cfg_ww(dev.msix_cap + 2, ctl | 0x8000 | 0x4000);
    msi_area = ram_alloc(64 * (opt.queues + 1), 4096);
    for (unsigned v = 0; v <= opt.queues; v++) {
        uint64_t e = dev.msix_table + 16 * v;
        uint64_t a = msi_area + 64 * v;
        writel(e + 0, (uint32_t)a);
        writel(e + 4, a >> 32);
        writel(e + 8, 0x100 + v);
        writel(e + 12, 0);
    }
    cfg_ww(dev.msix_cap + 2, (ctl | 0x8000) & ~0x4000);
}

/* The config vector, the queues (allocated the first time), DRIVER_OK. */
static void start_device(bool alloc)
{
    writew(dev.common + CC_MSIX, 0);
    if (readw(dev.common + CC_MSIX) != 0) {
        die("device refused the MSI-X config vector");
    }
    *virtio_config_msi() = 0;
    for (unsigned i = 0; i < opt.queues; i++) {
        if (alloc) {
            setup_queue(&vqs[i], i);
        } else {
            program_queue(&vqs[i]);
        }
    }
    set_status(ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
    uint8_t st = readb(dev.common + CC_STATUS);
    if (st & ST_FAILED || !(st & ST_DRIVER_OK)) {
        die("device did not accept DRIVER_OK (status 0x%x)", st);
    }
}

void virtio_init(void)
{
    pci_find_device();
    pci_assign_bars();
    pci_find_caps(&dev);
    negotiate();
    read_config();
    setup_msix();
    vqs = calloc(opt.queues, sizeof(*vqs));
    if (!vqs) {
        die("out of memory");
    }
    start_device(true);
}

void virtio_reinit(void)
{
    negotiate();
    start_device(false);
}
