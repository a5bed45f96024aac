/*
 * virtio-pci setup and the virtqueues (virtio.h): reset, feature
 * negotiation (VERSION_1, EVENT_IDX, BLK_F_MQ, RING_PACKED), MSI-X vectors
 * whose message address is a word in guest RAM, queue setup; then
 * requests: prepare, submit, kick as the device's event suppression asks
 * (split: EVENT_IDX or NO_NOTIFY; packed: its event structure), reap and
 * check status and, with --verify, data.
 */
#include "virtio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
#define F_BLK_DISCARD   13
#define F_BLK_WRITE_ZEROES 14
#define F_INDIRECT_DESC 28
#define F_RING_EVENT_IDX 29
#define F_VERSION_1     32
#define F_RING_PACKED   34

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

#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

#define BLK_T_IN  0
#define BLK_T_OUT 1
#define BLK_S_OK  0

struct blk_hdr { uint32_t type; uint32_t ioprio; uint64_t sector; };

struct vq *vqs;
uint64_t capacity_sectors;
bool ring_packed;
static struct vpci dev;
static bool use_event_idx;
static uint64_t io_first, io_limit, io_sectors;   /* the sectors requests go to */
static uint64_t msi_area;       /* MSI-X message words: config, then a queue each */

/*
 * --verify: every write carries a new generation number (image.h's
 * pattern), and no two requests of the run are in flight on one block at
 * a time, so a read must find exactly the generation of the block's last
 * completed write; an overwrite that was lost, or a read that returns
 * older data, shows as the wrong generation.  gen 0 is the data before the
 * run, checked only when it is known (virtio_verify_original).  A write
 * that the driver gave up (virtio_abandon) may or may not have happened:
 * it is the block's alternative until a later write completes.
 */
static uint32_t *blk_gen, *blk_alt;
static uint8_t *blk_busy;
static uint32_t gen_next;
static bool orig_known;
static uint64_t orig_seed;

static uint64_t rnd(struct vq *q)
{
    /* xorshift64* */
    q->rng ^= q->rng >> 12;
    q->rng ^= q->rng << 25;
    q->rng ^= q->rng >> 27;
    return q->rng * 2685821657736338717ull;
}

static unsigned sectors_per_block(void)
{
    return opt.bs / 512;
}

void virtio_verify_original(uint64_t seed)
{
    orig_known = true;
    orig_seed = seed;
}

void virtio_verify_state(const uint32_t **gen, const uint32_t **alt, unsigned *block)
{
    *gen = blk_gen;
    *alt = blk_alt;
    *block = sectors_per_block();
}

void virtio_verify_read_next(struct vq *q, uint64_t blk)
{
    q->force_read = blk;
}

/* --verify: take block blk if no request is in flight on it */
static bool take_block(uint64_t blk)
{
    return !opt.verify || !__atomic_exchange_n(&blk_busy[blk], 1, __ATOMIC_ACQUIRE);
}

static void release_block(uint64_t blk)
{
    if (opt.verify) {
        __atomic_store_n(&blk_busy[blk], 0, __ATOMIC_RELEASE);
    }
}

static uint64_t slot_block(const struct slot *s)
{
    return (s->sector - io_first) / sectors_per_block();
}

/* The block of q's next request, taken (with --verify, one that has no
 * request in flight). */
static uint64_t pick_block(struct vq *q, bool *write)
{
    uint64_t blocks = io_sectors / sectors_per_block();
    uint64_t blk = 0;
    if (q->force_read >= 0) {
        blk = q->force_read;
        q->force_read = -1;
        *write = false;
        if (!take_block(blk)) {
            die("--verify self-test: block %" PRIu64 " is busy", blk);
        }
        return blk;
    }
    for (uint64_t tries = 0; tries <= 4 * blocks + 64; tries++) {
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
        if (take_block(blk)) {
            return blk;
        }
    }
    die("--verify: no block without a request in flight (%" PRIu64 " blocks)", blocks);
}

static void prepare_request(struct vq *q, struct slot *s)
{
    bool write;
    switch (opt.rw) {
    case RW_READ: write = false; break;
    case RW_WRITE: write = true; break;
    case RW_RANDREAD: write = false; break;
    case RW_RANDWRITE: write = true; break;
    default: write = (rnd(q) % 100) >= opt.rwmix_read; break;
    }
    uint64_t blk = pick_block(q, &write);
    s->sector = io_first + blk * sectors_per_block();
    s->write = write;
    s->check = false;
    struct blk_hdr *h = gpa(s->hdr_gpa);
    h->type = write ? BLK_T_OUT : BLK_T_IN;
    h->ioprio = 0;
    h->sector = s->sector;
    if (opt.verify) {
        if (write) {
            s->gen = __atomic_add_fetch(&gen_next, 1, __ATOMIC_RELAXED);
            image_gen_pattern(gpa(s->buf_gpa), s->sector, sectors_per_block(), opt.seed,
                              s->gen);
        } else {
            s->gen = blk_gen[blk];
            s->alt = blk_alt[blk];
            s->check = s->gen || orig_known;
            if (s->check) {
                memset(gpa(s->buf_gpa), 0xa5, opt.bs);
            }
        }
    }
    *(volatile uint8_t *)gpa(s->st_gpa) = 0xff;
}

/* split: the slot's fixed data descriptor gets the direction */
static void split_submit(struct vq *q, struct slot *s)
{
    unsigned n = s - q->slots;
    struct vdesc *d = &q->desc[n * 3 + 1];
    d->flags = VRING_DESC_F_NEXT | (s->write ? 0 : VRING_DESC_F_WRITE);
    q->avail[2 + (q->avail_idx % q->size)] = n * 3;
    q->avail_idx++;
}

/* Is the packed ring's descriptor count i on an even lap (wrap counter 1)? */
static bool packed_wrap(const struct vq *q, uint16_t i)
{
    return !((i / q->size) & 1);
}

/* packed: the chain at the next three ring positions, buffer id = slot;
 * the head's flags last, which makes the chain available */
static void packed_submit(struct vq *q, struct slot *s)
{
    const uint64_t addr[3] = { s->hdr_gpa, s->buf_gpa, s->st_gpa };
    const uint32_t len[3] = { 16, opt.bs, 1 };
    const uint16_t fl[3] = { VRING_DESC_F_NEXT,
                             VRING_DESC_F_NEXT | (s->write ? 0 : VRING_DESC_F_WRITE),
                             VRING_DESC_F_WRITE };
    unsigned head = q->avail_idx % q->size;
    uint16_t head_flags = 0;
    for (unsigned k = 0; k < 3; k++) {
        uint16_t i = q->avail_idx + k;
        struct pdesc *d = &q->pdesc[i % q->size];
        uint16_t f = fl[k] | (packed_wrap(q, i) ? VRING_PACKED_F_AVAIL : VRING_PACKED_F_USED);
        d->addr = addr[k];
        d->len = len[k];
        d->id = s - q->slots;
        if (k) {
            d->flags = f;
        } else {
            head_flags = f;
        }
    }
    __atomic_store_n(&q->pdesc[head].flags, head_flags, __ATOMIC_RELEASE);
    q->avail_idx += 3;
}

/* packed, EVENT_IDX: does the device's off_wrap fall in (old, new]? */
static bool packed_need_kick(struct vq *q, uint16_t old, uint16_t new)
{
    uint16_t flags = q->dev_evt[1];
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint16_t off_wrap = q->dev_evt[0];
    if (flags == PACKED_EVENT_DISABLE) {
        return false;
    }
    if (flags != PACKED_EVENT_DESC || !use_event_idx) {
        return true;
    }
    /* the event as a descriptor count: in this lap, or the one before */
    uint16_t lap = new - new % q->size;
    uint16_t ev = lap + (off_wrap & 0x7fff);
    if (!(off_wrap >> 15) != !packed_wrap(q, new)) {
        ev -= q->size;
    }
    return (uint16_t)(new - ev - 1) < (uint16_t)(new - old);
}

void kick_if_needed(struct vq *q, uint16_t old, bool count)
{
    uint16_t new = q->avail_idx;
    if (new == old) {
        return;
    }
    bool kick;
    if (ring_packed) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        kick = packed_need_kick(q, old, new);
    } else {
        __atomic_store_n(&q->avail[1], new, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (use_event_idx) {
            uint16_t ev = *q->avail_event;
            kick = (uint16_t)(new - ev - 1) < (uint16_t)(new - old);
        } else {
            kick = !(q->used_hdr[0] & VRING_USED_F_NO_NOTIFY);
        }
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
    if (ring_packed) {
        packed_submit(q, s);
    } else {
        split_submit(q, s);
    }
}

static void verify_read(struct vq *q, struct slot *s)
{
    uint8_t *buf = gpa(s->buf_gpa);
    for (unsigned off = 0; off < opt.bs; off += 512) {
        uint64_t sec = s->sector + off / 512, named = 0;
        if ((s->gen || orig_known) &&
            image_holds(buf + off, sec, orig_seed, opt.seed, s->gen)) {
            continue;
        }
        if (image_holds(buf + off, sec, orig_seed, opt.seed, s->alt)) {
            continue;
        }
        char a[48] = "", found[96];
        if (s->alt != GEN_NONE) {
            snprintf(a, sizeof(a), " (or %u, a write given up)", s->alt);
        }
        uint32_t g = image_gen_of(buf + off, opt.seed, &named);
        if (g && named == sec) {
            snprintf(found, sizeof(found), "generation %u", g);
        } else if (g) {
            snprintf(found, sizeof(found), "generation %u of sector %" PRIu64, g, named);
        } else if (orig_known && image_holds(buf + off, sec, orig_seed, opt.seed, 0)) {
            snprintf(found, sizeof(found), "the data from before the run");
        } else {
            snprintf(found, sizeof(found), "data of no write of this run");
        }
        die("verify: queue %u read sector %" PRIu64 " and found %s; the last completed "
            "write to it was generation %u%s (0: none in this run): a lost or stale "
            "write, or a stale read (a null-co backend cannot pass --verify)",
            q->idx, sec, found, s->gen, a);
    }
    q->n.verified++;
}

bool used_pending(struct vq *q)
{
    if (ring_packed) {
        uint16_t f = __atomic_load_n(&q->pdesc[q->last_used % q->size].flags,
                                     __ATOMIC_ACQUIRE);
        bool w = packed_wrap(q, q->last_used);
        return !(f & VRING_PACKED_F_AVAIL) == !w && !(f & VRING_PACKED_F_USED) == !w;
    }
    return __atomic_load_n(&q->used_hdr[1], __ATOMIC_ACQUIRE) != q->last_used;
}

/* The next used request of q (and consume it), or NULL. */
static struct slot *next_used(struct vq *q)
{
    unsigned id;
    if (!used_pending(q)) {
        return NULL;
    }
    if (ring_packed) {
        id = q->pdesc[q->last_used % q->size].id;
        if (id >= opt.depth || !q->slots[id].inflight) {
            die("device returned a bad buffer id %u on queue %u", id, q->idx);
        }
        q->last_used += 3;
        return &q->slots[id];
    }
    id = q->used_ring[q->last_used % q->size].id;
    q->last_used++;
    if (id % 3 || id / 3 >= opt.depth || !q->slots[id / 3].inflight) {
        die("device returned a bad used id %u on queue %u", id, q->idx);
    }
    return &q->slots[id / 3];
}

unsigned reap(struct vq *q, bool count)
{
    unsigned n = 0;
    uint64_t t = 0;
    struct slot *s;
    while ((s = next_used(q))) {
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
        if (opt.verify) {
            uint64_t blk = slot_block(s);
            if (s->write) {
                blk_gen[blk] = s->gen;
                blk_alt[blk] = GEN_NONE;
            } else if (s->check) {
                verify_read(q, s);
            }
            release_block(blk);
        }
        q->free[q->nfree++] = s - q->slots;
        n++;
    }
    if (n && use_event_idx && !opt.irq && !ring_packed) {
        /* poll mode: keep the device's interrupt threshold far away */
        q->avail[2 + q->size] = q->last_used + 0x7fff;
    }
    return n;
}

void virtio_abandon(struct vq *q)
{
    for (unsigned i = 0; i < opt.depth; i++) {
        struct slot *s = &q->slots[i];
        if (!s->inflight) {
            continue;
        }
        if (opt.verify) {
            uint64_t blk = slot_block(s);
            if (s->write) {
                blk_alt[blk] = s->gen;
            }
            release_block(blk);
        }
        s->inflight = false;
        q->inflight--;
    }
    q->nfree = 0;
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
        if (ring_packed) {
            unsigned pos = q->last_used % q->size;
            q->drv_evt[0] = pos | (packed_wrap(q, q->last_used) ? 0x8000 : 0);
        } else {
            __atomic_store_n(&q->avail[2 + q->size], q->last_used, __ATOMIC_RELAXED);
        }
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
            if (!used_pending(q)) {
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

uint32_t virtio_devcfg_readl(unsigned off)
{
    return readl(dev.devcfg + off);
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
    if (ring_packed) {
        /* interrupts: off when polling; with EVENT_IDX at the descriptor
         * arm_irq() names; otherwise on */
        q->drv_evt[0] = 0x8000;
        q->drv_evt[1] = !opt.irq ? PACKED_EVENT_DISABLE :
                        use_event_idx ? PACKED_EVENT_DESC : PACKED_EVENT_ENABLE;
    } else if (!opt.irq) {
        q->avail[0] = use_event_idx ? 0 : VRING_AVAIL_F_NO_INTERRUPT;
        q->avail[2 + qs] = 0x7fff;
    }
    q->avail_idx = q->last_used = 0;
    q->inflight = q->nfree = 0;
    q->irq_pending = false;
    q->force_read = -1;
    for (unsigned s = 0; s < opt.depth; s++) {
        struct slot *sl = &q->slots[s];
        sl->inflight = false;
        if (ring_packed) {
            continue;       /* written at each submission */
        }
        q->desc[3 * s] = (struct vdesc){ sl->hdr_gpa, 16, VRING_DESC_F_NEXT, 3 * s + 1 };
        q->desc[3 * s + 1] = (struct vdesc){ sl->buf_gpa, opt.bs, VRING_DESC_F_NEXT, 3 * s + 2 };
        q->desc[3 * s + 2] = (struct vdesc){ sl->st_gpa, 1, VRING_DESC_F_WRITE, 0 };
    }
    /* split: descriptor table, avail ring, used ring; packed: descriptor
     * ring, driver and device event suppression structures */
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
    q->pdesc = (struct pdesc *)q->desc;
    /* at least a page each: the packed ring's event structures are 4 bytes,
     * and --chaos reads data into the page of the device's */
    q->avail = gpa(ram_alloc(6 + 2 * qs < 4096 ? 4096 : 6 + 2 * qs, 4096));
    q->drv_evt = q->avail;
    uint64_t us = ram_alloc(6 + 8 * qs < 4096 ? 4096 : 6 + 8 * qs, 4096);
    q->used_hdr = gpa(us);
    q->dev_evt = q->used_hdr;
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
        static const struct { unsigned bit; const char *name; } chaos_f[] = {
            { F_INDIRECT_DESC, "VIRTIO_RING_F_INDIRECT_DESC" },
            { F_BLK_DISCARD, "VIRTIO_BLK_F_DISCARD" },
            { F_BLK_WRITE_ZEROES, "VIRTIO_BLK_F_WRITE_ZEROES" },
        };
        for (unsigned i = 0; i < sizeof(chaos_f) / sizeof(chaos_f[0]); i++) {
            if (!(f & (1ull << chaos_f[i].bit))) {
                die("device does not offer %s", chaos_f[i].name);
            }
            want |= 1ull << chaos_f[i].bit;
        }
    }
    if (opt.packed) {
        if (!(f & (1ull << F_RING_PACKED))) {
            die("device does not offer VIRTIO_F_RING_PACKED (QEMU needs the device "
                "property packed=on, which --ring packed adds)");
        }
        want |= 1ull << F_RING_PACKED;
    }
    ring_packed = opt.packed;
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
        uint64_t blocks = io_sectors / sectors_per_block();
        if (blocks > (64ull << 20)) {
            die("--verify: disk too large to track (%" PRIu64 " blocks)", blocks);
        }
        /* no two requests in flight on one block: leave room to pick */
        if (blocks < 2ull * opt.queues * opt.depth) {
            die("--verify: %" PRIu64 " blocks of %u bytes are too few for %u queues of "
                "depth %u (at least %u): use a larger disk or a smaller --depth", blocks,
                opt.bs, opt.queues, opt.depth, 2 * opt.queues * opt.depth);
        }
        blk_gen = calloc(blocks, sizeof(*blk_gen));
        blk_alt = malloc(blocks * sizeof(*blk_alt));
        blk_busy = calloc(blocks, 1);
        if (!blk_gen || !blk_alt || !blk_busy) {
            die("out of memory");
        }
        memset(blk_alt, 0xff, blocks * sizeof(*blk_alt));
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
