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

/* Is sector s of buf as the rules allow? */
static bool sector_ok(const struct image_rules *r, uint64_t s, const uint8_t *buf)
{
    uint8_t want[SECTOR];
    if (in_mod(r, s)) {
        return true;
    }
    image_pattern(want, s, 1, r->seed);
    if (!memcmp(want, buf, SECTOR)) {
        return true;
    }
    if (s < r->good_sectors) {
        image_pattern(want, s, 1, r->good_seed);
        return !memcmp(want, buf, SECTOR);
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
            if (!sector_ok(r, s + i, buf + i * SECTOR) && !bad++) {
                snprintf(why, len, "sector %" PRIu64 " changed (%s)", s + i,
                         s + i < r->good_sectors ? "good queue's region, neither the "
                         "original nor the good queue's data" : "no request of the case "
                         "was allowed to change it");
            }
        }
    }
    close(fd);
    return bad;
}
