/*
 * smc-race: does a vCPU ever keep running code that another vCPU has
 * overwritten?  Run in the test guest, one thread on each of two vCPUs.
 *
 * The writer rewrites the 32-bit immediate of a tiny function
 * ("mov $imm, %eax; ret") a few times per round, with a delay between the
 * stores that changes from round to round; the executor calls the function
 * all the while, so that it is translated again after every store.  When the
 * writer has made its last store of the round it says so; the executor
 * serializes (cpuid, which x86 asks of a CPU that runs code another CPU
 * modified) and calls the function once more.  It must return the value in
 * memory.  A translation that read the code before a store and was linked
 * after it keeps returning the old value, round after round: the guest
 * equivalent of a Linux kernel looping on an int3 that text_poke_bp() has
 * already removed.
 *
 * Usage: smc-race [ROUNDS]   (default 20000).  Prints "@@SMC ok ..." or
 * "@@SMC stale ..." and exits 0 or 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define STORES 4

static unsigned char *code;
static volatile uint32_t *imm;
static _Atomic unsigned long phase;    /* 2r: writing round r; 2r+1: done */
static unsigned long rounds = 20000;

static void pin(int cpu)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof(s), &s)) {
        perror("@@SMC sched_setaffinity");
        exit(2);
    }
}

static void serialize(void)
{
    unsigned a = 0, b, c = 0, d;

    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

static void spin(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++) {
    }
}

static uint32_t value(unsigned long r, unsigned j)
{
    return (uint32_t)(r * STORES + j + 1);
}

static void *writer(void *arg)
{
    (void)arg;
    pin(0);
    for (unsigned long r = 1; r <= rounds; r++) {
        unsigned delay = (unsigned)(r % 97) * 20;

        while (atomic_load(&phase) != 2 * r) {
        }
        for (unsigned j = 0; j < STORES; j++) {
            *imm = value(r, j);
            spin(delay);
        }
        atomic_store(&phase, 2 * r + 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    uint32_t (*fn)(void);
    unsigned long late = 0;
    pthread_t t;

    if (argc > 1) {
        rounds = strtoul(argv[1], NULL, 0);
    }
    code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        perror("@@SMC mmap");
        return 2;
    }
    /* nop x3; mov $imm32, %eax; ret -- the immediate 4-byte aligned */
    memcpy(code, "\x90\x90\x90\xb8\0\0\0\0\xc3", 9);
    imm = (volatile uint32_t *)(code + 4);
    fn = (uint32_t (*)(void))code;

    pin(1);
    if (pthread_create(&t, NULL, writer, NULL)) {
        fprintf(stderr, "@@SMC pthread_create failed\n");
        return 2;
    }
    for (unsigned long r = 1; r <= rounds; r++) {
        uint32_t got, want = value(r, STORES - 1);
        unsigned long n;

        atomic_store(&phase, 2 * r);
        while (atomic_load(&phase) != 2 * r + 1) {
            fn();
        }
        serialize();
        got = fn();
        if (got == want) {
            continue;
        }
        /* Stale.  Does it ever go away? */
        for (n = 1; n < 100000 && fn() != *imm; n++) {
            serialize();
        }
        if (n < 100000) {
            late++;
            continue;
        }
        printf("@@SMC stale round %lu of %lu: the code returns %u, memory "
               "holds %u (delay %u), still after %lu calls\n",
               r, rounds, got, *imm, (unsigned)(r % 97) * 20, n);
        fflush(stdout);
        return 1;
    }
    pthread_join(t, NULL);
    if (late) {
        printf("@@SMC stale %lu of %lu rounds: the first call after the "
               "writer's last store ran the old code\n", late, rounds);
        return 1;
    }
    printf("@@SMC ok %lu rounds\n", rounds);
    return 0;
}
