/*
 * --chaos: vblk-load as a broken or malicious guest on one queue while
 * another does checked I/O (chaos.c, docs/vblk-load.md).
 */
#ifndef VBLK_CHAOS_H
#define VBLK_CHAOS_H

/* Run the case opt.chaos in a fresh QEMU ("list" and "selftests" print the
 * cases); returns the exit status (dies on a failed check). */
int chaos_main(void);

#endif
