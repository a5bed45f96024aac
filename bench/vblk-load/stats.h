/*
 * Statistics of a run: the latency histogram, CPU time of each QEMU thread
 * over the measured window (from /proc), and QEMU's syscalls per type
 * (strace -f -c), and the host's CPU time.
 */
#ifndef VBLK_STATS_H
#define VBLK_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Latency histogram in ns: exact below 128, then 64 sub-buckets per power
 * of two (~1.5% resolution).  One per queue, added up for the report. */
#define HIST_SUB 64
#define HIST_N (128 + 58 * HIST_SUB)
unsigned hist_idx(uint64_t v);
double hist_val(unsigned i);
double hist_pct(const uint64_t *hist, uint64_t total, double p);

/* CPU time of QEMU's threads: snapshot 0 at the start of the window,
 * 1 at the end; then group_threads() sums by thread name. */
void snapshot_threads(pid_t pid, int which);
struct tgroup { char name[32]; int count; double cpu; };
extern struct tgroup groups[];
extern int ngroups;
extern bool have_schedstat;
void group_threads(void);

/* The whole host's CPU time from /proc/stat, in clock ticks: over the
 * window it says how busy the machine was (QEMU and we included) and how
 * much the hypervisor stole. */
struct host_cpu { uint64_t total, idle, steal; };
void host_cpu_sample(struct host_cpu *h);

/* strace -f -c attached to QEMU; strace_stop() parses its summary. */
struct sysc { char name[40]; uint64_t calls, errors; };
extern struct sysc syscs[];
extern int nsyscs;
void strace_start(pid_t pid);
void strace_stop(void);
void strace_cleanup(void);

#endif
