/*
 * What the unit checks (test-qmp, test-image) link instead of main.c: the
 * options with a short timeout, the signal flag, and die().
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "vblk-load.h"

struct options opt = { .timeout = 1 };
volatile sig_atomic_t got_signal;

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    exit(1);
}
