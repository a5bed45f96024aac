/*
 * The disk image of --chaos: a file filled with a pattern that depends
 * only on the sector and a seed, and the check that finds every sector
 * that changed where nothing was allowed to change.  Also the pattern of
 * the driver's verified writes (--verify), which carries a generation
 * number per write, so that a lost or stale overwrite reads back as the
 * wrong generation.
 */
#ifndef VBLK_IMAGE_H
#define VBLK_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fill buf with the pattern of n sectors from sector, for this seed. */
void image_pattern(uint8_t *buf, uint64_t sector, unsigned n, uint64_t seed);

/* Fill buf with what write number gen (>= 1) of the driver puts in n
 * sectors from sector, for this seed.  Each sector starts with the
 * generation, a magic word and the sector number, then a pattern of all
 * three and the seed. */
void image_gen_pattern(uint8_t *buf, uint64_t sector, unsigned n, uint64_t seed,
                       uint32_t gen);
/* The generation whose pattern (for seed) one 512-byte sector at buf
 * holds, if it holds one; 0 if it holds no such pattern (or the original
 * data).  Sets *sector to the sector number it names. */
uint32_t image_gen_of(const uint8_t *buf, uint64_t seed, uint64_t *sector);
/* Does the 512-byte sector s at buf hold generation gen of seed (0: the
 * original pattern of orig_seed; GEN_NONE: never)? */
bool image_holds(const uint8_t *buf, uint64_t s, uint64_t orig_seed, uint64_t seed,
                 uint32_t gen);
/* No generation: an alternative that is not there. */
#define GEN_NONE 0xffffffffu

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
    /* If good_gen is set: block b (good_block sectors from sector
     * b * good_block) must hold generation good_gen[b] exactly (0: the
     * original data), or good_alt[b] if that is not GEN_NONE (a write
     * whose completion the driver never saw).  If not set: any sector of
     * the good region may hold the original or any generation. */
    const uint32_t *good_gen, *good_alt;
    unsigned good_block;
    const struct sector_range *mod;     /* what the case may change */
    unsigned nmod;
};

/* Check the image against the rules: every sector outside the good region
 * and mod[] must hold its original pattern; every sector of the good region
 * what the rules say it must hold; the size must be unchanged.
 * Returns the number of bad sectors (0: the image is as it must be) and
 * describes the first in why. */
uint64_t image_check(const char *path, const struct image_rules *r, char *why,
                     size_t len);

#endif
