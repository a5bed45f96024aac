/*
 * Statistics (stats.h): latency histogram, per-thread CPU from
 * /proc/PID/task/TID/{schedstat,stat}, and the strace syscall summary.
 */
#include "stats.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "vblk-load.h"

/* ---- latency histogram ---- */
unsigned hist_idx(uint64_t v)
{
    if (v < 128) {
        return v;
    }
    int e = 63 - __builtin_clzll(v);
    if (e > 64) {
        e = 64;
    }
    unsigned i = 128 + (e - 7) * HIST_SUB + ((v >> (e - 6)) & (HIST_SUB - 1));
    return i < HIST_N ? i : HIST_N - 1;
}

double hist_val(unsigned i)
{
    if (i < 128) {
        return i;
    }
    unsigned e = (i - 128) / HIST_SUB + 7, m = (i - 128) % HIST_SUB;
    double lo = (double)((uint64_t)(HIST_SUB + m) << (e - 6));
    return lo + (double)(1ull << (e - 6)) / 2;
}

double hist_pct(const uint64_t *hist, uint64_t total, double p)
{
    uint64_t want = (uint64_t)(total * p / 100.0);
    if (want >= total) {
        want = total - 1;
    }
    uint64_t acc = 0;
    for (unsigned i = 0; i < HIST_N; i++) {
        acc += hist[i];
        if (acc > want) {
            return hist_val(i);
        }
    }
    return 0;
}

/* ---- /proc thread CPU accounting ---- */
#define MAX_THREADS 256
struct thr {
    int tid;
    char name[32];
    double cpu0, cpu1;   /* seconds, from schedstat if present else stat */
    bool seen0, seen1;
};
static struct thr thrs[MAX_THREADS];
static int nthr;
bool have_schedstat;
struct tgroup groups[MAX_THREADS];
int ngroups;

static bool read_thread(int pid, int tid, char *name, size_t nsz, double *cpu)
{
    char path[128], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return false;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return false;
    }
    buf[n] = 0;
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (!l || !r || r < l) {
        return false;
    }
    size_t len = r - l - 1;
    if (len >= nsz) {
        len = nsz - 1;
    }
    memcpy(name, l + 1, len);
    name[len] = 0;
    /* fields after ')': 3=state ... 14=utime 15=stime */
    char *p = r + 2;
    unsigned long long ut = 0, st = 0;
    for (int field = 3; field <= 15 && *p; field++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (field == 14) {
            ut = v;
        } else if (field == 15) {
            st = v;
        }
        p = strchr(p, ' ');
        if (!p) {
            break;
        }
        p++;
    }
    *cpu = (double)(ut + st) / sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            *cpu = strtoull(buf, NULL, 10) * 1e-9;
            have_schedstat = true;
        }
    }
    return true;
}

void snapshot_threads(pid_t pid, int which)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        int tid = atoi(de->d_name);
        char name[32];
        double cpu;
        if (!read_thread(pid, tid, name, sizeof(name), &cpu)) {
            continue;
        }
        int i;
        for (i = 0; i < nthr && thrs[i].tid != tid; i++) {
        }
        if (i == nthr) {
            if (nthr == MAX_THREADS) {
                continue;
            }
            nthr++;
            memset(&thrs[i], 0, sizeof(thrs[i]));
            thrs[i].tid = tid;
        }
        if (tid == pid) {
            snprintf(thrs[i].name, sizeof(thrs[i].name), "main");
        } else {
            snprintf(thrs[i].name, sizeof(thrs[i].name), "%s", name);
        }
        if (which == 0) {
            thrs[i].cpu0 = cpu;
            thrs[i].seen0 = true;
        } else {
            thrs[i].cpu1 = cpu;
            thrs[i].seen1 = true;
        }
    }
    closedir(d);
}

/* Group threads by name (all "worker" threads together). */
void group_threads(void)
{
    for (int i = 0; i < nthr; i++) {
        if (!thrs[i].seen1) {
            continue;       /* exited before the end: its time is lost */
        }
        double c = thrs[i].cpu1 - (thrs[i].seen0 ? thrs[i].cpu0 : 0);
        int g;
        for (g = 0; g < ngroups && strcmp(groups[g].name, thrs[i].name); g++) {
        }
        if (g == ngroups) {
            ngroups++;
            snprintf(groups[g].name, sizeof(groups[g].name), "%s", thrs[i].name);
        }
        groups[g].count++;
        groups[g].cpu += c;
    }
}

/* ---- the host ---- */
void host_cpu_sample(struct host_cpu *h)
{
    /* cpu  user nice system idle iowait irq softirq steal guest guest_nice */
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    memset(h, 0, sizeof(*h));
    if (!f) {
        return;
    }
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) >= 4) {
        for (int i = 0; i < 8; i++) {
            h->total += v[i];       /* guest time is already in user */
        }
        h->idle = v[3] + v[4];
        h->steal = v[7];
    }
    fclose(f);
}

/* ---- optional: syscalls per request by strace -f -c ---- */
struct sysc syscs[512];
int nsyscs;
static pid_t strace_pid = -1, traced_pid = -1;
static char strace_path[256];

void strace_cleanup(void)
{
    if (strace_pid > 0) {
        kill(strace_pid, SIGKILL);
        waitpid(strace_pid, NULL, 0);
        strace_pid = -1;
    }
    if (strace_path[0]) {
        unlink(strace_path);
        strace_path[0] = 0;
    }
}

static bool all_threads_traced(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)traced_pid);
    DIR *d = opendir(path);
    if (!d) {
        return false;
    }
    struct dirent *de;
    bool all = true;
    int n = 0;
    while (all && (de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        char p2[128], buf[2048];
        snprintf(p2, sizeof(p2), "/proc/%d/task/%d/status", (int)traced_pid,
                 atoi(de->d_name));
        int fd = open(p2, O_RDONLY);
        if (fd < 0) {
            continue;
        }
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (r <= 0) {
            continue;
        }
        buf[r] = 0;
        char *t = strstr(buf, "TracerPid:");
        if (!t || atoi(t + 10) != strace_pid) {
            all = false;
        }
        n++;
    }
    closedir(d);
    return all && n > 0;
}

void strace_start(pid_t pid)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(strace_path, sizeof(strace_path), "%s/vblk-load-%d.strace",
             tmp && *tmp ? tmp : "/tmp", (int)getpid());
    char pidstr[16];
    snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
    traced_pid = pid;
    pid_t child = fork();
    if (child < 0) {
        die("fork: %s", strace_path);
    }
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        execlp("strace", "strace", "-f", "-c", "-qq", "-o", strace_path, "-p", pidstr,
               (char *)NULL);
        _exit(127);
    }
    strace_pid = child;
    double deadline = now_s() + opt.timeout;
    while (!all_threads_traced()) {
        int st;
        if (waitpid(strace_pid, &st, WNOHANG) == strace_pid) {
            strace_pid = -1;
            die("strace failed to attach to QEMU (is strace installed, and ptrace allowed?)");
        }
        if (now_s() > deadline) {
            die("strace did not attach to all QEMU threads within %.1fs", opt.timeout);
        }
        usleep(10000);
    }
}

void strace_stop(void)
{
    kill(strace_pid, SIGINT);
    double deadline = now_s() + opt.timeout;
    int st;
    while (waitpid(strace_pid, &st, WNOHANG) != strace_pid) {
        if (now_s() > deadline) {
            die("strace did not finish within %.1fs", opt.timeout);
        }
        usleep(10000);
    }
    strace_pid = -1;
    FILE *f = fopen(strace_path, "r");
    if (!f) {
        die("strace wrote no summary");
    }
    char line[256];
    int dashes = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "------", 6)) {
            dashes++;
            continue;
        }
        if (dashes != 1) {
            continue;
        }
        char *tok[8];
        int nt = 0;
        for (char *p = strtok(line, " \t\n"); p && nt < 8; p = strtok(NULL, " \t\n")) {
            tok[nt++] = p;
        }
        /* % time, seconds, usecs/call, calls, [errors], syscall */
        if (nt < 5 || nsyscs == 512) {
            continue;
        }
        struct sysc *c = &syscs[nsyscs++];
        snprintf(c->name, sizeof(c->name), "%s", tok[nt - 1]);
        c->calls = strtoull(tok[3], NULL, 10);
        c->errors = nt >= 6 ? strtoull(tok[4], NULL, 10) : 0;
    }
    fclose(f);
    if (dashes < 1) {
        die("cannot parse the strace summary %s", strace_path);
    }
}
