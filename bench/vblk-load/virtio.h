/*
 * virtio-pci 1.x initialisation of the block device and its virtqueues in
 * guest RAM, split (default) or packed (--ring packed): every request is a
 * 3-descriptor chain (header, data, status) of its own slot; in a split
 * ring at fixed places of the descriptor table, in a packed ring wherever
 * the ring has got to.  A queue belongs to one driver thread at a time;
 * its counters are its own, added up for the report.
 */
#ifndef VBLK_VIRTIO_H
#define VBLK_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

struct vdesc { uint64_t addr; uint32_t len; uint16_t flags; uint16_t next; };
struct vused_elem { uint32_t id; uint32_t len; };
/* a packed ring's descriptor */
struct pdesc { uint64_t addr; uint32_t len; uint16_t id; uint16_t flags; };
#define VRING_DESC_F_NEXT     1
#define VRING_DESC_F_WRITE    2
#define VRING_DESC_F_INDIRECT 4
#define VRING_PACKED_F_AVAIL  (1u << 7)
#define VRING_PACKED_F_USED   (1u << 15)
/* event suppression structure flags of a packed ring */
#define PACKED_EVENT_ENABLE  0
#define PACKED_EVENT_DISABLE 1
#define PACKED_EVENT_DESC    2

struct slot {
    uint64_t hdr_gpa, buf_gpa, st_gpa;
    uint64_t submit_ns;
    uint64_t sector;
    bool inflight, write, check;
    /* --verify: a write's generation; what a read must find */
    uint32_t gen, alt;
};

/* What one queue's driver saw. */
struct vq_counts {
    /* in the measured window (after --ramp, before the drain) */
    uint64_t done, reads, writes, kicks, notifs;
    /* over the whole run, ramp and drain included */
    uint64_t all, notifs_all, verified;
};

struct vq {
    unsigned idx, size;
    struct vdesc *desc;
    uint16_t *avail;              /* flags, idx, ring[size], used_event */
    volatile uint16_t *used_hdr;  /* flags, idx */
    struct vused_elem *used_ring;
    volatile uint16_t *avail_event;
    /* packed: the same memory as desc; the driver's event suppression
     * structure (off_wrap, flags) where the split ring's avail ring is, and
     * the device's where its used ring is */
    struct pdesc *pdesc;
    volatile uint16_t *drv_evt, *dev_evt;
    /* split: the avail index and the used entries reaped; packed: the
     * descriptors made available and those seen used, free-running (the
     * ring position is the count modulo the size, the wrap counter 1 on
     * even laps) */
    uint16_t avail_idx, last_used;
    int64_t force_read;           /* --verify self-test: read this block next */
    uint64_t notify_addr;
    int kick_fd;                  /* --kick eventfd: the queue's ioeventfd */
    bool has_kick_fd;
    volatile uint32_t *msi_word;
    struct slot *slots;
    uint64_t seq_next, rng;
    bool irq_pending;
    unsigned inflight;
    unsigned *free, nfree;
    struct vq_counts n;
    uint64_t *hist;               /* latency, measured window (stats.h) */
};

extern struct vq *vqs;
extern uint64_t capacity_sectors;
/* --ring packed: VIRTIO_F_RING_PACKED negotiated */
extern bool ring_packed;

/* Guest RAM this configuration needs, in bytes. */
uint64_t virtio_ram_needed(void);
/* Find and set up the device: PCI, features, MSI-X, queues, DRIVER_OK. */
void virtio_init(void);
/* Reset the device (status 0) and wait until it reads back 0. */
void virtio_reset(void);
/* Kick q and reset the device in one go (the reset is sent before QEMU
 * answers the kick), then wait until the reset reads back 0. */
void virtio_reset_after_kick(struct vq *q);
/* After a reset: negotiate again and give the same queues to the device,
 * their rings and slots emptied. */
void virtio_reinit(void);
/* The device status register. */
uint8_t virtio_status(void);
/* Before virtio_init: requests go to n sectors from first (default: all). */
void virtio_io_range(uint64_t first, uint64_t n);
/* The notify address of queue i (selects it). */
uint64_t virtio_notify_addr(unsigned i);
/* Write queue_enable of queue i (selects it). */
void virtio_queue_enable(unsigned i, uint16_t v);
/* A 32-bit field of the device configuration (struct virtio_blk_config). */
uint32_t virtio_devcfg_readl(unsigned off);
/* The word the configuration-change MSI-X message (vector 0) writes. */
volatile uint32_t *virtio_config_msi(void);

/* --verify: the disk's data before this run is the pattern of image.h for
 * seed, so that reads of blocks this run has not written are checked too. */
void virtio_verify_original(uint64_t seed);
/* --verify: what each block of the I/O range must hold now (image.h's
 * rules: generation, alternative), and its size in sectors. */
void virtio_verify_state(const uint32_t **gen, const uint32_t **alt, unsigned *block);
/* --verify: the device was reset or broken with q's requests in flight:
 * forget them; a write among them may or may not have reached the disk. */
void virtio_abandon(struct vq *q);
/* --verify self-test: q's next request is a read of block blk. */
void virtio_verify_read_next(struct vq *q, uint64_t blk);

/* Put a request into a free slot of q (not yet visible to the device). */
void submit_slot(struct vq *q, struct slot *s);
/* Publish the new avail index and kick if the device asks for it;
 * old = the avail index before the submissions. */
void kick_if_needed(struct vq *q, uint16_t old, bool count);
/* Has the device completed a request of q that is not reaped yet? */
bool used_pending(struct vq *q);
/* Reap completions into the free list; counted when count. Returns how many. */
unsigned reap(struct vq *q, bool count);
/* Resubmit the free slots (unless stopping), kick if needed. */
void refill(struct vq *q, bool stopping, bool count);
/* irq mode: ask for an interrupt at the next completion. */
void arm_irq(struct vq *q);
/* One look at a queue: take its interrupt, reap, re-arm, refill */
unsigned service_queue(struct vq *q, bool stopping, bool count);

#endif
