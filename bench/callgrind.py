#!/usr/bin/env python3
"""Instructions per request of each QEMU thread and function, any builds.

    python3 bench/callgrind.py [--builds base fork upstream] [--backend tmpfs-native]
                               [--depth 1] [--seconds 10] [--poll-max-ns N] [--out DIR]

Runs each build under valgrind --tool=callgrind (instrumentation off at
start), driven by bench/vblk-load (interrupt mode, one queue, 4 KiB, one
IOThread, a backend of bench/run.py, kicks --kick as given).  Once the
IOThread is doing I/O it switches instrumentation on for --seconds,
dumps, and reads the dump of each thread: instructions (Ir) by function,
exclusive, divided by the number of calls of virtqueue_push() in the same
dump (one per completed request, in every version).  Instruction counts do
not depend on how loaded the machine is, which CPU time on a shared
machine does; they leave out what the kernel does in system calls.

Under valgrind one thread runs at a time, so an IOThread that polls spins
while the others wait: the default --poll-max-ns 0 leaves polling out and
counts the work per request (polling's own cost: bench/run.py's
poll-max-ns=0 cells, or bench/profile.py).  Writes DIR/callgrind.md and
keeps the dumps in DIR/BUILD/.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: builds, backends, their image files)

NORMALISER = 'virtqueue_push'


def die(msg):
    sys.exit(f'callgrind.py: error: {msg}')


def parse(path):
    """(exclusive Ir by function, calls by callee, total Ir) of one callgrind
    dump.  Function names are compressed as "(id) name", then "(id)"; the
    cost line after a calls= line is the call's inclusive cost, not the
    caller's own."""
    names = {}
    excl = collections.Counter()
    calls = collections.Counter()
    fn = cfn = None
    after_call = False

    def resolve(rest):
        m = re.match(r'\((\d+)\)(?: (.*))?', rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), f'?{m.group(1)}')

    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            if line.startswith('fn='):
                fn = resolve(line[3:])
            elif line.startswith('cfn='):
                cfn = resolve(line[4:])
            elif line.startswith('calls='):
                calls[cfn] += int(line[6:].split()[0])
                after_call = True
            elif line and (line[0].isdigit() or line[0] in '+-*'):
                parts = line.split()
                if after_call:
                    after_call = False
                elif len(parts) > 1 and fn is not None:
                    excl[fn] += int(parts[1])
    return excl, calls, sum(excl.values())


def thread_of(path, excl):
    """Which QEMU thread a per-thread dump is: main, IOThread or other."""
    m = re.search(r'-(\d+)$', path)
    if m and int(m.group(1)) == 1:
        return 'main'
    if any(f.startswith('iothread_run') for f in excl):
        return 'IOThread'
    return 'other'


def tid_of(pid, comm):
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{tid}/comm') as f:
                if f.read().strip() == comm:
                    return tid
    except FileNotFoundError:
        pass
    return None


def cpu_ns(pid, tid):
    try:
        with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
            return int(f.read().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None


def one_build(args, build, outdir):
    """Run build under callgrind; returns {thread: (excl, calls, total)}."""
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    wrapper = os.path.join(outdir, 'qemu-system-x86_64')
    with open(wrapper, 'w') as f:
        f.write('#!/bin/sh\n'
                f'exec valgrind --tool=callgrind --callgrind-out-file={outdir}/cg.%p '
                '--separate-threads=yes --instr-atstart=no --fair-sched=yes -q '
                f'{build.qemu} "$@"\n')
    os.chmod(wrapper, 0o755)
    cell = run.Cell(args.backend, 'randread', depth=args.depth, poll=args.poll_max_ns)
    wrapped = run.Build(build.label, outdir, build.props)
    total = args.seconds + 120          # startup under valgrind is slow
    cmd = run.loadgen_cmd(wrapped, cell, total, 1, os.path.join(run.ROOT, 'build', 'bench'),
                          args.kick, args.qtest_log)
    cmd[cmd.index('--timeout') + 1] = '120'
    load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # QEMU is the wrapper's pid (exec); wait until its IOThread works
        end = time.monotonic() + 120
        qemu = tid = None
        while time.monotonic() < end and load.poll() is None:
            out = subprocess.run(['pgrep', '-P', str(load.pid)], capture_output=True,
                                 text=True).stdout.split()
            qemu = out[0] if out else None
            tid = tid_of(qemu, 'IO iothread0') if qemu else None
            if tid:
                a = cpu_ns(qemu, tid)
                time.sleep(1)
                b = cpu_ns(qemu, tid)
                if a is not None and b is not None and b - a > 50e6:
                    break
            time.sleep(0.5)
        else:
            die(f'{build.label}: QEMU under callgrind did not start doing I/O within 120 s'
                + (f'; vblk-load said: {load.communicate()[1].strip()}'
                   if load.poll() is not None else ''))
        ctl = ['callgrind_control']
        subprocess.run(ctl + ['-i', 'on', qemu], check=True, capture_output=True)
        time.sleep(args.seconds)
        subprocess.run(ctl + ['-d', qemu], check=True, capture_output=True)
        subprocess.run(ctl + ['-i', 'off', qemu], check=True, capture_output=True)
    finally:
        load.terminate()
        try:
            load.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            load.kill()
            load.communicate()
    threads = {}
    for name in sorted(os.listdir(outdir)):
        m = re.fullmatch(r'cg\.\d+\.1-(\d+)', name)
        if not m:
            continue
        p = os.path.join(outdir, name)
        excl, calls, tot = parse(p)
        t = thread_of(p, excl)
        if t in threads:
            e0, c0, t0 = threads[t]
            e0.update(excl)
            c0.update(calls)
            threads[t] = (e0, c0, t0 + tot)
        else:
            threads[t] = (excl, calls, tot)
    if 'IOThread' not in threads or not threads['IOThread'][1].get(NORMALISER):
        die(f'{build.label}: no {NORMALISER}() calls in the IOThread\'s dump in {outdir}')
    return threads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--builds', nargs='+', default=['base', 'fork', 'upstream'],
                    metavar='[LABEL=]BUILD[:PROPS]', help='as in bench/run.py')
    ap.add_argument('--backend', choices=sorted(run.BACKENDS), default='tmpfs-native')
    ap.add_argument('--depth', type=int, default=1)
    ap.add_argument('--seconds', type=float, default=10,
                    help='seconds of instrumentation per build (default 10)')
    ap.add_argument('--poll-max-ns', type=int, default=0,
                    help='the IOThread\'s poll-max-ns (default 0: no polling; see above)')
    ap.add_argument('--kick', choices=('async', 'sync', 'eventfd'), default='async',
                    help='vblk-load --kick (default async, as make bench)')
    ap.add_argument('--qtest-log', default='none', metavar='FILE',
                    help='vblk-load --qtest-log (default none)')
    ap.add_argument('--top', type=int, default=15, help='functions listed per thread')
    ap.add_argument('--out', default=os.path.join(run.ROOT, 'build', 'callgrind'))
    args = ap.parse_args()
    for tool in ('valgrind', 'callgrind_control'):
        if not shutil.which(tool):
            die(f'{tool} not found: apt-get install valgrind')
    if not os.access(run.LOADGEN, os.X_OK):
        die('bench/vblk-load/vblk-load is missing: make vblk-load')
    try:
        builds = run.parse_builds(args.builds)
    except ValueError as e:
        ap.error(f'--builds: {e}')
    for b in builds:
        if not os.access(b.qemu, os.X_OK):
            die(f'{b.qemu} missing: ' + ('make upstream' if b.build == 'upstream'
                                         else 'make build'))
    run.image(args.backend, os.path.join(run.ROOT, 'build', 'bench'))
    os.makedirs(args.out, exist_ok=True)
    res = {}
    for b in builds:
        res[b.label] = one_build(args, b, os.path.join(args.out, b.label))
        n = res[b.label]['IOThread'][1][NORMALISER]
        print(f'{b.label}: {n} requests instrumented; instructions per request: '
              + ', '.join(f'{t} {v[2] / n:.0f}' for t, v in sorted(res[b.label].items())),
              file=sys.stderr)
    labels = [b.label for b in builds]
    req = {b: res[b]['IOThread'][1][NORMALISER] for b in labels}
    L = [f'# Instructions per request: {args.backend} randread, depth {args.depth}, one queue',
         '', f'Command: `python3 bench/callgrind.py --builds {" ".join(args.builds)} '
         f'--backend {args.backend} --depth {args.depth} --seconds {args.seconds:g} '
         f'--poll-max-ns {args.poll_max_ns} --kick {args.kick} --qtest-log {args.qtest_log}`. '
         'Each build under callgrind '
         f'for {args.seconds:g} s of I/O; instructions (user space, exclusive) divided by '
         f'the requests completed in the same interval (calls of {NORMALISER}(): '
         + ', '.join(f'{b} {req[b]}' for b in labels) + '). The main loop\'s work here '
         'is the harness\'s (qtest kicks, MSI-X injection); a KVM host does it in the '
         'kernel.', '',
         '| thread | ' + ' | '.join(labels) + ' |', '| --- |' + ' --- |' * len(labels)]
    threads = ['IOThread', 'main', 'other']
    for t in threads:
        L.append(f'| {t} | ' + ' | '.join(
            f'{res[b][t][2] / req[b]:.0f}' if t in res[b] else '-' for b in labels) + ' |')
    L.append('| all | ' + ' | '.join(
        f'{sum(v[2] for v in res[b].values()) / req[b]:.0f}' for b in labels) + ' |')
    for t in threads[:2]:
        funcs = set()
        for b in labels:
            if t in res[b]:
                e = res[b][t][0]
                funcs |= set(sorted(e, key=lambda f: -e[f])[:args.top])
        L += ['', f'## {t}: instructions per request by function (exclusive; the {args.top} '
              'most expensive of each build)', '',
              '| function | ' + ' | '.join(labels) + ' |', '| --- |' + ' --- |' * len(labels)]
        for f in sorted(funcs, key=lambda f: -max(res[b][t][0].get(f, 0) / req[b]
                                                  for b in labels if t in res[b])):
            L.append(f'| {f} | ' + ' | '.join(
                f'{res[b][t][0].get(f, 0) / req[b]:.0f}' if t in res[b] else '-'
                for b in labels) + ' |')
        L += ['', f'{t}: calls per request of the functions called most often', '',
              '| function | ' + ' | '.join(labels) + ' |', '| --- |' + ' --- |' * len(labels)]
        callees = set()
        for b in labels:
            if t in res[b]:
                c = res[b][t][1]
                callees |= set(sorted(c, key=lambda f: -c[f])[:args.top])
        for f in sorted(callees, key=lambda f: -max(res[b][t][1].get(f, 0) / req[b]
                                                    for b in labels if t in res[b])):
            L.append(f'| {f} | ' + ' | '.join(
                f'{res[b][t][1].get(f, 0) / req[b]:.2f}' if t in res[b] else '-'
                for b in labels) + ' |')
    text = '\n'.join(L) + '\n'
    with open(os.path.join(args.out, 'callgrind.md'), 'w') as f:
        f.write(text)
    print(text)


if __name__ == '__main__':
    main()
