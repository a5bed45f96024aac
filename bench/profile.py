#!/usr/bin/env python3
"""Where QEMU's CPU goes, per request, in two or more builds.

    python3 bench/profile.py [--builds base fork] [--backend tmpfs-native]
                             [--rw randread] [--depth 32] [--rounds 5]
                             [--threads iothread [main]] [--out DIR]

Drives each build with bench/vblk-load (interrupt mode, one queue, 4 KiB,
one IOThread, a backend of bench/run.py) in interleaved rounds, records
the chosen QEMU threads (default: the IOThread alone; `main` adds the
main loop) with `perf record -t` for a few seconds of each run, and turns
the samples into nanoseconds of CPU per request of each thread: by binary
(kernel, QEMU, libc) and by function, with the functions whose cost
differs most between the first build and each other build.  perf samples
a thread at a fixed rate while it runs, so samples / rate / requests is
its CPU time per request.  Any builds of bench/run.py, e.g. --builds fork
upstream (make upstream).  In vblk-load the main loop's per-request work
(qtest kicks, MSI-X injection) is harness cost that a KVM guest does not
cause.  Needs perf (apt-get install linux-perf) and an idle machine.
Writes DIR/profile.md and keeps DIR/*.data for `perf report -i`.
"""

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: the backends and their image files)

ROOT = run.ROOT
LOADGEN = run.LOADGEN
RATE = 4000     # perf record -F: samples per second of the thread's CPU


def die(msg):
    sys.exit(f'profile.py: error: {msg}')


THREADS = {'iothread': 'IOThread', 'main': 'main loop (harness)'}


def thread_tid(qemu_pid, which, timeout=10.0):
    """The tid of QEMU's IOThread ("IO iothread0") or main thread."""
    if which == 'main':
        return str(qemu_pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            for tid in os.listdir(f'/proc/{qemu_pid}/task'):
                with open(f'/proc/{qemu_pid}/task/{tid}/comm') as f:
                    if f.read().strip() == 'IO iothread0':
                        return tid
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    die('no thread "IO iothread0" in QEMU; did it start?')


def child_qemu(pid, timeout=10.0):
    """The QEMU process that vblk-load (pid) started."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = subprocess.run(['pgrep', '-P', str(pid), '-x', 'qemu-system-x86'],
                             capture_output=True, text=True).stdout.split()
        if out:
            return out[0]
        time.sleep(0.1)
    die('vblk-load started no QEMU')


def one_run(args, build, data):
    cell = run.Cell(args.backend, args.rw, depth=args.depth)
    # vblk-load runs well past the recording: perf record -t ends with
    # SIGTERM when a thread it records exits while it records
    load = subprocess.Popen(run.loadgen_cmd(build, cell, args.record + 6, 0.5, args.out,
                                            args.kick, args.qtest_log),
                            stdout=subprocess.PIPE, text=True)
    qemu = child_qemu(load.pid)
    tids = {t: thread_tid(qemu, t) for t in args.threads}
    time.sleep(1.5)    # past the ramp
    rec = subprocess.run(['perf', 'record', '-q', '-F', str(RATE),
                          '-t', ','.join(tids.values()),
                          '-o', data, '--', 'sleep', str(args.record)],
                         capture_output=True, text=True)
    out, _ = load.communicate()
    if rec.returncode or load.returncode:
        die(f'{build.label}: perf record ({rec.returncode}: {rec.stderr.strip()}) or '
            f'vblk-load ({load.returncode}) failed')
    return float(json.loads(out)['iops']), tids


def samples(data, tid):
    """{(binary, function): samples} of one thread in one perf.data."""
    out = subprocess.run(['perf', 'report', '-i', data, '--stdio', '-g', 'none',
                          '--tid', tid, '--no-children', '--sort', 'dso,sym', '-F',
                          'sample,dso,sym'],
                         capture_output=True, text=True, check=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        m = re.match(r'\s*(\d+)\s+(\S+)\s+\[.\]\s+(\S+)', line)
        if m:
            d[(m.group(2), m.group(3))] += int(m.group(1))
    return d


def profile_tables(per, labels, thread, top):
    """The report of one thread: by binary, the ratio of the totals, and
    the functions that differ most."""
    ref = labels[0]

    def med(b, pred):
        return statistics.median(sum(v for k, v in prof.items() if pred(k))
                                 for prof in per[b])

    funcs = {k for rounds in per.values() for prof in rounds for k in prof}
    # the median over the rounds of each function's cost, per build
    fmed = {b: {f: statistics.median(prof.get(f, 0.0) for prof in per[b]) for f in funcs}
            for b in labels}
    lines = ['', f'## {thread}', '',
             '| binary | ' + ' | '.join(labels) + ' |',
             '| --- |' + ' --- |' * len(labels)]
    dsos = sorted({f[0] for f in funcs}, key=lambda d: -med(ref, lambda k, d=d: k[0] == d))
    for d in dsos[:5] + ['all']:
        pred = (lambda k: True) if d == 'all' else (lambda k, d=d: k[0] == d)
        lines.append(f'| {d} | ' + ' | '.join(f'{med(b, pred):.0f}' for b in labels) + ' |')
    for b in labels[1:]:
        m, lo, hi = run.bootstrap_ci([sum(y.values()) / sum(x.values())
                                      for x, y in zip(per[ref], per[b]) if x])
        lines += ['', f'{thread} CPU per request, {b}/{ref}: {m:.2f} [{lo:.2f}, {hi:.2f}] '
                  f'(median of the rounds\' ratios, 95% bootstrap interval).']
    for b in labels[1:]:
        diff = sorted((fmed[b][f] - fmed[ref][f], f) for f in funcs)
        lines += ['', f'{thread}: functions that differ most, {b} against {ref} '
                  '(ns per request):', '',
                  f'| function | binary | {ref} | {b} | difference |',
                  '| --- | --- | --- | --- | --- |']
        for dv, f in diff[:top] + diff[-top:]:
            lines.append(f'| {f[1]} | {f[0]} | {fmed[ref][f]:.1f} | {fmed[b][f]:.1f} '
                         f'| {dv:+.1f} |')
    for b in labels:
        lines += ['', f'{thread}: most expensive in {b} (ns per request):', '',
                  '| function | binary | ns |', '| --- | --- | --- |']
        for f in sorted(funcs, key=lambda f: -fmed[b][f])[:top]:
            lines.append(f'| {f[1]} | {f[0]} | {fmed[b][f]:.1f} |')
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--builds', nargs='+', default=['base', 'fork'],
                    metavar='[LABEL=]BUILD[:PROPS]', help='as in bench/run.py')
    ap.add_argument('--backend', choices=sorted(run.BACKENDS), default='tmpfs-native')
    ap.add_argument('--rw', choices=('randread', 'randwrite'), default='randread')
    ap.add_argument('--depth', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--record', type=float, default=3, help='seconds recorded per run')
    ap.add_argument('--threads', nargs='+', choices=sorted(THREADS), default=['iothread'],
                    help='the QEMU threads to record (default: iothread; main: the main '
                         'loop, which runs vblk-load\'s kicks and interrupts)')
    ap.add_argument('--kick', choices=('async', 'sync', 'eventfd'), default='async',
                    help='vblk-load --kick (default async, as make bench)')
    ap.add_argument('--qtest-log', default='none', metavar='FILE',
                    help='vblk-load --qtest-log (default none)')
    ap.add_argument('--top', type=int, default=12, help='functions listed each way')
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'profile'))
    args = ap.parse_args()
    if args.rounds < 1 or args.record <= 0 or not 1 <= args.depth <= 341:
        ap.error('--rounds must be >= 1, --record > 0 and --depth 1..341')
    if not shutil.which('perf'):
        die('perf not found: apt-get install linux-perf')
    if not os.access(LOADGEN, os.X_OK):
        die(f'{LOADGEN} not built: make vblk-load')
    try:
        builds = run.parse_builds(args.builds)
    except ValueError as e:
        ap.error(f'--builds: {e}')
    args.threads = list(dict.fromkeys(args.threads))
    for b in builds:
        if not os.access(b.qemu, os.X_OK):
            die(f'{b.qemu} missing: ' + ('make upstream' if b.build == 'upstream'
                                         else 'make build'))
        why = b.check_props()
        if why:
            die(why)
    os.makedirs(args.out, exist_ok=True)

    # ns per request of each (binary, function), per thread, build label, round
    per = {t: {b.label: [] for b in builds} for t in args.threads}
    iops_of = {b.label: [] for b in builds}
    for r in range(args.rounds):
        for b in builds if r % 2 == 0 else builds[::-1]:
            data = os.path.join(args.out, f'{b.label}-{r + 1}.data')
            iops, tids = one_run(args, b, data)
            iops_of[b.label].append(iops)
            ns = 1e9 / RATE / (iops * args.record)
            msg = []
            for t, tid in tids.items():
                s = samples(data, tid)
                per[t][b.label].append({k: v * ns for k, v in s.items()})
                msg.append(f'{sum(s.values()) * ns:.0f} ns of {THREADS[t]} CPU')
            print(f'round {r + 1} {b.label}: {iops / 1000:.1f}k IOPS, '
                  + ', '.join(msg) + ' per request', file=sys.stderr)

    labels = [b.label for b in builds]
    ref = labels[0]
    lines = [f'# CPU per request: {args.backend} {args.rw}, depth {args.depth}, '
             f'one queue, 4 KiB',
             '', f'Command: `python3 bench/profile.py --builds {" ".join(args.builds)} '
             f'--backend {args.backend} --rw {args.rw} --depth {args.depth} '
             f'--rounds {args.rounds} --threads {" ".join(args.threads)} --kick {args.kick} '
             f'--qtest-log {args.qtest_log}`. '
             f'{args.rounds} interleaved rounds, {args.record:g} s recorded per run; '
             'medians over the rounds, ns per request. IOPS (median): '
             + ', '.join(f'{b} {statistics.median(iops_of[b]) / 1e3:.1f}k' for b in labels)
             + '.']
    if 'main' in args.threads:
        lines += ['', 'The main loop\'s per-request work here is vblk-load\'s: it takes the '
                  'qtest kicks (turned into ioeventfd writes) and the guest notifier '
                  'eventfds (turned into MSI-X writes). On a KVM host the kernel does both '
                  '(ioeventfd, irqfd): harness cost.']
    for t in args.threads:
        lines += profile_tables(per[t], labels, THREADS[t], args.top)
    text = '\n'.join(lines) + '\n'
    with open(os.path.join(args.out, 'profile.md'), 'w') as f:
        f.write(text)
    print(text)


if __name__ == '__main__':
    main()
