/*
 * The QEMU process (qemu.h): guest RAM file, sockets, command line, start,
 * stop, and die(), which stops it on every error.  QEMU runs in its own
 * process group with a parent-death signal, so it dies with vblk-load.
 */
#include "qemu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "stats.h"
#include "vblk-load.h"


pid_t qemu_pid = -1;
static pid_t qemu_pgid = -1;    /* its process group, which may outlive it */
bool qemu_hung;
static char sock_path[108], qmp_path[108];
static char mem_path[256];
static char log_path[256];
static char node_name[64] = "disk0";
static uint8_t *ram;
static uint64_t ram_size, ram_next = RAM_ALLOC_START;

static const char *tmpdir(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

void cleanup(void)
{
    strace_cleanup();
    if (qemu_pid > 0) {
        /* QEMU runs in its own process group: this also stops wrappers' children */
        kill(-qemu_pid, SIGTERM);
        kill(qemu_pid, SIGTERM);
        for (int i = 0; i < 200; i++) {
            if (waitpid(qemu_pid, NULL, WNOHANG) == qemu_pid) {
                qemu_pid = -1;
                break;
            }
            usleep(10000);
        }
        if (qemu_pid > 0) {
            kill(-qemu_pid, SIGKILL);
            kill(qemu_pid, SIGKILL);
            waitpid(qemu_pid, NULL, 0);
            qemu_pid = -1;
        }
    }
    if (qemu_pgid > 0) {
        /* what QEMU (or a wrapper script) left behind in its group */
        kill(-qemu_pgid, SIGKILL);
        qemu_pgid = -1;
    }
    char *files[] = { sock_path, qmp_path, mem_path, log_path };
    for (unsigned i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        if (files[i][0]) {
            unlink(files[i]);
            files[i][0] = 0;
        }
    }
}

static void print_qemu_log(void)
{
    if (!log_path[0]) {
        return;
    }
    FILE *f = fopen(log_path, "r");
    if (!f) {
        return;
    }
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n < 40) {
        if (n++ == 0) {
            fprintf(stderr, "vblk-load: QEMU stderr:\n");
        }
        fprintf(stderr, "  %s", line);
    }
    fclose(f);
}

/* --chaos: give a QEMU that is going down a moment to be reaped. */
static void wait_for_exit(int *st)
{
    for (int i = 0; i < 50 && qemu_pid > 0; i++) {
        if (waitpid(qemu_pid, st, WNOHANG) == qemu_pid) {
            qemu_pid = -1;
            return;
        }
        usleep(10000);
    }
}

void die(const char *fmt, ...)
{
    static int dying;
    int code = 1;
    if (__atomic_exchange_n(&dying, 1, __ATOMIC_SEQ_CST)) {
        for (;;) {
            pause();        /* another thread is already on its way out */
        }
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vblk-load: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (qemu_pid > 0) {
        int st = 0;
        pid_t pid = qemu_pid;
        if (opt.chaos) {
            wait_for_exit(&st);
        } else if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
            qemu_pid = -1;
        }
        if (qemu_pid < 0 && pid > 0) {
            if (opt.chaos) {
                code = CHAOS_CRASH;     /* QEMU must never go away by itself */
            }
            if (WIFEXITED(st)) {
                fprintf(stderr, "vblk-load: QEMU exited with status %d\n", WEXITSTATUS(st));
            } else if (WIFSIGNALED(st)) {
                fprintf(stderr, "vblk-load: QEMU killed by signal %d\n", WTERMSIG(st));
            }
        }
    }
    if (qemu_hung && opt.chaos && code == 1) {
        code = CHAOS_HANG;
    }
    print_qemu_log();
    cleanup();
    exit(code);
}

const char *qemu_log(void)
{
    return log_path;
}

int qemu_stop(double secs)
{
    int st;
    if (qemu_pid <= 0) {
        return -1;
    }
    kill(-qemu_pid, SIGTERM);
    kill(qemu_pid, SIGTERM);
    for (double end = now_s() + secs; now_s() < end; usleep(10000)) {
        if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
            qemu_pid = -1;
            return st;
        }
    }
    return -1;
}

/* ---- guest RAM ---- */
void ram_create(uint64_t size)
{
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(mem_path, sizeof(mem_path), "%s/vblk-load-%d.mem", shm, (int)getpid());
    int mfd = open(mem_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (mfd < 0) {
        mem_path[0] = 0;
        die("cannot create guest RAM file: %s", strerror(errno));
    }
    if (ftruncate(mfd, size) < 0) {
        die("ftruncate guest RAM: %s", strerror(errno));
    }
    ram = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (ram == MAP_FAILED) {
        die("mmap guest RAM: %s", strerror(errno));
    }
    close(mfd);
    ram_size = size;
}

void ram_unlink(void)
{
    unlink(mem_path);
    mem_path[0] = 0;
}

uint64_t ram_alloc(uint64_t size, uint64_t align)
{
    uint64_t a = (ram_next + align - 1) & ~(align - 1);
    if (a + size > ram_size) {
        die("internal: guest RAM exhausted");
    }
    ram_next = a + size;
    memset(ram + a, 0, size);
    return a;
}

uint64_t ram_alloc_end(void)
{
    return ram_next;
}

void *gpa(uint64_t a)
{
    return ram + a;
}

/* ---- sockets and the command line ---- */
static int listen_socket(char *path, size_t size, const char *what)
{
    int n = snprintf(path, size, "%s/vblk-load-%d.%s", tmpdir(), (int)getpid(), what);
    if (n >= (int)size) {
        snprintf(path, size, "/tmp/vblk-load-%d.%s", (int)getpid(), what);
    }
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("bind %s: %s", path, strerror(errno));
    }
    if (listen(fd, 1) < 0) {
        die("listen: %s", strerror(errno));
    }
    return fd;
}

/* Accept QEMU's connection on lfd, watching for its early exit. */
static int accept_qemu(int lfd, const char *path)
{
    double deadline = now_s() + opt.timeout;
    for (;;) {
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        int pr = poll(&pfd, 1, 100);
        if (got_signal) {
            die("interrupted by signal %d", (int)got_signal);
        }
        if (pr > 0) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                close(lfd);
                return fd;
            }
        }
        int st;
        if (waitpid(qemu_pid, &st, WNOHANG) == qemu_pid) {
            qemu_pid = -1;
            fprintf(stderr, "vblk-load: QEMU exited before connecting (%s %d)\n",
                    WIFEXITED(st) ? "status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            die("QEMU failed to start: %s", opt.qemu);
        }
        if (now_s() > deadline) {
            die("QEMU did not connect to %s within %.1fs", path, opt.timeout);
        }
    }
}

const char *qemu_node_name(void)
{
    return node_name;
}

/*
 * --device-opts (key=value,...) as JSON members, each after ", ": digits
 * become numbers, on/off/true/false booleans, anything else a string.
 */
static void json_props(const char *kv, char *out, size_t len)
{
    size_t n = 0;
    char buf[512];
    if (!kv) {
        return;
    }
    if (strlen(kv) >= sizeof(buf)) {
        die("--device-opts too long");
    }
    strcpy(buf, kv);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *v = strchr(p, '=');
        if (!v || v == p || strpbrk(p, "\"\\")) {
            die("--device-opts: '%s' is not key=value (with --iothreads, no quotes)", p);
        }
        *v++ = 0;
        bool num = *v && strspn(v, "0123456789") == strlen(v);
        bool on = !strcmp(v, "on") || !strcmp(v, "true");
        bool off = !strcmp(v, "off") || !strcmp(v, "false");
        int w = snprintf(out + n, len - n, num || on || off ? ", \"%s\": %s" : ", \"%s\": \"%s\"",
                         p, num ? v : on ? "true" : off ? "false" : v);
        if (w < 0 || (size_t)w >= len - n) {
            die("--device-opts too long");
        }
        n += w;
    }
}

void qemu_start(struct qemu_conn *c)
{
    char mem_obj[512], dev[1024], bdev[1024], mname[64];
    /* a top-level node-name= option: at the start or after a comma */
    const char *m = NULL;
    for (const char *p = opt.blockdev; (p = strstr(p, "node-name=")); p++) {
        if (p == opt.blockdev || p[-1] == ',') {
            m = p;
            break;
        }
    }
    if (m) {
        size_t l = strcspn(m + 10, ",");
        if (l == 0 || l >= sizeof(node_name)) {
            die("bad node-name in --blockdev");
        }
        memcpy(node_name, m + 10, l);
        node_name[l] = 0;
        snprintf(bdev, sizeof(bdev), "%s", opt.blockdev);
    } else {
        snprintf(bdev, sizeof(bdev), "%s,node-name=%s", opt.blockdev, node_name);
    }
    snprintf(mem_obj, sizeof(mem_obj),
             "memory-backend-file,id=mem,size=%" PRIu64 ",mem-path=%s,share=on",
             ram_size, mem_path);
    snprintf(mname, sizeof(mname), "%" PRIu64 "M", ram_size >> 20);
    int n;
    if (opt.iothreads) {
        /* a list property: only -device's JSON form can give it */
        char extra[512] = "";
        json_props(opt.extra_dev, extra, sizeof(extra));
        n = snprintf(dev, sizeof(dev), "{\"driver\": \"virtio-blk-pci\", \"id\": \"vblk0\", "
                     "\"drive\": \"%s\", \"num-queues\": %u, \"queue-size\": %u, "
                     "\"event_idx\": %s, \"packed\": %s%s, \"iothread-vq-mapping\": [",
                     node_name, opt.dev_queues ? opt.dev_queues : opt.queues,
                     opt.queue_size, opt.event_idx ? "true" : "false",
                     opt.packed ? "true" : "false", extra);
        for (unsigned i = 0; i < opt.iothreads && n < (int)sizeof(dev); i++) {
            n += snprintf(dev + n, sizeof(dev) - n, "%s{\"iothread\": \"iothread%u\"}",
                          i ? ", " : "", i);
        }
        if (n < (int)sizeof(dev)) {
            n += snprintf(dev + n, sizeof(dev) - n, "]}");
        }
    } else {
        n = snprintf(dev, sizeof(dev), "virtio-blk-pci,id=vblk0,drive=%s,num-queues=%u,"
                     "queue-size=%u,event_idx=%s%s%s%s%s", node_name,
                     opt.dev_queues ? opt.dev_queues : opt.queues,
                     opt.queue_size, opt.event_idx ? "on" : "off",
                     opt.iothread ? ",iothread=iothread0" : "",
                     opt.packed ? ",packed=on" : "",
                     opt.extra_dev ? "," : "", opt.extra_dev ? opt.extra_dev : "");
    }
    if (n >= (int)sizeof(dev)) {
        die("--device-opts too long");
    }
    int lfd = listen_socket(sock_path, sizeof(sock_path), "sock");
    int mfd = listen_socket(qmp_path, sizeof(qmp_path), "qmp");
    char qtest_arg[160], qmp_arg[160];
    snprintf(qtest_arg, sizeof(qtest_arg), "unix:%s", sock_path);
    snprintf(qmp_arg, sizeof(qmp_arg), "unix:%s", qmp_path);
    const char *argv[80];
    int a = 0;
    argv[a++] = opt.qemu;
    argv[a++] = "-accel"; argv[a++] = "qtest";
    argv[a++] = "-qtest"; argv[a++] = qtest_arg;
    argv[a++] = "-qtest-log"; argv[a++] = opt.qtest_log;
    argv[a++] = "-qmp"; argv[a++] = qmp_arg;
    argv[a++] = "-display"; argv[a++] = "none";
    argv[a++] = "-nodefaults";
    argv[a++] = "-M"; argv[a++] = "q35";
    argv[a++] = "-name"; argv[a++] = "vblk,debug-threads=on";
    argv[a++] = "-m"; argv[a++] = mname;
    argv[a++] = "-object"; argv[a++] = mem_obj;
    argv[a++] = "-machine"; argv[a++] = "memory-backend=mem";
    static char iot[16][96];
    for (unsigned i = 0; i < iothread_count(); i++) {
        if (opt.poll_max_ns >= 0) {
            snprintf(iot[i], sizeof(iot[i]), "iothread,id=iothread%u,poll-max-ns=%ld", i,
                     opt.poll_max_ns);
        } else {
            snprintf(iot[i], sizeof(iot[i]), "iothread,id=iothread%u", i);
        }
        argv[a++] = "-object"; argv[a++] = iot[i];
    }
    argv[a++] = "-blockdev"; argv[a++] = bdev;
    argv[a++] = "-device"; argv[a++] = dev;
    argv[a] = NULL;

    snprintf(log_path, sizeof(log_path), "%s/vblk-load-%d.log", tmpdir(), (int)getpid());
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        die("cannot create %s: %s", log_path, strerror(errno));
    }
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        die("pipe: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        die("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127);
        }
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        execvp(opt.qemu, (char **)argv);
        int e = errno;
        if (write(errpipe[1], &e, sizeof(e)) < 0) {
            /* nothing to do */
        }
        _exit(127);
    }
    qemu_pid = qemu_pgid = pid;
    close(logfd);
    close(errpipe[1]);
    int e;
    ssize_t r = read(errpipe[0], &e, sizeof(e));
    close(errpipe[0]);
    if (r == sizeof(e)) {
        waitpid(pid, NULL, 0);
        qemu_pid = -1;
        die("cannot execute %s: %s", opt.qemu, strerror(e));
    }
    c->qtest_fd = accept_qemu(lfd, sock_path);
    c->qmp_fd = accept_qemu(mfd, qmp_path);
}

/*
 * On a machine with few CPUs the scheduler puts a polling IOThread beside
 * a driver thread in one run and apart from it in the next, and a run's
 * IOPS then differ by half from the run before.  A host that pins its
 * IOThreads (libvirt's <iothreadpin>) has no such lottery; --pin makes
 * the runs of a benchmark the same kind of host.
 */
int pin_cpu[16];

void pin_prepare(void)
{
    cpu_set_t allowed, rest;
    unsigned n = iothread_count(), k = 0;

    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
        die("--pin: sched_getaffinity: %s", strerror(errno));
    }
    if ((unsigned)CPU_COUNT(&allowed) <= n) {
        fprintf(stderr, "vblk-load: --pin needs more CPUs than IOThreads: %d CPU(s) "
                "allowed, %u IOThread(s); run without --pin\n", CPU_COUNT(&allowed), n);
        exit(2);
    }
    rest = allowed;
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && k < n; cpu--) {
        if (CPU_ISSET(cpu, &allowed)) {
            pin_cpu[k++] = cpu;
            CPU_CLR(cpu, &rest);
        }
    }
    if (sched_setaffinity(0, sizeof(rest), &rest) < 0) {
        die("--pin: sched_setaffinity: %s", strerror(errno));
    }
}

void pin_iothreads(void)
{
    char path[64], comm[32];
    unsigned n = iothread_count(), found = 0, id;
    struct dirent *de;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)qemu_pid);
    d = opendir(path);
    if (!d) {
        die("--pin: %s: %s", path, strerror(errno));
    }
    while ((de = readdir(d))) {
        FILE *f;
        int tid;
        char extra;

        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        tid = atoi(de->d_name);
        snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)qemu_pid, tid);
        f = fopen(path, "r");
        if (!f) {
            continue;
        }
        comm[0] = 0;
        if (!fgets(comm, sizeof(comm), f)) {
            comm[0] = 0;
        }
        fclose(f);
        /* debug-threads=on names an IOThread "IO " and its id */
        if (sscanf(comm, "IO iothread%u%c", &id, &extra) != 2 || extra != '\n' ||
            id >= n) {
            continue;
        }
        cpu_set_t one, now;
        CPU_ZERO(&one);
        CPU_SET(pin_cpu[id], &one);
        if (sched_setaffinity(tid, sizeof(one), &one) < 0 ||
            sched_getaffinity(tid, sizeof(now), &now) < 0) {
            closedir(d);
            die("--pin: IOThread %u (thread %d) to CPU %d: %s", id, tid, pin_cpu[id],
                strerror(errno));
        }
        if (!CPU_EQUAL(&one, &now)) {
            closedir(d);
            die("--pin: IOThread %u (thread %d) is not on CPU %d alone", id, tid,
                pin_cpu[id]);
        }
        found++;
    }
    closedir(d);
    if (found != n) {
        die("--pin: found %u of QEMU's %u IOThread(s) in /proc/%d/task", found, n,
            (int)qemu_pid);
    }
}
