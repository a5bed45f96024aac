/*
 * vblk-load: options, the run, and the report (text or --json).
 * See vblk-load.h for the parts and docs/vblk-load.md for what it does.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos.h"
#include "driver.h"
#include "evkick.h"
#include "pci.h"
#include "qemu.h"
#include "qmp.h"
#include "qtest.h"
#include "stats.h"
#include "vblk-load.h"
#include "virtio.h"

const char *const rw_names[] = { "read", "write", "randread", "randwrite", "randrw" };

struct options opt = {
    .qemu = "qemu-system-x86_64",
    .queues = 1, .depth = 32, .bs = 4096, .rw = RW_RANDREAD, .rwmix_read = 50,
    .duration = 5, .event_idx = true, .iothread = true, .irq = false,
    .blockdev = "driver=null-co,node-name=disk0,read-zeroes=on",
    .timeout = 10, .seed = 1, .poll_max_ns = -1, .qtest_log = "none",
};

volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

/* ---- option parsing ---- */
static void usage(FILE *f)
{
    fprintf(f,
"usage: vblk-load [options]\n"
"Drive one virtio-blk-pci device of QEMU (qtest accelerator, no guest CPU).\n"
"  --qemu PATH          qemu-system-x86_64 binary (default: from PATH)\n"
"  --queues N           virtqueues (1..64, default 1)\n"
"  --threads            one driver thread per queue (default: one thread\n"
"                       drives all queues)\n"
"  --kick sync|async|eventfd  wait for QEMU to take each kick (sync, default),\n"
"                       pipeline kicks and read QEMU's answers later (async),\n"
"                       or write each queue's ioeventfd, taken from QEMU with\n"
"                       pidfd_getfd, as KVM does: no main loop (eventfd)\n"
"  --depth N            requests in flight per queue (1..341, default 32)\n"
"  --bs BYTES           block size, multiple of 512 (default 4096)\n"
"  --rw MODE            read|write|randread|randwrite|randrw (default randread)\n"
"  --rwmixread PCT      reads in randrw, percent (default 50)\n"
"  --duration SECONDS   measured run time (default 5)\n"
"  --ramp SECONDS       run this long before measuring (default 0)\n"
"  --event-idx on|off   negotiate VIRTIO_RING_F_EVENT_IDX (default on)\n"
"  --iothread on|off    put the device on an IOThread (default on)\n"
"  --iothreads N        spread the device's queues over N IOThreads (2..16)\n"
"                       with iothread-vq-mapping (QEMU 9.0 and later)\n"
"  --pin                a CPU of its own for each IOThread (the highest allowed\n"
"                       CPUs), the other allowed CPUs for every other thread\n"
"  --poll-max-ns N      the IOThread's poll-max-ns (default: QEMU's)\n"
"  --ring split|packed  virtqueue layout (default split; packed negotiates\n"
"                       VIRTIO_F_RING_PACKED and sets the device's packed=on)\n"
"  --mode poll|irq      completions by polling the used ring, or by\n"
"                       waiting for the MSI-X message (default poll)\n"
"  --blockdev STRING    -blockdev option (default %s);\n"
"                       node-name=disk0 is added if none is given\n"
"  --device-opts STRING extra virtio-blk-pci properties, comma-separated,\n"
"                       e.g. seg-max-adjust=off\n"
"  --queue-size N       virtqueue size (default: 256, or larger if depth needs it)\n"
"  --verify             check data read back against what this run wrote\n"
"                       (needs a real backend, e.g. a file; not null-co)\n"
"  --spin               busy-wait for completions without ever yielding the CPU\n"
"                       (default: yield after a short spin, as an idle vCPU\n"
"                       would halt; spinning starves QEMU on a small machine)\n"
"  --strace             count QEMU's syscalls per request with strace -f -c\n"
"                       (slows QEMU down a lot; its IOPS are not comparable)\n"
"  --seed N             random seed (default 1)\n"
"  --qtest-log FILE     QEMU's -qtest-log (default none: no log; before\n"
"                       2026-12-03 /dev/null, which made QEMU's main loop\n"
"                       format a log line per kick)\n"
"  --timeout SECONDS    give up when QEMU or the device is silent this long (default 10)\n"
"  --json               machine-readable output\n"
"  --chaos CASE         be a hostile guest on queue 1 while queue 0 does checked\n"
"                       I/O, in a fresh QEMU on a disk image of its own; assert\n"
"                       what QEMU must do (--chaos list: the cases).  Only\n"
"                       --qemu, --iothread, --mode, --event-idx, --ring, --aio,\n"
"                       --timeout and --seed apply.  Exit status 3: QEMU died,\n"
"                       4: QEMU stopped answering\n"
"  --aio threads|native|io_uring  the --chaos disk's aio mode (default threads;\n"
"                       native opens it with O_DIRECT)\n"
"  -h, --help           this help\n",
        opt.blockdev);
}

static void bad_opt(const char *name, const char *val, const char *why)
{
    fprintf(stderr, "vblk-load: invalid %s '%s': %s\n", name, val, why);
    fprintf(stderr, "Try 'vblk-load --help'.\n");
    exit(2);
}

static unsigned long parse_uint(const char *name, const char *v, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    if (!*v || !isdigit((unsigned char)*v)) {
        bad_opt(name, v, "not a number");
    }
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || *end) {
        bad_opt(name, v, "not a number");
    }
    if (x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof(why), "must be in %lu..%lu", lo, hi);
        bad_opt(name, v, why);
    }
    return x;
}

static double parse_double(const char *name, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || errno || *end || !(x >= lo && x <= hi)) {
        char why[96];
        snprintf(why, sizeof(why), "must be a number in %g..%g", lo, hi);
        bad_opt(name, v, why);
    }
    return x;
}

static bool parse_onoff(const char *name, const char *v)
{
    if (!strcmp(v, "on")) {
        return true;
    }
    if (!strcmp(v, "off")) {
        return false;
    }
    bad_opt(name, v, "expected on or off");
    return false;
}

unsigned iothread_count(void)
{
    return opt.iothread ? (opt.iothreads ? opt.iothreads : 1) : 0;
}

const char *iothread_label(void)
{
    static char s[16];
    if (!opt.iothread) {
        return "off";
    }
    if (!opt.iothreads) {
        return "on";
    }
    snprintf(s, sizeof(s), "x%u", opt.iothreads);
    return s;
}

static void parse_args(int argc, char **argv)
{
    enum { O_QEMU = 256, O_QUEUES, O_DEPTH, O_BS, O_RW, O_MIX, O_DUR, O_EVIDX, O_IOT,
           O_MODE, O_BDEV, O_JSON, O_VERIFY, O_TIMEOUT, O_QSIZE, O_DEVOPTS, O_SEED, O_RAMP,
           O_STRACE, O_POLLMAX, O_SPIN, O_THREADS, O_KICK, O_CHAOS, O_QTESTLOG, O_RING,
           O_AIO, O_IOTS, O_PIN };
    static const struct option lo[] = {
        { "qemu", 1, 0, O_QEMU }, { "queues", 1, 0, O_QUEUES }, { "depth", 1, 0, O_DEPTH },
        { "bs", 1, 0, O_BS }, { "rw", 1, 0, O_RW }, { "rwmixread", 1, 0, O_MIX },
        { "duration", 1, 0, O_DUR }, { "event-idx", 1, 0, O_EVIDX },
        { "iothread", 1, 0, O_IOT }, { "mode", 1, 0, O_MODE }, { "blockdev", 1, 0, O_BDEV },
        { "json", 0, 0, O_JSON }, { "verify", 0, 0, O_VERIFY }, { "timeout", 1, 0, O_TIMEOUT },
        { "queue-size", 1, 0, O_QSIZE }, { "device-opts", 1, 0, O_DEVOPTS },
        { "seed", 1, 0, O_SEED }, { "ramp", 1, 0, O_RAMP }, { "strace", 0, 0, O_STRACE },
        { "poll-max-ns", 1, 0, O_POLLMAX }, { "spin", 0, 0, O_SPIN },
        { "qtest-log", 1, 0, O_QTESTLOG },
        { "threads", 0, 0, O_THREADS }, { "kick", 1, 0, O_KICK }, { "chaos", 1, 0, O_CHAOS },
        { "ring", 1, 0, O_RING }, { "aio", 1, 0, O_AIO }, { "iothreads", 1, 0, O_IOTS },
        { "pin", 0, 0, O_PIN },
        { "help", 0, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_QEMU: opt.qemu = optarg; break;
        case O_QUEUES: opt.queues = parse_uint("--queues", optarg, 1, 64); break;
        case O_DEPTH: opt.depth = parse_uint("--depth", optarg, 1, 341); break;
        case O_BS:
            opt.bs = parse_uint("--bs", optarg, 512, 1u << 20);
            if (opt.bs % 512) {
                bad_opt("--bs", optarg, "must be a multiple of 512");
            }
            break;
        case O_RW: {
            unsigned i;
            for (i = 0; i < 5 && strcmp(optarg, rw_names[i]); i++) {
            }
            if (i == 5) {
                bad_opt("--rw", optarg, "expected read, write, randread, randwrite or randrw");
            }
            opt.rw = i;
            break;
        }
        case O_MIX: opt.rwmix_read = parse_uint("--rwmixread", optarg, 0, 100); break;
        case O_DUR: opt.duration = parse_double("--duration", optarg, 0.01, 86400); break;
        case O_RAMP: opt.ramp = parse_double("--ramp", optarg, 0, 3600); break;
        case O_EVIDX: opt.event_idx = parse_onoff("--event-idx", optarg); break;
        case O_IOT: opt.iothread = parse_onoff("--iothread", optarg); break;
        case O_IOTS: opt.iothreads = parse_uint("--iothreads", optarg, 2, 16); break;
        case O_PIN: opt.pin = true; break;
        case O_RING:
            if (!strcmp(optarg, "split") || !strcmp(optarg, "packed")) {
                opt.packed = !strcmp(optarg, "packed");
            } else {
                bad_opt("--ring", optarg, "expected split or packed");
            }
            break;
        case O_AIO:
            if (strcmp(optarg, "threads") && strcmp(optarg, "native") &&
                strcmp(optarg, "io_uring")) {
                bad_opt("--aio", optarg, "expected threads, native or io_uring");
            }
            opt.aio = optarg;
            break;
        case O_MODE:
            if (!strcmp(optarg, "poll")) {
                opt.irq = false;
            } else if (!strcmp(optarg, "irq")) {
                opt.irq = true;
            } else {
                bad_opt("--mode", optarg, "expected poll or irq");
            }
            break;
        case O_BDEV:
            if (!*optarg) {
                bad_opt("--blockdev", optarg, "must not be empty");
            }
            opt.blockdev = optarg;
            break;
        case O_JSON: opt.json = true; break;
        case O_VERIFY: opt.verify = true; break;
        case O_STRACE: opt.strace = true; break;
        case O_SPIN: opt.spin = true; break;
        case O_THREADS: opt.threads = true; break;
        case O_KICK:
            if (!strcmp(optarg, "sync")) {
                opt.kick_async = false;
            } else if (!strcmp(optarg, "async")) {
                opt.kick_async = true;
            } else if (!strcmp(optarg, "eventfd")) {
                opt.kick_eventfd = true;
            } else {
                bad_opt("--kick", optarg, "expected sync, async or eventfd");
            }
            break;
        case O_QTESTLOG: opt.qtest_log = optarg; break;
        case O_POLLMAX: opt.poll_max_ns = parse_uint("--poll-max-ns", optarg, 0, 1000000000); break;
        case O_TIMEOUT: opt.timeout = parse_double("--timeout", optarg, 0.1, 3600); break;
        case O_QSIZE:
            opt.queue_size = parse_uint("--queue-size", optarg, 4, 1024);
            if (opt.queue_size & (opt.queue_size - 1)) {
                bad_opt("--queue-size", optarg, "must be a power of two");
            }
            break;
        case O_DEVOPTS:
            if (!*optarg || *optarg == ',' || strchr(optarg, ' ')) {
                bad_opt("--device-opts", optarg,
                        "expected comma-separated properties, e.g. event_idx=on,x-foo=1");
            }
            opt.extra_dev = optarg;
            break;
        case O_SEED: opt.seed = parse_uint("--seed", optarg, 0, ~0ul); break;
        case O_CHAOS: opt.chaos = optarg; break;
        case 'h': usage(stdout); exit(0);
        case ':':
            fprintf(stderr, "vblk-load: option '%s' needs an argument\n", argv[optind - 1]);
            exit(2);
        default:
            fprintf(stderr, "vblk-load: unknown option '%s'\nTry 'vblk-load --help'.\n",
                    argv[optind - 1]);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vblk-load: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    if (opt.aio && !opt.chaos) {
        fprintf(stderr, "vblk-load: --aio applies to --chaos only; give the mode in "
                "--blockdev (e.g. aio=native,cache.direct=on)\n");
        exit(2);
    }
    if (opt.iothreads && !opt.iothread) {
        fprintf(stderr, "vblk-load: --iothreads needs --iothread on\n");
        exit(2);
    }
    if (opt.pin && (!opt.iothread || opt.chaos)) {
        fprintf(stderr, "vblk-load: --pin needs --iothread on, and is for load runs, "
                "not --chaos\n");
        exit(2);
    }
    if (!opt.iothread && opt.poll_max_ns >= 0) {
        fprintf(stderr, "vblk-load: --poll-max-ns needs --iothread on\n");
        exit(2);
    }
    unsigned need = 3 * opt.depth;
    if (!opt.queue_size) {
        opt.queue_size = 256;
        while (opt.queue_size < need) {
            opt.queue_size *= 2;
        }
    } else if (opt.queue_size < need) {
        fprintf(stderr, "vblk-load: --queue-size %u is too small for --depth %u "
                "(3 descriptors per request)\n", opt.queue_size, opt.depth);
        exit(2);
    }
}

/* ---- the report ---- */
static const char *json_str(const char *s, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 7 < n; s++) {
        if (*s == '"' || *s == '\\') {
            out[o++] = '\\';
            out[o++] = *s;
        } else if ((unsigned char)*s < 0x20) {
            o += snprintf(out + o, n - o, "\\u%04x", *s);
        } else {
            out[o++] = *s;
        }
    }
    out[o] = 0;
    return out;
}

static double per(uint64_t a, uint64_t b)
{
    return b ? (double)a / b : 0;
}

static void json_batches(const uint64_t *b)
{
    printf("[");
    for (unsigned k = 0; k < QSTAT_BUCKETS; k++) {
        printf("%s%" PRIu64, k ? ", " : "", b[k]);
    }
    printf("]");
}

/* What must agree between QEMU's counters and the driver, over the whole
 * run (so that no request is in flight at either end): completions ==
 * requests reaped, queue by queue; notifications sent >= MSI-X messages
 * seen (two messages between two looks at the word count as one). */
static int check_qstats(const struct qstats *run, char problems[][160], int max)
{
    int n = 0;
    if (run->nq < opt.queues) {
        snprintf(problems[n++], 160, "QEMU reports %u queues, the driver used %u",
                 run->nq, opt.queues);
        return n;
    }
    for (unsigned i = 0; i < opt.queues && n < max; i++) {
        const struct qstat *s = &run->q[i];
        const struct vq_counts *c = &vqs[i].n;
        if (s->completions != c->all) {
            snprintf(problems[n++], 160, "queue %u: QEMU completed %" PRIu64
                     ", the driver reaped %" PRIu64, i, s->completions, c->all);
        }
        if (n < max && s->notifications < c->notifs_all) {
            snprintf(problems[n++], 160, "queue %u: QEMU sent %" PRIu64
                     " notifications, the driver saw %" PRIu64 " messages", i,
                     s->notifications, c->notifs_all);
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (opt.chaos && opt.kick_eventfd) {
        fprintf(stderr, "vblk-load: --kick eventfd is for load runs, not --chaos\n");
        return 2;
    }
    if (opt.chaos) {
        return chaos_main();
    }

    uint64_t ram_size = virtio_ram_needed();
    if (ram_size > (2ull << 30)) {
        fprintf(stderr, "vblk-load: needs %" PRIu64 " MiB of guest RAM; at most 2048 "
                "(reduce --queues, --depth or --bs)\n", ram_size >> 20);
        return 2;
    }
    if (opt.pin) {
        pin_prepare();
    }
    ram_create(ram_size);
    struct qemu_conn conn;
    qemu_start(&conn);
    qtest_attach(conn.qtest_fd);
    /* QEMU has opened the RAM file once it answers a command */
    cfg_rl(0);
    ram_unlink();
    qmp_attach(conn.qmp_fd);
    if (opt.pin) {
        pin_iothreads();
    }

    virtio_init();
    if (opt.kick_eventfd) {
        evkick_attach(qemu_pid);
    }
    struct qtest_counts setup;
    qtest_counts(&setup);
    win.have_qstats = qmp_queue_stats(VBLK_QOM_PATH, &win.run0);

    if (opt.strace) {
        strace_start(qemu_pid);
    }
    drive();
    if (opt.strace) {
        strace_stop();
    }
    if (win.have_qstats) {
        qmp_queue_stats(VBLK_QOM_PATH, &win.run1);
    }
    group_threads();

    /* reset the device before stopping QEMU */
    virtio_reset();

    /* add up the queues */
    struct vq_counts n = { 0 };
    static uint64_t hist[HIST_N];
    for (unsigned i = 0; i < opt.queues; i++) {
        const struct vq_counts *c = &vqs[i].n;
        n.done += c->done;
        n.reads += c->reads;
        n.writes += c->writes;
        n.kicks += c->kicks;
        n.notifs += c->notifs;
        n.all += c->all;
        n.notifs_all += c->notifs_all;
        n.verified += c->verified;
        for (unsigned h = 0; h < HIST_N; h++) {
            hist[h] += vqs[i].hist[h];
        }
    }
    double elapsed = win.elapsed;
    double iops = n.done / elapsed;
    double p50 = hist_pct(hist, n.done, 50), p99 = hist_pct(hist, n.done, 99);
    double p999 = hist_pct(hist, n.done, 99.9);
    double lat_sum = 0;
    for (unsigned i = 0; i < HIST_N; i++) {
        lat_sum += hist[i] * hist_val(i);
    }
    double lat_avg = n.done ? lat_sum / n.done : 0;
    struct rusage *r0 = &win.ru0, *r1 = &win.ru1;
    double own_cpu = (r1->ru_utime.tv_sec - r0->ru_utime.tv_sec) +
                     (r1->ru_stime.tv_sec - r0->ru_stime.tv_sec) +
                     ((r1->ru_utime.tv_usec - r0->ru_utime.tv_usec) +
                      (r1->ru_stime.tv_usec - r0->ru_stime.tv_usec)) * 1e-6;
    /*
     * The main loop's per-request work here is the harness's: it takes the
     * qtest kicks (and writes the ioeventfd) and reads the guest notifier
     * eventfds (and writes the MSI-X message).  On a KVM host the kernel
     * does both (ioeventfd, irqfd), so it is reported apart.
     */
    double qemu_cpu = 0, harness_cpu = 0;
    for (int g = 0; g < ngroups; g++) {
        qemu_cpu += groups[g].cpu;
        if (!strcmp(groups[g].name, "main")) {
            harness_cpu += groups[g].cpu;
        }
    }
    double us = n.done ? 1e6 / n.done : 0;   /* seconds -> us per request */
    /* the qtest channel in the window: kicks are all its traffic there */
    uint64_t qt_cmds = win.qt1.cmds - win.qt0.cmds;
    uint64_t qt_cont = win.qt1.contended - win.qt0.contended;
    double qt_wait = (win.qt1.wait_ns - win.qt0.wait_ns) * 1e-9;
    double qt_busy = (win.qt1.busy_ns - win.qt0.busy_ns) * 1e-9;

    /* the host over the window, in CPUs; others = not QEMU, not us */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double ticks = win.host1.total - win.host0.total;
    double host_busy = ticks > 0 ? ncpu * (ticks - (win.host1.idle - win.host0.idle)) / ticks : 0;
    double host_steal = ticks > 0 ? ncpu * (win.host1.steal - win.host0.steal) / ticks : 0;
    double others = elapsed > 0 ? host_busy - (qemu_cpu + own_cpu) / elapsed : 0;

    struct qstats wq, rq;
    struct qstat wt, rt;
    char problems[8][160];
    int nproblems = 0;
    if (win.have_qstats) {
        qstats_sub(&win.win1, &win.win0, &wq);
        qstats_sub(&win.run1, &win.run0, &rq);
        qstats_total(&wq, &wt);
        qstats_total(&rq, &rt);
        nproblems = check_qstats(&rq, problems, 8);
    }

    if (opt.json) {
        char buf[256];
        printf("{\n");
        printf("  \"qemu\": \"%s\",\n", json_str(opt.qemu, buf, sizeof(buf)));
        printf("  \"blockdev\": \"%s\",\n", json_str(opt.blockdev, buf, sizeof(buf)));
        printf("  \"device_opts\": \"%s\",\n",
               json_str(opt.extra_dev ? opt.extra_dev : "", buf, sizeof(buf)));
        printf("  \"rw\": \"%s\", \"bs\": %u, \"queues\": %u, \"depth\": %u, "
               "\"queue_size\": %u, \"driver_threads\": %u,\n", rw_names[opt.rw], opt.bs,
               opt.queues, opt.depth, vqs[0].size, opt.threads ? opt.queues : 1);
        printf("  \"poll_max_ns\": %ld, \"spin\": %s,\n", opt.poll_max_ns,
               opt.spin ? "true" : "false");
        printf("  \"event_idx\": %s, \"iothread\": %s, \"iothreads\": %u, \"mode\": \"%s\","
               " \"verify\": %s, \"ring\": \"%s\",\n",
               opt.event_idx ? "true" : "false", opt.iothread ? "true" : "false",
               iothread_count(),
               opt.irq ? "irq" : "poll", opt.verify ? "true" : "false",
               opt.packed ? "packed" : "split");
        printf("  \"pinned_cpus\": [");
        for (unsigned i = 0; opt.pin && i < iothread_count(); i++) {
            printf("%s%d", i ? ", " : "", pin_cpu[i]);
        }
        printf("],\n");
        printf("  \"elapsed_s\": %.6f, \"requests\": %" PRIu64 ", \"reads\": %" PRIu64
               ", \"writes\": %" PRIu64 ", \"verified_reads\": %" PRIu64 ",\n",
               elapsed, n.done, n.reads, n.writes, n.verified);
        printf("  \"iops\": %.1f,\n", iops);
        printf("  \"lat_us\": {\"avg\": %.2f, \"p50\": %.2f, \"p99\": %.2f, \"p99.9\": %.2f},\n",
               lat_avg / 1e3, p50 / 1e3, p99 / 1e3, p999 / 1e3);
        printf("  \"kicks\": %" PRIu64 ", \"kicks_per_req\": %.4f,\n", n.kicks,
               per(n.kicks, n.done));
        printf("  \"notifications\": %" PRIu64 ", \"notifications_per_req\": %.4f,\n",
               n.notifs, per(n.notifs, n.done));
        printf("  \"per_queue\": [");
        for (unsigned i = 0; i < opt.queues; i++) {
            const struct vq_counts *c = &vqs[i].n;
            printf("%s{\"queue\": %u, \"requests\": %" PRIu64 ", \"kicks\": %" PRIu64
                   ", \"notifications\": %" PRIu64 "}", i ? ", " : "", i, c->done, c->kicks,
                   c->notifs);
        }
        printf("],\n");
        printf("  \"run_requests\": %" PRIu64 ", \"run_notifications\": %" PRIu64 ",\n",
               n.all, n.notifs_all);
        printf("  \"qtest\": {\"cmds\": %" PRIu64 ", \"contended\": %" PRIu64
               ", \"wait_us_per_cmd\": %.3f, \"busy\": %.4f, \"kick\": \"%s\", "
               "\"max_outstanding\": %" PRIu64 "},\n", qt_cmds, qt_cont,
               qt_cmds ? qt_wait * 1e6 / qt_cmds : 0, elapsed > 0 ? qt_busy / elapsed : 0,
               opt.kick_eventfd ? "eventfd" : opt.kick_async ? "async" : "sync",
               win.qt1.max_outstanding);
        printf("  \"host\": {\"cpus\": %ld, \"busy_cpus\": %.3f, \"steal_cpus\": %.3f, "
               "\"others_cpus\": %.3f},\n", ncpu, host_busy, host_steal, others);
        printf("  \"cpu_source\": \"%s\",\n", have_schedstat ? "schedstat" : "stat");
        printf("  \"qemu_cpu_us_per_req\": %.3f, \"loadgen_cpu_us_per_req\": %.3f,\n",
               qemu_cpu * us, own_cpu * us);
        printf("  \"harness_cpu_us_per_req\": %.3f, \"qemu_cpu_us_per_req_without_harness\": "
               "%.3f,\n", harness_cpu * us, (qemu_cpu - harness_cpu) * us);
        printf("  \"threads\": [");
        for (int g = 0; g < ngroups; g++) {
            printf("%s\n    {\"name\": \"%s\", \"count\": %d, \"cpu_s\": %.6f, "
                   "\"cpu_us_per_req\": %.3f, \"harness\": %s}", g ? "," : "",
                   json_str(groups[g].name, buf, sizeof(buf)), groups[g].count,
                   groups[g].cpu, groups[g].cpu * us,
                   strcmp(groups[g].name, "main") ? "false" : "true");
        }
        printf("\n  ],\n");
        if (win.have_qstats) {
            printf("  \"qemu_stats\": {\n    \"window\": {\"completions\": %" PRIu64
                   ", \"notifications\": %" PRIu64 ", \"suppressed\": %" PRIu64
                   ", \"merged\": %" PRIu64 ", \"batches\": ", wt.completions,
                   wt.notifications, wt.suppressed, wt.merged);
            json_batches(wt.batches);
            printf(",\n      \"notifications_per_req\": %.4f, \"suppressed_per_req\": %.4f, "
                   "\"merged_per_req\": %.4f,\n      \"queues\": [",
                   per(wt.notifications, wt.completions), per(wt.suppressed, wt.completions),
                   per(wt.merged, wt.completions));
            for (unsigned i = 0; i < wq.nq; i++) {
                const struct qstat *s = &wq.q[i];
                printf("%s\n        {\"queue\": %u, \"completions\": %" PRIu64
                       ", \"notifications\": %" PRIu64 ", \"suppressed\": %" PRIu64
                       ", \"merged\": %" PRIu64 ", \"batches\": ", i ? "," : "", i,
                       s->completions, s->notifications, s->suppressed, s->merged);
                json_batches(s->batches);
                printf("}");
            }
            printf("]},\n    \"run\": {\"completions\": %" PRIu64 ", \"reaped\": %" PRIu64
                   ", \"notifications\": %" PRIu64 ", \"notifications_seen\": %" PRIu64 "},\n",
                   rt.completions, n.all, rt.notifications, n.notifs_all);
            printf("    \"check\": \"%s\", \"problems\": [", nproblems ? "mismatch" : "ok");
            for (int i = 0; i < nproblems; i++) {
                printf("%s\"%s\"", i ? ", " : "", json_str(problems[i], buf, sizeof(buf)));
            }
            printf("]\n  },\n");
        } else {
            printf("  \"qemu_stats\": null,\n");
        }
        if (opt.strace) {
            printf("  \"strace_requests\": %" PRIu64 ",\n  \"syscalls_per_req\": {", n.all);
            for (int i = 0; i < nsyscs; i++) {
                printf("%s\"%s\": %.4f", i ? ", " : "", json_str(syscs[i].name, buf, sizeof(buf)),
                       per(syscs[i].calls, n.all));
            }
            printf("},\n");
        }
        printf("  \"setup_qtest_cmds\": %" PRIu64 "\n}\n", setup.cmds);
    } else {
        printf("vblk-load: %s bs=%u queues=%u depth=%u qsize=%u event_idx=%s iothread=%s "
               "mode=%s%s%s\n", rw_names[opt.rw], opt.bs, opt.queues, opt.depth, vqs[0].size,
               opt.event_idx ? "on" : "off", iothread_label(),
               opt.irq ? "irq" : "poll", opt.packed ? " ring=packed" : "",
               opt.threads ? " threads" : "");
        printf("  qemu:     %s\n  blockdev: %s\n", opt.qemu, opt.blockdev);
        if (opt.extra_dev) {
            printf("  device:   %s\n", opt.extra_dev);
        }
        printf("  requests: %" PRIu64 " in %.3f s (%" PRIu64 " reads, %" PRIu64 " writes",
               n.done, elapsed, n.reads, n.writes);
        if (opt.verify) {
            printf(", %" PRIu64 " reads verified", n.verified);
        }
        printf("), all status OK\n");
        printf("  IOPS:     %.0f\n", iops);
        printf("  latency:  avg %.1f us, p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n",
               lat_avg / 1e3, p50 / 1e3, p99 / 1e3, p999 / 1e3);
        printf("  kicks/req: %.4f   notifications/req: %.4f (MSI-X messages observed)\n",
               per(n.kicks, n.done), per(n.notifs, n.done));
        printf("  qtest channel: %" PRIu64 " commands, busy %.1f%% of the time, "
               "%" PRIu64 " found it taken (%.2f us waited per command)%s\n", qt_cmds,
               elapsed > 0 ? 100 * qt_busy / elapsed : 0, qt_cont,
               qt_cmds ? qt_wait * 1e6 / qt_cmds : 0, opt.kick_eventfd ? "; kicks by ioeventfd, not qtest" :
               opt.kick_async ? "; kicks pipelined" : "");
        printf("  host:     %ld CPUs, %.2f busy (%.2f not QEMU or vblk-load), %.2f stolen\n",
               ncpu, host_busy, others, host_steal);
        printf("  CPU per request (us, from %s):\n", have_schedstat ? "schedstat" : "stat ticks");
        for (int g = 0; g < ngroups; g++) {
            if (groups[g].count > 1) {
                printf("    %-18s x%-3d %8.3f\n", groups[g].name, groups[g].count,
                       groups[g].cpu * us);
            } else if (!strcmp(groups[g].name, "main")) {
                printf("    %-23s %8.3f  (harness: qtest kicks and MSI-X injection, "
                       "in the kernel on a KVM host)\n", "main loop", groups[g].cpu * us);
            } else {
                printf("    %-23s %8.3f\n", groups[g].name, groups[g].cpu * us);
            }
        }
        printf("    %-23s %8.3f\n", "QEMU total", qemu_cpu * us);
        printf("    %-23s %8.3f  (what a KVM host would see of these threads)\n",
               "QEMU without main loop", (qemu_cpu - harness_cpu) * us);
        printf("    %-23s %8.3f\n", "vblk-load (this)", own_cpu * us);
        if (win.have_qstats) {
            printf("  QEMU's virtqueue counters (x-query-virtio-queue-stats), measured window:\n"
                   "    completions %" PRIu64 " (driver reaped %" PRIu64 "), per request: "
                   "notifications %.4f, suppressed %.4f, merged %.4f\n    completions per "
                   "batch:", wt.completions, n.done, per(wt.notifications, wt.completions),
                   per(wt.suppressed, wt.completions), per(wt.merged, wt.completions));
            for (unsigned k = 0; k < QSTAT_BUCKETS; k++) {
                printf(" %s: %" PRIu64, qstat_bucket_names[k], wt.batches[k]);
            }
            printf("\n    whole run: completions %" PRIu64 " = reaped %" PRIu64
                   ", notifications %" PRIu64 " >= seen %" PRIu64 ": %s\n", rt.completions,
                   n.all, rt.notifications, n.notifs_all, nproblems ? "MISMATCH" : "ok");
        } else {
            printf("  QEMU's virtqueue counters: this QEMU has no x-query-virtio-queue-stats\n");
        }
        if (opt.strace) {
            printf("  QEMU syscalls per request (strace -f -c, over all %" PRIu64
                   " requests incl. ramp and drain):\n", n.all);
            for (int i = 0; i < nsyscs; i++) {
                if (strcmp(syscs[i].name, "total")) {
                    printf("    %-23s %8.4f\n", syscs[i].name, per(syscs[i].calls, n.all));
                }
            }
        }
    }
    fflush(stdout);
    if (nproblems) {
        fprintf(stderr, "vblk-load: error: QEMU's virtqueue counters disagree with what "
                "the driver saw:\n");
        for (int i = 0; i < nproblems; i++) {
            fprintf(stderr, "  %s\n", problems[i]);
        }
        cleanup();
        return 1;
    }
    cleanup();
    return 0;
}
