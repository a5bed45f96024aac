/*
 * The disk image of --chaos: a file filled with a pattern that depends
 * only on the sector and a seed, and the check that finds every sector
 * that changed where nothing was allowed to change.
 */
#ifndef VBLK_IMAGE_H
#define VBLK_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with the pattern of n sectors from sector, for this seed. */
void image_pattern(uint8_t *buf, uint64_t sector, unsigned n, uint64_t seed);

/* Create path with n sectors of the pattern of seed; dies on errors. */
void image_create(const char *path, uint64_t n, uint64_t seed);

/* A range of sectors a case may change. */
struct sector_range { uint64_t first, n; };

/* What the image may hold after a case. */
struct image_rules {
    uint64_t sectors;           /* its size, which must not change */
    uint64_t seed;              /* the pattern it was created with */
    uint64_t good_sectors;      /* [0, good_sectors): the good queue's I/O */
    uint64_t good_seed;         /* what the good queue writes there */
    const struct sector_range *mod;     /* what the case may change */
    unsigned nmod;
};

/* Check the image against the rules: every sector outside the good region
 * and mod[] must hold its original pattern; every sector of the good region
 * the original or the good queue's pattern; the size must be unchanged.
 * Returns the number of bad sectors (0: the image is as it must be) and
 * describes the first in why. */
uint64_t image_check(const char *path, const struct image_rules *r, char *why,
                     size_t len);

#endif
