/*
 * virtio-pci 1.x initialisation of the block device and its split
 * virtqueues in guest RAM: every request is a fixed 3-descriptor chain
 * (header, data, status) in its own slot.  A queue belongs to one driver
 * thread at a time; its counters are its own, added up for the report.
 */
#ifndef VBLK_VIRTIO_H
#define VBLK_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

struct vdesc { uint64_t addr; uint32_t len; uint16_t flags; uint16_t next; };
struct vused_elem { uint32_t id; uint32_t len; };

struct slot {
    uint64_t hdr_gpa, buf_gpa, st_gpa;
    uint64_t submit_ns;
    uint64_t sector;
    bool inflight, write, check;
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
    uint16_t avail_idx, last_used;
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
/* The word the configuration-change MSI-X message (vector 0) writes. */
volatile uint32_t *virtio_config_msi(void);

/* Put a request into a free slot of q (not yet visible to the device). */
void submit_slot(struct vq *q, struct slot *s);
/* Publish the new avail index and kick if the device asks for it;
 * old = the avail index before the submissions. */
void kick_if_needed(struct vq *q, uint16_t old, bool count);
/* Reap completions into the free list; counted when count. Returns how many. */
unsigned reap(struct vq *q, bool count);
/* Resubmit the free slots (unless stopping), kick if needed. */
void refill(struct vq *q, bool stopping, bool count);
/* irq mode: ask for an interrupt at the next completion. */
void arm_irq(struct vq *q);
/* One look at a queue: take its interrupt, reap, re-arm, refill */
unsigned service_queue(struct vq *q, bool stopping, bool count);

#endif
