/*
 * The --chaos disk image (image.h): a pattern per sector and seed, and the
 * check of what a case was not allowed to change.  It needs no QEMU, so
 * test-image.c can show that the check catches a changed byte.
 */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "vblk-load.h"

#define SECTOR 512
#define CHUNK 256       /* sectors read or written at a time */

void image_pattern(uint8_t *buf, uint64_t sector, unsigned n, uint64_t seed)
{
    for (unsigned off = 0; off < n * SECTOR; off += 8) {
        uint64_t v = (sector + off / SECTOR) * 0x9e3779b97f4a7c15ull ^ (off % SECTOR) ^ seed;
        memcpy(buf + off, &v, 8);
    }
}

#define GEN_MAGIC 0x564c4247u     /* "GBLV" */

static uint64_t gen_word(uint64_t sector, unsigned off, uint64_t seed, uint32_t gen)
{
    uint64_t v = (sector * 0x9e3779b97f4a7c15ull) ^ (gen * 0xc2b2ae3d27d4eb4full) ^ seed ^ off;
    v ^= v >> 29;
    v *= 0xbf58476d1ce4e5b9ull;
    return v ^ (v >> 32);
}

void image_gen_pattern(uint8_t *buf, uint64_t sector, unsigned n, uint64_t seed,
                       uint32_t gen)
{
    for (unsigned i = 0; i < n; i++, sector++) {
        uint8_t *p = buf + i * SECTOR;
        uint32_t head[2] = { gen, GEN_MAGIC };
        memcpy(p, head, 8);
        memcpy(p + 8, &sector, 8);
        for (unsigned off = 16; off < SECTOR; off += 8) {
            uint64_t v = gen_word(sector, off, seed, gen);
            memcpy(p + off, &v, 8);
        }
    }
}

uint32_t image_gen_of(const uint8_t *buf, uint64_t seed, uint64_t *sector)
{
    uint32_t head[2];
    uint8_t want[SECTOR];
    memcpy(head, buf, 8);
    memcpy(sector, buf + 8, 8);
    if (head[1] != GEN_MAGIC || head[0] == 0 || head[0] == GEN_NONE) {
        return 0;
    }
    image_gen_pattern(want, *sector, 1, seed, head[0]);
    return memcmp(want, buf, SECTOR) ? 0 : head[0];
}

void image_create(const char *path, uint64_t n, uint64_t seed)
{
    static uint8_t buf[CHUNK * SECTOR];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        die("cannot create %s: %s", path, strerror(errno));
    }
    for (uint64_t s = 0; s < n; s += CHUNK) {
        unsigned k = n - s < CHUNK ? n - s : CHUNK;
        image_pattern(buf, s, k, seed);
        if (pwrite(fd, buf, k * SECTOR, s * SECTOR) != (ssize_t)(k * SECTOR)) {
            die("cannot write %s: %s", path, strerror(errno));
        }
    }
    close(fd);
}

static bool in_mod(const struct image_rules *r, uint64_t s)
{
    for (unsigned i = 0; i < r->nmod; i++) {
        if (s >= r->mod[i].first && s - r->mod[i].first < r->mod[i].n) {
            return true;
        }
    }
    return false;
}

bool image_holds(const uint8_t *buf, uint64_t s, uint64_t orig_seed, uint64_t seed,
                 uint32_t gen)
{
    uint8_t want[SECTOR];
    if (gen == GEN_NONE) {
        return false;
    }
    if (gen == 0) {
        image_pattern(want, s, 1, orig_seed);
    } else {
        image_gen_pattern(want, s, 1, seed, gen);
    }
    return !memcmp(want, buf, SECTOR);
}

/* Does sector s of buf hold generation gen (0: the original data)? */
static bool holds_gen(const struct image_rules *r, uint64_t s, const uint8_t *buf,
                      uint32_t gen)
{
    return image_holds(buf, s, r->seed, r->good_seed, gen);
}

/* Is sector s of buf as the rules allow?  If not, why (in why). */
static bool sector_ok(const struct image_rules *r, uint64_t s, const uint8_t *buf,
                      char *why, size_t len)
{
    uint64_t named = 0;
    if (in_mod(r, s)) {
        return true;
    }
    if (s >= r->good_sectors) {
        if (holds_gen(r, s, buf, 0)) {
            return true;
        }
        snprintf(why, len, "sector %" PRIu64 " changed (no request of the case was "
                 "allowed to change it)", s);
        return false;
    }
    uint32_t found = image_gen_of(buf, r->good_seed, &named);
    if (!r->good_gen) {
        if (holds_gen(r, s, buf, 0) || (found && named == s)) {
            return true;
        }
        snprintf(why, len, "sector %" PRIu64 " changed (good queue's region, neither the "
                 "original nor the good queue's data)", s);
        return false;
    }
    uint64_t b = s / r->good_block;
    uint32_t g = r->good_gen[b], alt = r->good_alt ? r->good_alt[b] : GEN_NONE;
    if (holds_gen(r, s, buf, g) || holds_gen(r, s, buf, alt)) {
        return true;
    }
    char a[48] = "";
    if (alt != GEN_NONE) {
        snprintf(a, sizeof(a), " or %u", alt);
    }
    if (found && named == s) {
        snprintf(why, len, "sector %" PRIu64 " holds generation %u where the driver's "
                 "last completed write was generation %u%s (0: the original data): a "
                 "lost or stale write", s, found, g, a);
    } else if (found) {
        snprintf(why, len, "sector %" PRIu64 " holds generation %u of sector %" PRIu64
                 " (generation %u%s expected): a write that went to the wrong place",
                 s, found, named, g, a);
    } else if (holds_gen(r, s, buf, 0)) {
        snprintf(why, len, "sector %" PRIu64 " holds the original data where the "
                 "driver's last completed write was generation %u%s: a lost write", s,
                 g, a);
    } else {
        snprintf(why, len, "sector %" PRIu64 " holds data of no write of the driver "
                 "(generation %u%s expected)", s, g, a);
    }
    return false;
}

uint64_t image_check(const char *path, const struct image_rules *r, char *why, size_t len)
{
    static uint8_t buf[CHUNK * SECTOR];
    struct stat st;
    uint64_t bad = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(why, len, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return 1;
    }
    if ((uint64_t)st.st_size != r->sectors * SECTOR) {
        snprintf(why, len, "the image's size changed from %" PRIu64 " to %" PRIu64 " bytes",
                 r->sectors * SECTOR, (uint64_t)st.st_size);
        bad++;
    }
    for (uint64_t s = 0; s < r->sectors; s += CHUNK) {
        unsigned k = r->sectors - s < CHUNK ? r->sectors - s : CHUNK;
        if (pread(fd, buf, k * SECTOR, s * SECTOR) != (ssize_t)(k * SECTOR)) {
            snprintf(why, len, "short read of %s at sector %" PRIu64, path, s);
            bad++;
            break;
        }
        for (unsigned i = 0; i < k; i++) {
            char w[256];
            if (!sector_ok(r, s + i, buf + i * SECTOR, w, sizeof(w)) && !bad++) {
                snprintf(why, len, "%s", w);
            }
        }
    }
    close(fd);
    return bad;
}
