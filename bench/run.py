#!/usr/bin/env python3
"""make bench: the fork's virtio-blk path against the base, side by side.

    python3 bench/run.py [--full] [--reps N] [--duration S] [--out DIR]

Drives one virtio-blk-pci device of build/base and build/fork with the
guest-less load generator (bench/vblk-load, interrupt mode, one IOThread),
alternating the builds run by run (A B, then B A, ...), and reports the
median of each metric per cell and the fork/base ratio.  Beside each file
backend row, fio on the host gives the bound on the same file.  A second
pass under strace counts QEMU's syscalls per request.  Writes DIR/bench.json
(every run), DIR/bench.md (the tables) and DIR/*.png (gnuplot).

The default (quick) mode takes about 5 minutes (`make bench`); --full covers the matrix of
docs/benchmarks.md and takes about an hour.
"""

import argparse
import fnmatch
import itertools
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOADGEN = os.path.join(ROOT, 'bench', 'vblk-load', 'vblk-load')
FILE_MB = 1024

# backend name -> (directory of the image file or None, -blockdev options)
BACKENDS = {
    'null': (None, 'driver=null-co,read-zeroes=on'),
    'tmpfs-native': ('/dev/shm', 'aio=native'),
    'tmpfs-io_uring': ('/dev/shm', 'aio=io_uring'),
    'tmpfs-threads': ('/dev/shm', 'aio=threads'),
    'disk-native': (None, 'aio=native'),    # directory: --out
}
FIO_ENGINE = {'native': 'libaio', 'io_uring': 'io_uring', 'threads': 'psync'}


class Cell:
    """One configuration, run on every build."""

    def __init__(self, backend: str, rw: str = 'randread', queues: int = 1,
                 depth: int = 32, poll: Optional[int] = None):
        self.backend, self.rw, self.queues, self.depth, self.poll = \
            backend, rw, queues, depth, poll

    @property
    def name(self) -> str:
        n = f'{self.backend} {self.rw} q{self.queues} d{self.depth}'
        return n + (f' poll-max-ns={self.poll}' if self.poll is not None else '')


def matrix(full: bool) -> List[Cell]:
    if not full:
        return [Cell('null'),
                Cell('tmpfs-native', depth=1), Cell('tmpfs-native'),
                Cell('tmpfs-native', poll=0),
                Cell('tmpfs-io_uring'), Cell('tmpfs-threads')]
    cells = [Cell(b, rw, q, d)
             for b in BACKENDS for rw in ('randread', 'randwrite')
             for q in (1, 4) for d in (1, 8, 32, 128)
             if not (b == 'null' and rw == 'randwrite')]
    cells += [Cell(b, depth=d, poll=0) for b in ('tmpfs-native', 'tmpfs-io_uring')
              for d in (1, 32)]
    return cells


def die(msg: str) -> None:
    print(f'bench: error: {msg}', file=sys.stderr)
    sys.exit(1)


def image(backend: str, out: str) -> Optional[str]:
    """The backend's image file, filled with data so that reads do I/O."""
    d = BACKENDS[backend][0] or (out if backend.startswith('disk') else None)
    if d is None:
        return None
    path = os.path.join(d, f'iobatch-bench-{backend.split("-")[0]}.img')
    if not os.path.exists(path) or os.path.getsize(path) != FILE_MB << 20:
        with open(path, 'wb') as f:
            chunk = os.urandom(1 << 20)
            for _ in range(FILE_MB):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    return path


def blockdev(cell: Cell, out: str) -> str:
    img = image(cell.backend, out)
    if img is None:
        return BACKENDS[cell.backend][1]
    return f'driver=file,filename={img},cache.direct=on,{BACKENDS[cell.backend][1]}'


def loadgen(build: str, cell: Cell, args, strace: bool = False) -> dict:
    cmd = [LOADGEN, '--qemu', os.path.join(ROOT, 'build', build, 'qemu-system-x86_64'),
           '--json', '--mode', 'irq', '--rw', cell.rw, '--queues', str(cell.queues),
           '--depth', str(cell.depth), '--duration', str(args.duration),
           '--ramp', str(args.ramp), '--blockdev', blockdev(cell, args.out),
           '--timeout', '30']
    if cell.poll is not None:
        cmd += ['--poll-max-ns', str(cell.poll)]
    if strace:
        cmd.append('--strace')
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False, timeout=args.duration + args.ramp + 120)
    if p.returncode != 0:
        die(f'{build} {cell.name}: vblk-load exited {p.returncode}:\n{p.stderr.strip()}\n'
            f'command: {" ".join(cmd)}')
    r = json.loads(p.stdout)
    threads = {t['name']: t['cpu_us_per_req'] for t in r['threads']}
    m = {'iops': r['iops'], 'p50_us': r['lat_us']['p50'], 'p99_us': r['lat_us']['p99'],
         'kicks_per_req': r['kicks_per_req'], 'notif_per_req': r['notifications_per_req'],
         'qemu_us_per_req': r['qemu_cpu_us_per_req'],
         'iothread_us_per_req': threads.get('IO iothread0', 0.0),
         'main_us_per_req': threads.get('main', 0.0),
         'worker_us_per_req': threads.get('worker', 0.0)}
    if strace:
        sc = r['syscalls_per_req']
        m = {'submit_per_req': sc.get('io_submit', 0) + sc.get('io_uring_enter', 0),
             'write_per_req': sc.get('write', 0),
             'syscalls_per_req': sum(sc.values()),
             'by_type': sc}
    return m


def host_fio(cell: Cell, args) -> Optional[float]:
    """IOPS of fio on the host on the same file, queues x depth, or None."""
    img = image(cell.backend, args.out)
    if img is None:
        return None
    aio = BACKENDS[cell.backend][1].split('=')[1]
    engine = FIO_ENGINE[aio]
    jobs, depth = cell.queues, cell.depth
    if engine == 'psync':           # QEMU's thread pool: up to 64 workers
        jobs, depth = min(64, cell.queues * cell.depth), 1
    cmd = ['fio', '--name=bound', f'--filename={img}', '--direct=1',
           f'--ioengine={engine}', f'--rw={cell.rw}', '--bs=4k', f'--iodepth={depth}',
           f'--numjobs={jobs}', '--group_reporting', '--time_based',
           f'--runtime={args.duration}', f'--ramp_time={args.ramp}',
           '--output-format=json']
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False)
    if p.returncode != 0:
        die(f'host fio for {cell.name} failed:\n{p.stderr.strip()}\ncommand: {" ".join(cmd)}')
    job = json.loads(p.stdout[p.stdout.find('{'):])['jobs'][0]
    return job['read']['iops'] + job['write']['iops']


def med(runs: List[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def spread(runs: List[dict], key: str) -> float:
    """(max - min) / median, in percent: how noisy the cell was."""
    v = [r[key] for r in runs]
    m = statistics.median(v)
    return 100 * (max(v) - min(v)) / m if m else 0.0


def ratio(a: float, b: float) -> str:
    return f'{a / b:.2f}' if b else '-'


def report(res: dict, builds: List[str]) -> str:
    a, b = builds
    L = [f'Machine: {res["machine"]}', '',
         f'Command: `{res["command"]}` ({res["mode"]} mode, {res["reps"]} runs per build '
         f'and cell, alternated; {res["duration"]} s measured after {res["ramp"]} s ramp; '
         'medians; spread = (max-min)/median of the runs).']
    if res['cells']:
        L += ['', 'The device path: bench/vblk-load drives virtio-blk-pci on one IOThread, '
              'interrupt mode, 4 KiB, EVENT_IDX on.', '',
              f'| cell | {a} IOPS | {b} IOPS | {b}/{a} | spread {a}, {b} | host fio '
              f'| {b}/fio | IOThread µs/req {a}, {b} | QEMU µs/req {a}, {b} '
              f'| notif/req {a}, {b} | p50 µs {a}, {b} | p99 µs {a}, {b} |',
              '|' + ' --- |' * 12]
    for name, c in res['cells'].items():
        ra, rb = c['runs'][a], c['runs'][b]
        fio = c.get('host_fio_iops')
        L.append(
            f'| {name} | {med(ra, "iops") / 1e3:.1f}k | {med(rb, "iops") / 1e3:.1f}k '
            f'| **{ratio(med(rb, "iops"), med(ra, "iops"))}** '
            f'| {spread(ra, "iops"):.0f}%, {spread(rb, "iops"):.0f}% '
            f'| {f"{fio / 1e3:.1f}k" if fio else "-"} '
            f'| {ratio(med(rb, "iops"), fio) if fio else "-"} '
            f'| {med(ra, "iothread_us_per_req"):.2f}, {med(rb, "iothread_us_per_req"):.2f} '
            f'| {med(ra, "qemu_us_per_req"):.2f}, {med(rb, "qemu_us_per_req"):.2f} '
            f'| {med(ra, "notif_per_req"):.3f}, {med(rb, "notif_per_req"):.3f} '
            f'| {med(ra, "p50_us"):.0f}, {med(rb, "p50_us"):.0f} '
            f'| {med(ra, "p99_us"):.0f}, {med(rb, "p99_us"):.0f} |')
    polls = [(n, c) for n, c in res['cells'].items() if c['poll'] == 0]
    if polls:
        L += ['', 'IOThread polling: CPU per request with the default poll-max-ns minus '
              'with poll-max-ns=0 (which does not poll), same cell otherwise.', '',
              f'| cell | polling µs/req {a} | {b} | work µs/req (poll-max-ns=0) {a} | {b} |',
              '| --- | --- | --- | --- | --- |']
        for n, c in polls:
            base_cell = n.replace(' poll-max-ns=0', '')
            if base_cell not in res['cells']:
                continue
            d = res['cells'][base_cell]['runs']
            L.append(f'| {base_cell} | '
                     + ' | '.join(f'{med(d[x], "iothread_us_per_req") - med(c["runs"][x], "iothread_us_per_req"):.2f}'
                                  for x in builds) + ' | '
                     + ' | '.join(f'{med(c["runs"][x], "iothread_us_per_req"):.2f}' for x in builds)
                     + ' |')
    if res['strace']:
        L += ['', 'Syscalls per request under strace (`vblk-load --strace`; strace slows '
              'QEMU several times, so only the counts mean something). Submissions are '
              '`io_submit` + `io_uring_enter`; `write` includes the guest-notifier eventfd '
              'writes.', '',
              f'| cell | submissions {a} | {b} | {b}/{a} | write {a} | {b} | all {a} | {b} |',
              '| --- | --- | --- | --- | --- | --- | --- | --- |']
        for n, s in res['strace'].items():
            sa, sb = s[a], s[b]
            L.append(f'| {n} | {med(sa, "submit_per_req"):.3f} | {med(sb, "submit_per_req"):.3f} '
                     f'| {ratio(med(sb, "submit_per_req"), med(sa, "submit_per_req"))} '
                     f'| {med(sa, "write_per_req"):.3f} | {med(sb, "write_per_req"):.3f} '
                     f'| {med(sa, "syscalls_per_req"):.2f} | {med(sb, "syscalls_per_req"):.2f} |')
    if res['guest']:
        L += guest_report(res, builds)
    L += ['', 'Plots: ' + ', '.join(f'[{p}]({p})' for p in res['plots'])]
    return '\n'.join(L) + '\n'


def plots(res: dict, builds: List[str], out: str) -> List[str]:
    """PNG plots with gnuplot; returns the file names."""
    made = []
    gp = ['set terminal pngcairo noenhanced size 900,500 font "sans,10"', 'set grid ytics',
          'set key top left']
    # IOPS against queue depth: one line per backend and build (randread, 1 queue)
    series = {}
    for c in res['cells'].values():
        if c['rw'] == 'randread' and c['queues'] == 1 and c['poll'] is None:
            for x in builds:
                series.setdefault((c['backend'], x), []).append(
                    (c['depth'], med(c['runs'][x], 'iops')))
    if any(len(v) > 1 for v in series.values()):
        lines = []
        for (bk, x), pts in sorted(series.items()):
            if len(pts) < 2:
                continue
            dat = os.path.join(out, f'iops-{bk}-{x}.dat')
            with open(dat, 'w', encoding='utf-8') as f:
                f.writelines(f'{d} {v}\n' for d, v in sorted(pts))
            dash = 'dt 1' if x == builds[1] else 'dt 2'
            lines.append(f'"{dat}" using 1:2 with linespoints {dash} title "{bk} {x}"')
        gp += ['set output "' + os.path.join(out, 'iops.png') + '"',
               'set title "IOPS against queue depth (4 KiB randread, 1 queue, 1 IOThread)"',
               'set logscale x 2', 'set xlabel "queue depth"', 'set ylabel "IOPS"',
               'plot ' + ', '.join(lines), 'unset logscale x']
        made.append('iops.png')
    # CPU per request and syscalls per request: clustered bars, base and fork
    bars = []
    if res['cells']:
        bars.append(('cpu.png', 'QEMU CPU per request, µs (IOThread / all threads)',
                     [(n, [med(c['runs'][x], k)
                           for k in ('iothread_us_per_req', 'qemu_us_per_req')
                           for x in builds]) for n, c in res['cells'].items()],
                     [f'IOThread {x}' for x in builds] + [f'all {x}' for x in builds]))
    if res['strace']:
        bars.append(('syscalls.png', 'Syscalls per request under strace',
                     [(n, [med(s[x], k) for k in ('submit_per_req', 'write_per_req')
                           for x in builds]) for n, s in res['strace'].items()],
                     [f'submissions {x}' for x in builds] + [f'write {x}' for x in builds]))
    if res['guest']:
        bars.append(('guest.png', 'TCG guest fio: kIOPS, and IOThread CPU µs per request',
                     [(n, [med(g['runs'][x], 'iops') / 1e3 for x in builds]
                       + [med(g['runs'][x], 'IOThread_us_per_req') for x in builds])
                      for n, g in res['guest'].items()],
                     [f'kIOPS {x}' for x in builds] + [f'IOThread µs/req {x}' for x in builds]))
    for png, title, rows, cols in bars:
        dat = os.path.join(out, png.replace('.png', '.dat'))
        with open(dat, 'w', encoding='utf-8') as f:
            for n, v in rows:
                f.write('"' + n.replace(' randread', '').replace('poll-max-ns=', 'poll')
                        + '" ' + ' '.join(f'{x:.4f}' for x in v) + '\n')
        gp += [f'set output "{os.path.join(out, png)}"', f'set title "{title}"',
               'set style data histograms', 'set style histogram clustered gap 1',
               'set style fill solid 0.8 border -1', 'set xtics rotate by -30',
               'set xlabel ""', 'set ylabel ""', 'set key top left',
               'plot ' + ', '.join(f'"{dat}" using {i + 2}' + (':xtic(1)' if i == 0 else '')
                                   + f' title "{t}"' for i, t in enumerate(cols)),
               'set xtics norotate']
        made.append(png)
    if not made:
        return made
    script = os.path.join(out, 'plots.gp')
    with open(script, 'w', encoding='utf-8') as f:
        f.write('\n'.join(gp) + '\n')
    p = subprocess.run(['gnuplot', script], stderr=subprocess.PIPE, text=True, check=False)
    if p.returncode != 0:
        die(f'gnuplot {script} failed:\n{p.stderr}')
    return made


def guest_pass(args, res: dict) -> None:
    """Guest fio A/B: the TCG guest of tests/guest runs fio 4 KiB randread on
    a virtio-blk disk on an IOThread (tmpfs file); a timing run and a run
    under strace per build and repetition (bench/syscalls.py)."""
    sys.path.insert(0, os.path.join(ROOT, 'bench'))
    import syscalls  # pylint: disable=import-outside-toplevel
    guest = syscalls.harness.build_guest()
    cells = [('native', 32), ('io_uring', 32)]
    if args.full:
        cells = [('native', 1)] + cells + [('threads', 32)]
    t0 = time.time()
    for aio, qd in cells:
        g = {'aio': aio, 'qd': qd, 'runs': {b: [] for b in args.builds},
             'strace': {b: [] for b in args.builds}}
        for rep in range(args.reps):
            for b in (args.builds if rep % 2 == 0 else args.builds[::-1]):
                for trace in (False, True):
                    with tempfile.TemporaryDirectory(prefix='iobatch-bench-',
                                                     dir='/dev/shm') as tmp:
                        try:
                            r = syscalls.one_run(b, aio, qd, args.guest_secs, guest, tmp,
                                                 trace=trace)
                        except RuntimeError as e:
                            die(f'guest {b} aio={aio} iodepth={qd}: {e}')
                    g['strace' if trace else 'runs'][b].append(r)
        res['guest'][f'guest {aio} d{qd}'] = g
        print(f'[guest {time.time() - t0:.0f}s] aio={aio} iodepth={qd}: '
              + ', '.join(f'{b} {med(g["runs"][b], "iops") / 1e3:.1f}k IOPS'
                          for b in args.builds), flush=True)


def guest_report(res: dict, builds: List[str]) -> List[str]:
    a, b = builds
    L = ['', 'Guest fio A/B: the TCG guest of tests/guest, fio 4 KiB randread '
         '(libaio, O_DIRECT) on virtio-blk on one IOThread, raw file on tmpfs; '
         f'{res["guest_secs"]} s measured per run. CPU per request of QEMU\'s thread '
         'groups from schedstat (vCPU: the TCG threads that emulate the guest); '
         'submissions (`io_submit`/`io_uring_enter`, any thread) and notifications '
         '(`write` by the IOThread: guest-notifier eventfd writes) per request from '
         'a separate run under strace.', '',
         f'| cell | {a} IOPS | {b} IOPS | {b}/{a} | p50 µs {a}, {b} | p99 µs {a}, {b} '
         f'| IOThread µs/req {a}, {b} | main µs/req {a}, {b} | vCPU µs/req {a}, {b} '
         f'| submissions/req {a}, {b} | notifications/req {a}, {b} |',
         '|' + ' --- |' * 11]
    for n, g in res['guest'].items():
        r, s = g['runs'], g['strace']

        def pair(d, k, fmt='.2f'):
            return ', '.join(format(med(d[x], k), fmt) for x in builds)
        L.append(f'| {n} | {med(r[a], "iops") / 1e3:.2f}k | {med(r[b], "iops") / 1e3:.2f}k '
                 f'| **{ratio(med(r[b], "iops"), med(r[a], "iops"))}** '
                 f'| {pair(r, "p50_us", ".0f")} | {pair(r, "p99_us", ".0f")} '
                 f'| {pair(r, "IOThread_us_per_req")} | {pair(r, "main_us_per_req")} '
                 f'| {pair(r, "vCPU_us_per_req", ".0f")} '
                 f'| {pair(s, "submissions_per_req", ".3f")} '
                 f'| {pair(s, "notifications_per_req", ".3f")} |')
    twins = []
    for n, g in res['guest'].items():
        dev = res['cells'].get(f'tmpfs-{g["aio"]} randread q1 d{g["qd"]}')
        if dev:
            twins.append(f'{g["aio"]} depth {g["qd"]}: ' + ', '.join(
                f'{med(dev["runs"][x], "iops") / med(g["runs"][x], "iops"):.1f}x ({x})'
                for x in builds))
    if twins:
        L += ['', 'IOPS of the load generator over those of the TCG guest, same backend: '
              + '; '.join(twins) + '.']
    return L


def machine() -> str:
    cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo', encoding='utf-8')
                if l.startswith('model name')), '?')
    mem = next(int(l.split()[1]) for l in open('/proc/meminfo', encoding='utf-8')
               if l.startswith('MemTotal'))
    load = os.getloadavg()[0]
    return (f'{os.cpu_count()} CPUs ({cpu}), {mem >> 20} GiB, Linux {os.uname().release}; '
            f'load average {load:.2f} at the start')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    ap.add_argument('--full', action='store_true', help='the whole matrix (about an hour)')
    ap.add_argument('--reps', type=int, default=5, help='runs per build and cell (default 5)')
    ap.add_argument('--cells', metavar='PATTERN',
                    help='only the cells whose name matches this fnmatch pattern, '
                         'e.g. "tmpfs-io_uring*"')
    ap.add_argument('--duration', type=float, default=3, help='seconds measured per run')
    ap.add_argument('--ramp', type=float, default=0.5, help='seconds before measuring')
    ap.add_argument('--builds', nargs=2, default=['base', 'fork'], metavar=('A', 'B'))
    ap.add_argument('--no-strace', action='store_true', help='skip the syscall pass')
    ap.add_argument('--guest', action='store_true',
                    help='add the guest fio A/B (TCG guest; --full implies it)')
    ap.add_argument('--guest-only', action='store_true',
                    help='only the guest fio A/B, no device pass')
    ap.add_argument('--guest-secs', type=int, default=8, help='guest fio seconds per run')
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'bench'))
    ap.add_argument('--from', dest='from_json', metavar='JSON',
                    help='measure nothing: remake the report and plots of a bench.json')
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json, encoding='utf-8') as f:
            res = json.load(f)
        os.makedirs(args.out, exist_ok=True)
        res['plots'] = plots(res, res['builds'], args.out)
        with open(os.path.join(args.out, 'bench.md'), 'w', encoding='utf-8') as f:
            f.write(report(res, res['builds']))
        print(f'bench: wrote {args.out}/bench.md, ' + ', '.join(res['plots']))
        return
    if args.reps < 1 or args.duration <= 0 or args.ramp < 0:
        ap.error('--reps must be >= 1, --duration > 0, --ramp >= 0')
    for b in args.builds:
        if not os.access(os.path.join(ROOT, 'build', b, 'qemu-system-x86_64'), os.X_OK):
            die(f'no build/{b}/qemu-system-x86_64: run "make build" first')
    for tool in ('fio', 'gnuplot') + (() if args.no_strace else ('strace',)):
        if subprocess.run(['sh', '-c', f'command -v {tool}'], stdout=subprocess.DEVNULL,
                          check=False).returncode:
            die(f'{tool} is not installed: run "make deps"')
    if not os.access(LOADGEN, os.X_OK):
        die('bench/vblk-load/vblk-load is missing: run "make vblk-load"')
    os.makedirs(args.out, exist_ok=True)

    cells = [] if args.guest_only else matrix(args.full)
    if args.cells and not args.guest_only:
        cells = [c for c in cells if fnmatch.fnmatch(c.name, args.cells)]
        if not cells:
            die(f'no cell matches {args.cells!r}; the cells are:\n  '
                + '\n  '.join(c.name for c in matrix(args.full)))
    res = {'machine': machine(), 'mode': 'full' if args.full else 'quick',
           'command': shlex.join(['python3', 'bench/run.py'] + sys.argv[1:]),
           'reps': args.reps, 'duration': args.duration, 'ramp': args.ramp,
           'builds': args.builds, 'cells': {}, 'strace': {}, 'guest': {},
           'guest_secs': args.guest_secs, 'plots': []}
    t0 = time.time()
    for i, c in enumerate(cells):
        runs: Dict[str, List[dict]] = {b: [] for b in args.builds}
        for rep in range(args.reps):
            order = args.builds if rep % 2 == 0 else args.builds[::-1]
            for b in order:
                runs[b].append(loadgen(b, c, args))
        fio = host_fio(c, args)
        res['cells'][c.name] = {'backend': c.backend, 'rw': c.rw, 'queues': c.queues,
                                'depth': c.depth, 'poll': c.poll, 'runs': runs,
                                'host_fio_iops': fio}
        a, b = (med(runs[x], 'iops') for x in args.builds)
        print(f'[{i + 1}/{len(cells)} {time.time() - t0:.0f}s] {c.name}: '
              f'{args.builds[0]} {a / 1e3:.1f}k, {args.builds[1]} {b / 1e3:.1f}k IOPS '
              f'({ratio(b, a)})' + (f', host fio {fio / 1e3:.1f}k' if fio else ''), flush=True)
    if not args.no_strace:
        sc = [c for c in cells if c.depth == 32 and c.queues == 1 and c.rw == 'randread'
              and c.poll is None]
        for c in sc:
            st: Dict[str, List[dict]] = {b: [] for b in args.builds}
            for rep, b in itertools.product(range(1 if not args.full else args.reps),
                                            args.builds):
                st[b].append(loadgen(b, c, args, strace=True))
            res['strace'][c.name] = st
            print(f'[strace {time.time() - t0:.0f}s] {c.name}: submissions/req '
                  + ', '.join(f'{b} {med(st[b], "submit_per_req"):.3f}' for b in args.builds),
                  flush=True)
    if args.guest or args.guest_only or args.full:
        guest_pass(args, res)
    res['plots'] = plots(res, args.builds, args.out)
    with open(os.path.join(args.out, 'bench.json'), 'w', encoding='utf-8') as f:
        json.dump(res, f, indent=1)
    md = report(res, args.builds)
    with open(os.path.join(args.out, 'bench.md'), 'w', encoding='utf-8') as f:
        f.write(md)
    print('\n' + md)
    print(f'bench: {time.time() - t0:.0f} s; wrote {args.out}/bench.md, bench.json, '
          + ', '.join(res['plots']))


if __name__ == '__main__':
    main()
