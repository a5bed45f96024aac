/*
 * make check: the image check of --chaos (image.c) must catch what it is
 * there to catch.  A byte flipped where no request went, garbage in the
 * good queue's region and a changed size must each be found; the good
 * queue's own data and a change inside a case's range must not be.  With
 * the good queue's generations known, a block must hold exactly its last
 * write: an older generation (a lost or stale write), the original data
 * where a write completed, or another sector's data is caught; the
 * alternative of a write given up is allowed.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "vblk-load.h"

#define SECTORS 1024
#define SEED 0x1234
#define GOOD_SEED 7

static const struct sector_range mod[] = { { 600, 8 } };
static struct image_rules rules = {
    .sectors = SECTORS, .seed = SEED, .good_sectors = 256, .good_seed = GOOD_SEED,
    .mod = mod, .nmod = 1,
};
static char path[] = "/tmp/test-image-XXXXXX";
static int failed;

/* Write len bytes at byte offset off of the image. */
static void put(uint64_t off, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, buf, len, off) != (ssize_t)len) {
        die("cannot write %s\n", path);
    }
    close(fd);
}

static void grow(void)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0 || ftruncate(fd, (SECTORS + 1) * 512) < 0) {
        die("cannot grow %s\n", path);
    }
    close(fd);
}

/* Fresh image, then one change (bytes at off, or a grown file); the check
 * must find bad sectors or not. */
static void expect(const char *what, bool want_bad, uint64_t off, const void *buf,
                   size_t len)
{
    char why[256] = "";
    image_create(path, SECTORS, SEED);
    if (buf) {
        put(off, buf, len);
    } else {
        grow();
    }
    uint64_t bad = image_check(path, &rules, why, sizeof(why));
    bool ok = (bad != 0) == want_bad;
    printf("%s %s: %lu bad sectors%s%s\n", ok ? "ok  " : "FAIL", what, (unsigned long)bad,
           bad ? ", " : "", why);
    failed |= !ok;
}

/* Fresh image, then n sectors of buf at sector s; the check must find bad
 * sectors or not, and say why (a fragment) when it does. */
static void expect_gen(const char *what, bool want_bad, const uint8_t *buf, uint64_t s,
                       unsigned n, const char *why_part)
{
    char why[320] = "";
    uint8_t last[8 * 512];
    image_create(path, SECTORS, SEED);
    image_gen_pattern(last, 8, 8, GOOD_SEED, 5);        /* block 1 as written */
    put(8 * 512, last, sizeof(last));
    image_gen_pattern(last, 16, 8, GOOD_SEED, 7);       /* block 2 as written */
    put(16 * 512, last, sizeof(last));
    put(s * 512, buf, n * 512);
    uint64_t bad = image_check(path, &rules, why, sizeof(why));
    bool ok = (bad != 0) == want_bad && (!why_part || strstr(why, why_part));
    printf("%s %s: %lu bad sectors%s%s\n", ok ? "ok  " : "FAIL", what, (unsigned long)bad,
           bad ? ", " : "", why);
    failed |= !ok;
}

int main(void)
{
    uint8_t orig[512], good[512], flip;
    char why[256] = "";
    int fd = mkstemp(path);
    if (fd < 0) {
        die("mkstemp\n");
    }
    close(fd);
    image_create(path, SECTORS, SEED);
    bool ok = image_check(path, &rules, why, sizeof(why)) == 0;
    printf("%s a fresh image passes %s\n", ok ? "ok  " : "FAIL", why);
    failed |= !ok;
    image_pattern(orig, 900, 1, SEED);
    flip = orig[100] ^ 1;
    expect("a flipped byte where no request went is caught", true, 900 * 512 + 100, &flip, 1);
    expect("a flipped byte in the last sector is caught", true, SECTORS * 512 - 1, &flip, 1);
    expect("a flipped byte in a case's range is allowed", false, 603 * 512 + 7, &flip, 1);
    expect("a flipped byte in the good queue's region is caught", true, 10 * 512 + 3, &flip, 1);
    image_gen_pattern(good, 10, 1, GOOD_SEED, 3);
    expect("the good queue's data in its region is allowed", false, 10 * 512, good, 512);
    image_gen_pattern(good, 300, 1, GOOD_SEED, 3);
    expect("the good queue's data outside its region is caught", true, 300 * 512, good, 512);
    expect("a grown image is caught", true, 0, NULL, 0);

    /* generations: 8-sector blocks; block 1 was written as generation 5,
     * block 2 as 7 with 9 given up, the others never */
    static uint32_t gen[256 / 8], alt[256 / 8];
    memset(alt, 0xff, sizeof(alt));
    gen[1] = 5;
    gen[2] = 7;
    alt[2] = 9;
    rules.good_gen = gen;
    rules.good_alt = alt;
    rules.good_block = 8;
    uint8_t blk[8 * 512];
    image_gen_pattern(blk, 8, 8, GOOD_SEED, 5);
    expect_gen("block 1 at its last generation passes", false, blk, 8, 8, NULL);
    image_gen_pattern(blk, 8, 8, GOOD_SEED, 4);
    expect_gen("block 1 at an older generation is caught", true, blk, 8, 8,
               "lost or stale write");
    image_pattern(blk, 8, 8, SEED);
    expect_gen("block 1 with its original data is caught", true, blk, 8, 8, "lost write");
    image_gen_pattern(blk, 16, 8, GOOD_SEED, 5);
    expect_gen("block 1 with the data of another sector is caught", true, blk, 8, 8,
               "wrong place");
    image_gen_pattern(blk, 16, 8, GOOD_SEED, 9);
    expect_gen("block 2 at the generation given up passes", false, blk, 16, 8, NULL);
    image_gen_pattern(blk, 16, 8, GOOD_SEED, 8);
    expect_gen("block 2 at a third generation is caught", true, blk, 16, 8, "stale");
    image_gen_pattern(blk, 24, 8, GOOD_SEED, 1);
    expect_gen("a never-written block with a generation is caught", true, blk, 24, 8,
               "generation 0");
    uint64_t named;
    image_gen_pattern(blk, 8, 1, GOOD_SEED, 5);
    blk[100] ^= 1;
    bool ok2 = image_gen_of(blk, GOOD_SEED, &named) == 0;
    printf("%s a damaged generation pattern is no generation\n", ok2 ? "ok  " : "FAIL");
    failed |= !ok2;
    unlink(path);
    printf("%s\n", failed ? "test-image: FAILED" : "test-image: all passed");
    return failed;
}
