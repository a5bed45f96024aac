#!/usr/bin/env python3
"""make bench: the fork's virtio-blk path against the base, side by side.

    python3 bench/run.py [--full] [--reps N] [--builds base fork ...] [--upstream]
                         [--out DIR]

Drives one virtio-blk-pci device of each build with the guest-less load
generator (bench/vblk-load, interrupt mode, one IOThread), in rounds: every
build runs once per round, in an order that reverses from round to round
(A B, B A, ...).  A round's ratio of a build to the first build is one
paired observation; the report gives the median of those ratios with a
bootstrap confidence interval, and marks a cell "within noise" when the
interval contains 1.  Rounds are added until the interval is narrow enough
(--ci-width) or the cell's time is up (--cell-time).  Beside each file
backend row, fio on the host gives the bound on the same file.  A second
pass under strace counts QEMU's syscalls per request.  Writes DIR/bench.json
(every run), DIR/bench.md (the tables) and DIR/*.png (gnuplot).

The default (quick) mode takes 5-8 minutes (`make bench`); --full covers the
matrix of docs/benchmarks.md and takes 1.5-4 hours.

--upstream adds build/upstream (`make upstream`: the trixie line's base,
Debian trixie's QEMU 10.0 as pinned in lines/trixie/base.pin, built with
the same configure line) to the builds; the report then sets every
other build's ratio to it beside its ratio to the first build, and gives
each build's CPU per request of each thread.  That QEMU has none of the
fork's counters (x-query-virtio-queue-stats): the report says so.
"""

import argparse
import fnmatch
import itertools
import json
import math
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

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
# The depth sweeps of the matrix: plots join two points only when they are
# neighbours in one of these (and so nothing was skipped between them).
SWEEPS = ((1, 8, 32, 128), (8, 16, 32, 64))
BUCKETS = ('1', '2-3', '4-7', '8-15', '16-31', '32-63', '64-127', '128+')
CONFIDENCE = 0.95
BOOTSTRAP = 2000


class Build:
    """One entry of --builds: a build directory and extra device properties.

    >>> b = Build.parse('fork')
    >>> (b.label, b.build, b.props)
    ('fork', 'fork', '')
    >>> b = Build.parse('first=fork:x-notify=first,x-batch-min=4')
    >>> (b.label, b.build, b.props)
    ('first', 'fork', 'x-notify=first,x-batch-min=4')
    >>> Build.parse('fork:x-notify=end').label
    'fork:x-notify=end'
    >>> Build.parse('=fork')
    Traceback (most recent call last):
    ...
    ValueError: '=fork': empty label
    >>> Build.parse('x=fork:')
    Traceback (most recent call last):
    ...
    ValueError: 'x=fork:': empty properties after ':'
    """

    def __init__(self, label: str, build: str, props: str):
        self.label, self.build, self.props = label, build, props

    @classmethod
    def parse(cls, spec: str) -> 'Build':
        head, sep, props = spec.partition(':')
        if sep and not props:
            raise ValueError(f'{spec!r}: empty properties after \':\'')
        if props and (props.startswith(',') or props.endswith(',') or ' ' in props):
            raise ValueError(f'{spec!r}: properties are comma-separated NAME=VALUE')
        label, eq, build = head.rpartition('=')
        if not eq:
            label, build = spec, head
        elif not label:
            raise ValueError(f'{spec!r}: empty label')
        if not build:
            raise ValueError(f'{spec!r}: no build')
        if not re.fullmatch(r'[\w.:=,+/-]+', label):
            raise ValueError(f'{spec!r}: the label may not contain spaces or quotes')
        return cls(label, build, props)

    @property
    def qemu(self) -> str:
        """build/NAME/qemu-system-x86_64, or DIR/qemu-system-x86_64 for a path."""
        d = os.path.abspath(self.build) if '/' in self.build \
            else os.path.join(ROOT, 'build', self.build)
        return os.path.join(d, 'qemu-system-x86_64')

    def device_properties(self) -> set:
        """The properties of this QEMU's virtio-blk-pci."""
        p = subprocess.run([self.qemu, '-device', 'virtio-blk-pci,help'], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, check=False)
        return set(re.findall(r'^\s+([\w.-]+)=', p.stdout, re.M))

    def has_property(self, name: str) -> bool:
        return name in self.device_properties()

    def check_props(self) -> Optional[str]:
        """None, or why QEMU will refuse the properties."""
        if not self.props:
            return None
        known = self.device_properties()
        bad = [kv.split('=')[0] for kv in self.props.split(',') if kv.split('=')[0] not in known]
        if bad:
            return (f'{self.qemu} has no virtio-blk-pci propert{"ies" if len(bad) > 1 else "y"} '
                    + ', '.join(bad))
        return None

    def spec(self) -> dict:
        return {'build': self.build, 'props': self.props}


def parse_builds(specs: Sequence[str]) -> List[Build]:
    """The --builds entries; labels must be unique.

    >>> [b.label for b in parse_builds(['base', 'fork', 'f=fork:x-a=1'])]
    ['base', 'fork', 'f']
    >>> parse_builds(['fork', 'fork'])
    Traceback (most recent call last):
    ...
    ValueError: label 'fork' given twice; name the entries LABEL=BUILD[:PROPS]
    """
    out: List[Build] = []
    for s in specs:
        b = Build.parse(s)
        if any(o.label == b.label for o in out):
            raise ValueError(f'label {b.label!r} given twice; name the entries '
                             'LABEL=BUILD[:PROPS]')
        out.append(b)
    return out


def upstream_labels(res: dict) -> List[str]:
    """The labels of the run's upstream comparison builds (build/upstream,
    or a path whose last part is "upstream"), which the report compares
    the other builds with.

    >>> upstream_labels({'builds': ['base', 'fork', 'u'], 'build_specs': {
    ...     'base': {'build': 'base', 'props': ''}, 'fork': {'build': 'fork', 'props': ''},
    ...     'u': {'build': 'upstream', 'props': ''}}})
    ['u']
    >>> upstream_labels({'builds': ['base', 'upstream']})
    ['upstream']
    >>> upstream_labels({'builds': ['base', 'fork']})
    []
    """
    specs = res.get('build_specs') or {}
    out = []
    for b in res['builds']:
        build = specs.get(b, {}).get('build', b)
        if os.path.basename(os.path.normpath(build)) == 'upstream':
            out.append(b)
    return out


def add_upstream(specs: List[str]) -> List[str]:
    """--upstream: the builds with "upstream" appended unless one is there.

    >>> add_upstream(['base', 'fork'])
    ['base', 'fork', 'upstream']
    >>> add_upstream(['base', 'fork', '10.0=upstream'])
    ['base', 'fork', '10.0=upstream']
    """
    have = upstream_labels({'builds': [Build.parse(x).label for x in specs],
                            'build_specs': {Build.parse(x).label: Build.parse(x).spec()
                                            for x in specs}})
    return specs if have else specs + ['upstream']


def variant(threads: bool, iothreads: int) -> str:
    """What a cell's name says after its depth about its threads."""
    return ((' threads' if threads else '')
            + (f' iothreads={iothreads}' if iothreads > 1 else ''))


class Cell:
    """One configuration, run on every build.

    iothreads > 1 spreads the queues over that many IOThreads
    (iothread-vq-mapping, QEMU 9.0 and later):

    >>> Cell('tmpfs-native', queues=4, depth=16, threads=True, iothreads=2).name
    'tmpfs-native randread q4 d16 threads iothreads=2'
    >>> Cell('tmpfs-native', poll=0).name
    'tmpfs-native randread q1 d32 poll-max-ns=0'
    """

    def __init__(self, backend: str, rw: str = 'randread', queues: int = 1,
                 depth: int = 32, poll: Optional[int] = None, threads: bool = False,
                 iothreads: int = 1):
        self.backend, self.rw, self.queues, self.depth, self.poll, self.threads = \
            backend, rw, queues, depth, poll, threads
        self.iothreads = iothreads

    @property
    def name(self) -> str:
        n = f'{self.backend} {self.rw} q{self.queues} d{self.depth}'
        n += variant(self.threads, self.iothreads)
        return n + (f' poll-max-ns={self.poll}' if self.poll is not None else '')


def matrix(full: bool, mapping: bool = False) -> List[Cell]:
    """The cells of a run; mapping: every build has iothread-vq-mapping, so
    the 4-queue cell is also run with its queues on 2 IOThreads.

    >>> [c.name for c in matrix(False, mapping=True)][-2:]
    ['tmpfs-native randread q4 d16 threads', 'tmpfs-native randread q4 d16 threads iothreads=2']
    >>> any(c.iothreads > 1 for c in matrix(False))
    False
    """
    mq = [Cell('tmpfs-native', queues=4, depth=16, threads=True)]
    if mapping:
        mq.append(Cell('tmpfs-native', queues=4, depth=16, threads=True, iothreads=2))
    if not full:
        return [Cell('null'),
                Cell('tmpfs-native', depth=1), Cell('tmpfs-native'),
                Cell('tmpfs-native', poll=0),
                Cell('tmpfs-io_uring'), Cell('tmpfs-threads')] + mq
    cells = [Cell(b, rw, q, d)
             for b in BACKENDS for rw in ('randread', 'randwrite')
             for q in (1, 4) for d in (1, 8, 32, 128)
             if not (b == 'null' and rw == 'randwrite')]
    cells += [Cell(b, depth=d, poll=0) for b in ('tmpfs-native', 'tmpfs-io_uring')
              for d in (1, 32)]
    # many queues on one IOThread, a driver thread per queue (upstream's case)
    cells += [Cell(b, queues=q, depth=d, threads=True)
              for b in ('tmpfs-native', 'tmpfs-io_uring') for q in (4, 8)
              for d in (8, 16, 32, 64)]
    # and spread over 2 IOThreads, where every build can
    if mapping:
        cells += [Cell(b, queues=q, depth=d, threads=True, iothreads=2)
                  for b in ('tmpfs-native', 'tmpfs-io_uring') for q in (4, 8)
                  for d in (16, 64)]
    return cells


def die(msg: str) -> None:
    print(f'bench: error: {msg}', file=sys.stderr)
    sys.exit(1)


# ---- statistics ----

def median(v: Sequence[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def bootstrap_ci(v: Sequence[float], conf: float = CONFIDENCE,
                 n: int = BOOTSTRAP) -> Tuple[float, float, float]:
    """(median, low, high): the median of v and a percentile bootstrap
    interval for it.  The generator is seeded afresh, so the interval
    depends only on v: a report can be remade from its JSON.

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0, 1.0)
    >>> m, lo, hi = bootstrap_ci([0.90, 0.95, 1.00, 1.05, 1.10])
    >>> (m, lo, hi)             # 5 pairs: the interval is their whole range
    (1.0, 0.9, 1.1)
    >>> m, lo, hi = bootstrap_ci([0.9 + 0.01 * i for i in range(21)])
    >>> round(m, 2), lo > 0.9, hi < 1.1   # more pairs: narrower
    (1.0, True, True)
    >>> bootstrap_ci([])
    (nan, nan, nan)
    """
    if not v:
        return (math.nan,) * 3
    rng = random.Random(1)
    k = len(v)
    meds = sorted(median([v[rng.randrange(k)] for _ in range(k)]) for _ in range(n))
    a = (1 - conf) / 2
    return median(v), meds[int(a * n)], meds[min(n - 1, int((1 - a) * n))]


def ratios(a: Sequence[dict], b: Sequence[dict], key: str) -> List[float]:
    """Per round, b's value over a's (rounds where a's is 0 are skipped)."""
    return [y[key] / x[key] for x, y in zip(a, b)
            if x.get(key) and y.get(key) is not None]


def verdict(lo: float, hi: float) -> str:
    """Where the interval of a ratio lies.

    >>> verdict(0.91, 0.97), verdict(0.98, 1.03), verdict(1.02, 1.2)
    ('below', 'within noise', 'above')
    """
    if math.isnan(lo):
        return '-'
    return 'below' if hi < 1 else 'above' if lo > 1 else 'within noise'


def fmt_ci(t: Tuple[float, float, float], digits: int = 2) -> str:
    """'0.95 [0.90, 1.01]'

    >>> fmt_ci((0.951, 0.9, 1.012))
    '0.95 [0.90, 1.01]'
    """
    m, lo, hi = t
    if math.isnan(m):
        return '-'
    return f'{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]'


def geomean(v: Sequence[float]) -> float:
    """The geometric mean.

    >>> round(geomean([0.5, 2.0, 1.0]), 6)
    1.0
    """
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan


def med(runs: List[dict], key: str) -> float:
    v = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(v) if v else math.nan


def spread(runs: List[dict], key: str) -> float:
    """(max - min) / median, in percent: how noisy the cell was."""
    v = [r[key] for r in runs]
    m = statistics.median(v)
    return 100 * (max(v) - min(v)) / m if m else 0.0


def ratio(a: float, b: float) -> str:
    return f'{a / b:.2f}' if b and not math.isnan(a) and not math.isnan(b) else '-'


# ---- machine load ----

def proc_stat() -> Tuple[int, int, int]:
    """(total, idle, steal) clock ticks of all CPUs, from /proc/stat."""
    with open('/proc/stat', encoding='ascii') as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4], v[7]


def load_between(a: Tuple[int, int, int], b: Tuple[int, int, int]) -> dict:
    """Busy and stolen share of all CPUs between two proc_stat() samples, %.

    >>> load_between((1000, 500, 10), (2000, 1250, 60))
    {'busy_pct': 25.0, 'steal_pct': 5.0}
    """
    dt = b[0] - a[0]
    if dt <= 0:
        return {'busy_pct': 0.0, 'steal_pct': 0.0}
    return {'busy_pct': 100 * (dt - (b[1] - a[1])) / dt, 'steal_pct': 100 * (b[2] - a[2]) / dt}


def load_before(secs: float) -> dict:
    """How loaded the machine is while we do nothing (others' load)."""
    a = proc_stat()
    time.sleep(secs)
    d = load_between(a, proc_stat())
    d['loadavg'] = list(os.getloadavg())
    d['secs'] = secs
    return d


# ---- the runs ----

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


def metrics(r: dict) -> dict:
    """The numbers of one vblk-load --json result that the report uses.

    >>> r = {'iops': 1000.0, 'lat_us': {'p50': 30.0, 'p99': 90.0},
    ...      'kicks_per_req': 0.03, 'notifications_per_req': 0.031,
    ...      'qemu_cpu_us_per_req': 5.0, 'loadgen_cpu_us_per_req': 2.0,
    ...      'threads': [{'name': 'IO iothread0', 'cpu_us_per_req': 3.0},
    ...                  {'name': 'main', 'cpu_us_per_req': 1.0}],
    ...      'qemu_stats': {'window': {'completions': 3000, 'notifications': 96,
    ...          'suppressed': 2800, 'merged': 104, 'batches': [1, 0, 0, 0, 0, 3, 0, 0],
    ...          'notifications_per_req': 0.032, 'suppressed_per_req': 0.9333,
    ...          'merged_per_req': 0.0347,
    ...          'queues': [{'queue': 0, 'completions': 3000, 'notifications': 96,
    ...                      'suppressed': 2800, 'merged': 104,
    ...                      'batches': [1, 0, 0, 0, 0, 3, 0, 0]}]},
    ...          'run': {'completions': 4000, 'reaped': 4000, 'notifications': 130,
    ...                  'notifications_seen': 128}, 'check': 'ok', 'problems': []}}
    >>> m = metrics(r)
    >>> m['iothread_us_per_req'], m['qemu_notif_per_req'], m['qemu_batches']
    (3.0, 0.032, [1, 0, 0, 0, 0, 3, 0, 0])
    >>> m['qemu_queues'], m['qemu_check']
    ([{'notif_per_req': 0.032, 'suppressed_per_req': 0.9333, 'merged_per_req': 0.0347, 'batches': [1, 0, 0, 0, 0, 3, 0, 0]}], 'ok')
    >>> metrics(dict(r, qemu_stats=None))['qemu_notif_per_req'] is None
    True
    """
    threads = {t['name']: t['cpu_us_per_req'] for t in r['threads']}
    m = {'iops': r['iops'], 'p50_us': r['lat_us']['p50'], 'p99_us': r['lat_us']['p99'],
         'kicks_per_req': r['kicks_per_req'], 'notif_per_req': r['notifications_per_req'],
         'qemu_us_per_req': r['qemu_cpu_us_per_req'],
         'loadgen_us_per_req': r.get('loadgen_cpu_us_per_req'),
         # every IOThread of the device (vblk-load names them iothreadN)
         'iothread_us_per_req': sum(v for k, v in threads.items()
                                    if k.startswith('IO iothread')),
         'main_us_per_req': threads.get('main', 0.0),
         'worker_us_per_req': threads.get('worker', 0.0),
         'qtest_busy': r.get('qtest', {}).get('busy'),
         'qtest_waited': (r['qtest']['contended'] / r['qtest']['cmds']
                          if r.get('qtest', {}).get('cmds') else None),
         'qtest_wait_us': r.get('qtest', {}).get('wait_us_per_cmd'),
         'others_cpus': r.get('host', {}).get('others_cpus'),
         'steal_cpus': r.get('host', {}).get('steal_cpus'),
         'qemu_notif_per_req': None, 'qemu_suppressed_per_req': None,
         'qemu_merged_per_req': None, 'qemu_batches': None, 'qemu_queues': None,
         'qemu_check': None}
    def per(q: dict, k: str) -> float:
        return round(q[k] / q['completions'], 4) if q['completions'] else 0.0
    qs = r.get('qemu_stats')
    if qs:
        w = qs['window']
        m.update(qemu_notif_per_req=w['notifications_per_req'],
                 qemu_suppressed_per_req=w['suppressed_per_req'],
                 qemu_merged_per_req=w['merged_per_req'], qemu_batches=w['batches'],
                 qemu_queues=[{'notif_per_req': per(q, 'notifications'),
                               'suppressed_per_req': per(q, 'suppressed'),
                               'merged_per_req': per(q, 'merged'), 'batches': q['batches']}
                              for q in w['queues']],
                 qemu_check=qs['check'])
    return m


def pinnable(cell: Cell) -> bool:
    """Whether --pin can give each of the cell's IOThreads a CPU of its own
    and leave at least one CPU to everything else."""
    return cell.iothreads < len(os.sched_getaffinity(0))


def loadgen_cmd(build: Build, cell: Cell, duration: float, ramp: float, out: str,
                kick: str, qtest_log: str = 'none', pin: bool = False) -> List[str]:
    """The vblk-load command line of one run of a cell (--json output)."""
    cmd = [LOADGEN, '--qemu', build.qemu,
           '--json', '--mode', 'irq', '--rw', cell.rw, '--queues', str(cell.queues),
           '--depth', str(cell.depth), '--duration', str(duration),
           '--ramp', str(ramp), '--blockdev', blockdev(cell, out),
           '--timeout', '30', '--kick', kick, '--qtest-log', qtest_log]
    if cell.poll is not None:
        cmd += ['--poll-max-ns', str(cell.poll)]
    if cell.threads:
        cmd.append('--threads')
    if cell.iothreads > 1:
        cmd += ['--iothreads', str(cell.iothreads)]
    if build.props:
        cmd += ['--device-opts', build.props]
    if pin:
        cmd.append('--pin')
    return cmd


def loadgen(build: Build, cell: Cell, args, strace: bool = False) -> dict:
    cmd = loadgen_cmd(build, cell, args.duration, args.ramp, args.out, args.kick,
                      args.qtest_log, args.pin and pinnable(cell))
    if strace:
        cmd.append('--strace')
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False, timeout=args.duration + args.ramp + 120)
    if p.returncode != 0:
        die(f'{build.label} {cell.name}: vblk-load exited {p.returncode}:\n{p.stderr.strip()}\n'
            f'command: {shlex.join(cmd)}')
    r = json.loads(p.stdout)
    if strace:
        sc = r['syscalls_per_req']
        return {'submit_per_req': sc.get('io_submit', 0) + sc.get('io_uring_enter', 0),
                'write_per_req': sc.get('write', 0),
                'syscalls_per_req': sum(v for k, v in sc.items() if k != 'total'),
                'by_type': sc}
    m = metrics(r)
    m['load1'] = os.getloadavg()[0]
    return m


def run_cell(cell: Cell, builds: List[Build], args) -> Tuple[Dict[str, List[dict]], str]:
    """Rounds of one run per build, order reversed every round, until the
    IOPS ratios' intervals are narrower than --ci-width, --max-reps rounds
    were made, or another round would exceed --cell-time."""
    runs: Dict[str, List[dict]] = {b.label: [] for b in builds}
    ref = builds[0].label
    t0 = time.time()
    for rnd in itertools.count():
        for b in builds if rnd % 2 == 0 else builds[::-1]:
            runs[b.label].append(loadgen(b, cell, args))
        n = rnd + 1
        if n < args.reps:
            continue
        width = max(hi - lo for _, lo, hi in
                    (bootstrap_ci(ratios(runs[ref], runs[b.label], 'iops'))
                     for b in builds[1:]))
        if width <= args.ci_width:
            return runs, f'interval {width:.3f} <= {args.ci_width}'
        if n >= args.max_reps:
            return runs, f'--max-reps {args.max_reps} (interval {width:.3f})'
        spent = time.time() - t0
        if spent + spent / n > args.cell_time:
            return runs, f'--cell-time {args.cell_time:g} s (interval {width:.3f})'
    raise AssertionError('unreachable')


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


# ---- the report ----

CPU_METRICS = [('iothread_us_per_req', 'IOThread'), ('main_us_per_req', 'main loop (harness)'),
               ('worker_us_per_req', 'workers'), ('qemu_us_per_req', 'QEMU, all threads'),
               ('loadgen_us_per_req', 'vblk-load')]


def cell_ci(c: dict, ref: str, x: str, key: str) -> Tuple[float, float, float]:
    return bootstrap_ci(ratios(c['runs'][ref], c['runs'][x], key))


def pair(runs: Dict[str, List[dict]], a: str, b: str, key: str, fmt: str = '.2f',
         scale: float = 1, unit: str = '') -> str:
    """'3.10, 3.41': the medians of a key for two builds."""
    return ', '.join('-' if math.isnan(v) else format(v / scale, fmt) + unit
                     for v in (med(runs[a], key), med(runs[b], key)))


def load_report(res: dict) -> List[str]:
    ld = res.get('load')
    if not ld:
        return []
    b, d = ld['before'], ld.get('during', {})
    la = b['loadavg']
    L = [f'Machine load: before the run, over {b["secs"]:g} s idle, the CPUs were '
         f'{b["busy_pct"]:.0f}% busy (other jobs) and {b["steal_pct"]:.1f}% stolen, load '
         f'average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}.']
    if d:
        L[0] += (f' During the run: {d["busy_pct"]:.0f}% busy (this benchmark included), '
                 f'{d["steal_pct"]:.1f}% stolen, load average at the runs median '
                 f'{d["load1_median"]:.2f}, max {d["load1_max"]:.2f}; CPUs used by other '
                 f'processes within the measured windows: median {d["others_median"]:.2f}, '
                 f'max {d["others_max"]:.2f}.')
    return L


def pin_note(res: dict) -> str:
    """What the report says about --pin.

    >>> pin_note({'cells': {}})
    ''
    >>> n = pin_note({'pin': True, 'cells': {'a': {'pinned': True}, 'b': {'pinned': False}}})
    >>> n[:40]
    ' IOThreads pinned (--pin): each on a CPU'
    >>> n.split('. ')[-1]
    'Unpinned (as many IOThreads as CPUs): b.'
    """
    if not res.get('pin'):
        return ''
    note = (' IOThreads pinned (--pin): each on a CPU of its own, every other thread '
            '(QEMU\'s main loop, its workers, the driver threads) on the other CPUs, '
            'as a host that pins its IOThreads would run them.')
    loose = [n for n, c in res['cells'].items() if not c.get('pinned')]
    if loose:
        note += ' Unpinned (as many IOThreads as CPUs): ' + ', '.join(loose) + '.'
    return note


def report(res: dict) -> str:
    builds = res['builds']
    ref = builds[0]
    specs = res.get('build_specs', {})
    st = res.get('stats', {})
    L = [f'Machine: {res["machine"]}', '',
         f'Command: `{res["command"]}` ({res["mode"]} mode; {res["duration"]} s measured '
         f'after {res["ramp"]} s ramp per run).']
    if res.get('ref'):
        L[-1] += (f' Report remade from its bench.json with `--ref {res["ref"]}`: '
                  f'ratios against **{res["ref"]}**.')
    if len(specs) and any(s['props'] or s['build'] != b for b, s in specs.items()):
        L += ['', 'Builds: ' + '; '.join(
            f'**{b}** = build `{s["build"]}`' + (f' with `{s["props"]}`' if s['props'] else '')
            for b, s in specs.items()) + '.']
    if st:
        L += ['', f'Method: rounds of one run per build, the order reversed every round; '
              f'a round\'s ratio to **{ref}** is one observation. Ratios are the median over '
              f'the rounds with a {100 * st["confidence"]:.0f}% percentile-bootstrap interval '
              f'({st["bootstrap"]} resamples, seeded: reproducible from bench.json). Rounds per '
              f'cell: at least {st["reps"]}, then more until the IOPS intervals are at most '
              f'{st["ci_width"]} wide, up to {st["max_reps"]} rounds or {st["cell_time"]:g} s. '
              'Verdict: below or above when the interval excludes 1, otherwise within noise. '
              'CPU per request (schedstat) and notifications per request move less with '
              'the machine\'s load than IOPS do: lower is better there.']
    else:
        L += ['', f'Method: {res["reps"]} runs per build and cell, alternated; ratios are '
              'medians of the per-pair ratios with a bootstrap interval.']
    L += [''] + load_report(res) if res.get('load') else []
    cells = res['cells']
    if cells:
        L += ['', '### The device path', '',
              'bench/vblk-load drives virtio-blk-pci on one IOThread, interrupt mode, 4 KiB, '
              f'EVENT_IDX on, {res.get("kick", "sync")} kicks, QEMU\'s -qtest-log '
              f'{res.get("qtest_log", "/dev/null")}; "threads": one driver thread '
              'per queue. Host fio: fio on the '
              'same file (the bound). Others: CPUs used by other processes during the '
              'measured windows (median). Kicks waited: the share of kicks that found the '
              'qtest channel taken by another driver thread, and their mean wait (median '
              'of the runs; see docs/vblk-load.md).' + pin_note(res), '',
              '| cell | rounds | ' + ' | '.join(f'{b} IOPS' for b in builds)
              + ' | spread ' + ', '.join(builds)
              + ' | host fio | others CPUs | kicks waited | stopped by |',
              '|' + ' --- |' * (7 + len(builds))]
        for name, c in cells.items():
            runs = c['runs']
            fio = c.get('host_fio_iops')
            every = [r for b in builds for r in runs[b]]
            oth, waited = med(every, 'others_cpus'), med(every, 'qtest_waited')
            wait_us = med(every, 'qtest_wait_us')
            L.append(f'| {name} | {len(runs[ref])} | '
                     + ' | '.join(f'{med(runs[b], "iops") / 1e3:.1f}k' for b in builds)
                     + ' | ' + ', '.join(f'{spread(runs[b], "iops"):.0f}%' for b in builds)
                     + f' | {f"{fio / 1e3:.1f}k" if fio else "-"} '
                     + f'| {"-" if math.isnan(oth) else f"{oth:.2f}"} '
                     + f'| {"-" if math.isnan(waited) else f"{100 * waited:.0f}% ({wait_us:.0f} µs)"} '
                     + f'| {c.get("stopped", "-")} |')
        for x in builds[1:]:
            L += ['', f'#### {x} against {ref}', '',
                  f'Ratios {x}/{ref}: median [{100 * st.get("confidence", CONFIDENCE):.0f}% '
                  f'interval]; other values: medians of the runs, {ref} then {x}. '
                  'notif/req: MSI-X messages the driver saw per request.', '',
                  '| cell | IOPS | ratio | verdict | notif/req | ratio | p50 µs | p99 µs '
                  f'| {x}/fio |', '|' + ' --- |' * 9]
            for name, c in cells.items():
                r = c['runs']
                fio = c.get('host_fio_iops')
                iops = cell_ci(c, ref, x, 'iops')
                L.append(f'| {name} | {pair(r, ref, x, "iops", ".1f", 1e3, "k")} '
                         f'| **{fmt_ci(iops)}** | {verdict(*iops[1:])} '
                         f'| {pair(r, ref, x, "notif_per_req", ".3f")} '
                         f'| {fmt_ci(cell_ci(c, ref, x, "notif_per_req"))} '
                         f'| {pair(r, ref, x, "p50_us", ".0f")} | {pair(r, ref, x, "p99_us", ".0f")} '
                         f'| {ratio(med(r[x], "iops"), fio) if fio else "-"} |')
            L += ['', f'CPU per request of each thread (schedstat), µs: {ref}, {x} '
                  f'(ratio {x}/{ref} [interval]). Workers: the thread pool (aio=threads). '
                  + HARNESS_NOTE, '',
                  '| cell | ' + ' | '.join(t for _, t in CPU_METRICS) + ' |',
                  '|' + ' --- |' * (1 + len(CPU_METRICS))]
            for name, c in cells.items():
                r = c['runs']
                cols = []
                for k, _ in CPU_METRICS:
                    if not any(v.get(k) for v in r[ref] + r[x]):
                        cols.append('-')
                        continue
                    cols.append(f'{pair(r, ref, x, k)} ({fmt_ci(cell_ci(c, ref, x, k))})')
                L.append(f'| {name} | ' + ' | '.join(cols) + ' |')
    L += upstream_report(res)
    polls = [(n, c) for n, c in cells.items() if c['poll'] == 0]
    if polls:
        L += ['', 'IOThread polling: CPU per request with the default poll-max-ns minus '
              'with poll-max-ns=0 (which does not poll), same cell otherwise.', '',
              '| cell | ' + ' | '.join(f'polling µs/req {b}' for b in builds) + ' | '
              + ' | '.join(f'work µs/req (poll-max-ns=0) {b}' for b in builds) + ' |',
              '|' + ' --- |' * (1 + 2 * len(builds))]
        for n, c in polls:
            base_cell = n.replace(' poll-max-ns=0', '')
            if base_cell not in cells:
                continue
            d = cells[base_cell]['runs']
            L.append(f'| {base_cell} | '
                     + ' | '.join(f'{med(d[x], "iothread_us_per_req") - med(c["runs"][x], "iothread_us_per_req"):.2f}'
                                  for x in builds) + ' | '
                     + ' | '.join(f'{med(c["runs"][x], "iothread_us_per_req"):.2f}' for x in builds)
                     + ' |')
    L += qemu_stats_report(res)
    if res['strace']:
        L += ['', 'Syscalls per request under strace (`vblk-load --strace`; strace slows '
              'QEMU several times, so only the counts mean something). Submissions are '
              '`io_submit` + `io_uring_enter`; `write` includes the guest-notifier eventfd '
              'writes. Medians of the runs.', '',
              '| cell | ' + ' | '.join(f'submissions {b}' for b in builds) + ' | '
              + ' | '.join(f'write {b}' for b in builds) + ' | '
              + ' | '.join(f'all {b}' for b in builds) + ' |',
              '|' + ' --- |' * (1 + 3 * len(builds))]
        for n, s in res['strace'].items():
            L.append(f'| {n} | ' + ' | '.join(f'{med(s[b], "submit_per_req"):.3f}' for b in builds)
                     + ' | ' + ' | '.join(f'{med(s[b], "write_per_req"):.3f}' for b in builds)
                     + ' | ' + ' | '.join(f'{med(s[b], "syscalls_per_req"):.2f}' for b in builds)
                     + ' |')
    if res['guest']:
        L += guest_report(res, builds)
    L += ['', 'Plots: ' + ', '.join(f'[{p}]({p})' for p in res['plots'])]
    L += ['', summary(res)]
    return '\n'.join(L) + '\n'


HARNESS_NOTE = ('Main loop: in vblk-load every kick (a qtest write to the notify '
                'address, which QEMU turns into an ioeventfd write) and every interrupt (the '
                'guest notifier eventfd, turned into an MSI-X write) passes through QEMU\'s '
                'main loop, which also parses the qtest commands. That is harness cost: on a '
                'KVM host the kernel takes both (ioeventfd, irqfd) and the main loop does '
                'nothing per request. The IOThread\'s CPU carries over to a KVM host.')


def candidates(res: dict) -> List[str]:
    """The builds that the report sets beside the upstream builds: all but
    the first and the upstream ones (or the first, when nothing else)."""
    ups = upstream_labels(res)
    xs = [b for b in res['builds'][1:] if b not in ups]
    return xs or [b for b in res['builds'][:1] if b not in ups]


def upstream_report(res: dict) -> List[str]:
    """Each candidate build against the first build and against upstream
    QEMU, side by side, and the CPU per request of each thread of every
    build, with intervals."""
    ups, cells, builds = upstream_labels(res), res['cells'], res['builds']
    if not ups or not cells:
        return []
    ref = builds[0]
    L = []
    for u in ups:
        for x in candidates(res):
            if x == u:
                continue
            head = f'{x}/{ref}' if x != ref else None
            L += ['', f'### {x} against {u} (upstream QEMU) and {ref}', '',
                  f'Ratios: median of the rounds\' ratios [{100 * CONFIDENCE:.0f}% interval]; '
                  f'a round pairs the runs of every build, so {x}/{u} is measured as '
                  f'{x}/{ref} is. IOPS and p50: medians, ' + ', '.join(builds) + '.', '',
                  '| cell | IOPS | ' + (f'{head} | verdict | ' if head else '')
                  + f'{x}/{u} | verdict | p50 µs |',
                  '|' + ' --- |' * (7 if head else 5)]
            for name, c in cells.items():
                r = c['runs']
                iops = ', '.join(f'{med(r[b], "iops") / 1e3:.1f}k' for b in builds)
                vu = cell_ci(c, u, x, 'iops')
                cols = [name, iops]
                if head:
                    vr = cell_ci(c, ref, x, 'iops')
                    cols += [f'**{fmt_ci(vr)}**', verdict(*vr[1:])]
                cols += [f'**{fmt_ci(vu)}**', verdict(*vu[1:]),
                         ', '.join(f'{med(r[b], "p50_us"):.0f}' for b in builds)]
                L.append('| ' + ' | '.join(cols) + ' |')
    L += ['', '### CPU per request of each thread, every build', '',
          'µs per request (schedstat), each build\'s median over the rounds with its '
          f'{100 * CONFIDENCE:.0f}% interval, in the order ' + ', '.join(builds) + '; then '
          'the ratio of each build to ' + ' and '.join(ups) + ' with its interval. '
          + HARNESS_NOTE, '',
          '| cell | thread | ' + ' | '.join(builds) + ' | '
          + ' | '.join(f'{x}/{u}' for u in ups for x in builds if x not in ups) + ' |',
          '|' + ' --- |' * (2 + len(builds) + sum(1 for _ in ups for x in builds
                                                   if x not in ups))]
    threads = [('iothread_us_per_req', 'IOThread'),
               ('main_us_per_req', 'main loop (harness)'),
               ('worker_us_per_req', 'workers'), ('qemu_us_per_req', 'QEMU, all threads')]
    for name, c in cells.items():
        r = c['runs']
        for k, t in threads:
            if not any(v.get(k) for b in builds for v in r[b]):
                continue
            vals = [fmt_ci(bootstrap_ci([v[k] for v in r[b] if v.get(k) is not None]))
                    for b in builds]
            rat = [fmt_ci(cell_ci(c, u, x, k)) for u in ups for x in builds if x not in ups]
            L.append(f'| {name if k == "iothread_us_per_req" else ""} | {t} | '
                     + ' | '.join(vals + rat) + ' |')
    return L


def qemu_stats_report(res: dict) -> List[str]:
    """QEMU's own virtqueue counters, for the builds that have them."""
    rows = []

    def hist(batches: List[List[int]]) -> str:
        tot = [sum(b[k] for b in batches) for k in range(len(BUCKETS))]
        return ' | '.join(f'{100 * t / sum(tot):.0f}' if sum(tot) else '-' for t in tot)
    for name, c in res['cells'].items():
        for b in res['builds']:
            rs = [r for r in c['runs'][b] if r.get('qemu_batches') is not None]
            if not rs:
                continue
            bad = sum(r['qemu_check'] != 'ok' for r in rs)

            def ci(v: List[float]) -> str:
                return fmt_ci(bootstrap_ci(v), 3)
            rows.append(f'| {name} | {b} | all | {ci([r["qemu_notif_per_req"] for r in rs])} '
                        f'| {med(rs, "notif_per_req"):.3f} '
                        f'| {ci([r["qemu_suppressed_per_req"] for r in rs])} '
                        f'| {ci([r["qemu_merged_per_req"] for r in rs])} '
                        f'| {hist([r["qemu_batches"] for r in rs])} '
                        f'| {"ok" if not bad else f"{bad} MISMATCH"} |')
            nq = len(rs[0]['qemu_queues'])
            for q in range(nq if nq > 1 else 0):
                qs = [r['qemu_queues'][q] for r in rs]
                rows.append(f'| | | q{q} | {ci([x["notif_per_req"] for x in qs])} | '
                            f'| {ci([x["suppressed_per_req"] for x in qs])} '
                            f'| {ci([x["merged_per_req"] for x in qs])} '
                            f'| {hist([x["batches"] for x in qs])} | |')
    have = {b for c in res['cells'].values() for b in res['builds']
            if any(r.get('qemu_batches') is not None for r in c['runs'][b])}
    none = [b for b in res['builds'] if b not in have]
    absent = ([f'No virtqueue counters from {", ".join(none)}: their QEMU has no '
               '`x-query-virtio-queue-stats` (the fork\'s own command); their '
               'notifications per request are the MSI-X messages vblk-load saw.']
              if none and res['cells'] else [])
    if not rows:
        return [''] + absent if absent else []
    return (['', absent[0]] if absent else []) + ['', "QEMU's virtqueue counters (`x-query-virtio-queue-stats`, measured window), "
            'for the builds that have them: per request, notifications sent (beside the '
            'MSI-X messages the driver saw), notification checks suppressed by EVENT_IDX, '
            'and completions whose notification the deferral merged into a later one '
            '(medians with intervals); completions per batch, % of batches of all runs; '
            'check: over each whole run, completions = requests reaped and notifications '
            '>= messages seen.', '',
            '| cell | build | queue | notif/req QEMU | seen | suppressed/req | merged/req | '
            + ' | '.join(f'batch {b}' for b in BUCKETS) + ' | check |',
            '|' + ' --- |' * (8 + len(BUCKETS))] + rows


def summary(res: dict) -> str:
    """The last line of bench.md: per build, the geometric mean of the
    cells' median IOPS ratios and how many cells lie below, within the
    noise, above."""
    builds = res['builds']
    out = []
    for x in builds[1:]:
        meds, counts = [], {'below': 0, 'within noise': 0, 'above': 0}
        for c in res['cells'].values():
            m, lo, hi = cell_ci(c, builds[0], x, 'iops')
            if math.isnan(m):
                continue
            meds.append(m)
            counts[verdict(lo, hi)] += 1
        if meds:
            out.append(f'**Summary, {x}/{builds[0]} IOPS:** geometric mean of the {len(meds)} device '
                       f'cells\' median ratios {geomean(meds):.3f}; {counts["below"]} below, '
                       f'{counts["within noise"]} within noise, {counts["above"]} above.')
    for u in upstream_labels(res):
        for x in candidates(res):
            meds, counts = [], {'below': 0, 'within noise': 0, 'above': 0}
            for c in res['cells'].values():
                m, lo, hi = cell_ci(c, u, x, 'iops')
                if math.isnan(m):
                    continue
                meds.append(m)
                counts[verdict(lo, hi)] += 1
            if meds and x != u:
                out.append(f'**Summary, {x}/{u} IOPS:** geometric mean {geomean(meds):.3f}; '
                           f'{counts["below"]} below, {counts["within noise"]} within noise, '
                           f'{counts["above"]} above.')
    return '\n'.join(out) if out else 'Summary: no device cells.'


# ---- plots ----

def neighbours(d1: int, d2: int) -> bool:
    """Whether a line may join depths d1 < d2: consecutive in a sweep.

    >>> neighbours(1, 8), neighbours(8, 32), neighbours(1, 32), neighbours(16, 32)
    (True, True, False, True)
    """
    return any(d1 in s and d2 in s and s.index(d2) == s.index(d1) + 1 for s in SWEEPS)


def ci_cols(runs: List[dict], key: str, scale: float = 1) -> str:
    v = [r[key] / scale for r in runs if r.get(key) is not None]
    m, lo, hi = bootstrap_ci(v)
    return f'{m:.6g} {lo:.6g} {hi:.6g}'


PNG_TERM = 'set terminal pngcairo noenhanced size {},{} font "sans,10"'
PNG_DEFAULT = PNG_TERM.format(1000, 560)


def per_cell_axis(cells: int, points: int) -> List[str]:
    """gnuplot lines for an x axis with a label per cell and @points marks
    or bars per cell: the default canvas while the labels fit, otherwise a
    wider one with upright labels (the full matrix has 92 cells)."""
    if cells <= 24:
        return ['set xtics rotate by -30']
    return [PNG_TERM.format(120 + cells * max(14, 5 * points), 760),
            'set xtics rotate by 90 right']


def plots(res: dict, out: str) -> List[str]:
    """PNG plots with gnuplot, every point with its interval; returns the
    file names."""
    builds = res['builds']
    made = []
    gp = [PNG_DEFAULT, 'set grid ytics',
          'set key top left', 'set bars small']
    # IOPS against queue depth: one series per backend, queues and build
    for png, multi in (('iops.png', False), ('iops-mq.png', True)):
        series: Dict[Tuple, List[Tuple[int, str]]] = {}
        for c in res['cells'].values():
            if c['rw'] == 'randread' and (c['queues'] > 1) == multi and c['poll'] is None:
                for x in builds:
                    how = variant(c.get('threads', False), c.get('iothreads', 1))
                    key = (c['backend'], c['queues'], how, x)
                    series.setdefault(key, []).append(
                        (c['depth'], ci_cols(c['runs'][x], 'iops', 1e3)))
        if not series:
            continue
        lines = []
        groups = sorted({k[:3] for k in series})
        depths = sorted({d for pts in series.values() for d, _ in pts})
        for (bk, q, th, x), pts in sorted(series.items(),
                                          key=lambda i: (i[0][:3], builds.index(i[0][3]))):
            dat = os.path.join(out, re.sub(r'[^\w.-]', '_', f'{png[:-4]}-{bk}-q{q}{th}-{x}')
                               + '.dat')
            pts.sort()
            k = builds.index(x)
            shift = 2 ** ((k - (len(builds) - 1) / 2) * 0.05)   # builds side by side
            with open(dat, 'w', encoding='utf-8') as f:
                for j, (d, cols) in enumerate(pts):
                    if j and not neighbours(pts[j - 1][0], d):
                        f.write('\n')       # gnuplot: no line across the gap
                    f.write(f'{d * shift:.4f} {cols}\n')
            title = f'{bk} q{q}{th} {x}'
            lines.append(f'"{dat}" using 1:2:3:4 with yerrorlines dt {1 + k} pt {7 + 2 * k} '
                         f'ps 0.8 lc {1 + groups.index((bk, q, th))} title "{title}"')
        gp += ['set output "' + os.path.join(out, png) + '"',
               'set title "kIOPS against queue depth per queue (4 KiB randread, 1 IOThread unless '
               'iothreads=N; '
               f'{"several queues" if multi else "1 queue"}); medians with '
               f'{100 * CONFIDENCE:.0f}% intervals"',
               'set logscale x 2', 'set xlabel "queue depth"', 'set ylabel "kIOPS"',
               f'set xrange [{depths[0] / 1.5:g}:{depths[-1] * 1.5:g}]',
               'set xtics (' + ', '.join(f'"{d}" {d}' for d in depths) + ')',
               'set yrange [0:*]', 'set key outside right top', 'plot ' + ', '.join(lines),
               'unset logscale x', 'set yrange [*:*]', 'set xrange [*:*]', 'set xtics auto',
               'set key inside top left']
        made.append(png)
    # the ratios, cell by cell
    if res['cells'] and len(builds) > 1:
        dat = os.path.join(out, 'ratio.dat')
        names = list(res['cells'])
        with open(dat, 'w', encoding='utf-8') as f:
            for i, n in enumerate(names):
                c = res['cells'][n]
                cols = []
                for x in builds[1:]:
                    m, lo, hi = cell_ci(c, builds[0], x, 'iops')
                    cols.append(f'{m:.4f} {lo:.4f} {hi:.4f}')
                f.write(f'{i} "{short(n)}" ' + ' '.join(cols) + '\n')
        k = len(builds) - 1
        lines = [f'"{dat}" using ($1{(j - (k - 1) / 2) * 0.15:+.3f}):{3 + 3 * j}:{4 + 3 * j}:'
                 f'{5 + 3 * j}' + (':xtic(2)' if j == 0 else '')
                 + f' with yerrorbars pt 7 title "{x}/{builds[0]}"'
                 for j, x in enumerate(builds[1:])]
        gp += [f'set output "{os.path.join(out, "ratio.png")}"',
               f'set title "IOPS ratio to {builds[0]}, per cell: median of the rounds with '
               f'{100 * CONFIDENCE:.0f}% interval"',
               *per_cell_axis(len(names), len(builds) - 1), 'set xlabel ""',
               'set ylabel "ratio"', 'set key inside top right',
               f'set xrange [-0.5:{len(names) - 0.5}]', 'set arrow 1 from graph 0, first 1 '
               'to graph 1, first 1 nohead dt 2', 'plot ' + ', '.join(lines),
               'unset arrow 1', 'set xrange [*:*]', 'set xtics norotate',
               PNG_DEFAULT, 'set key inside top left']
        made.append('ratio.png')
    # CPU per request, syscalls per request, guest: clustered bars with intervals
    bars = []
    if res['cells']:
        bars.append(('cpu.png', 'QEMU CPU per request, µs (IOThread / all threads)',
                     [(n, [ci_cols(c['runs'][x], k)
                           for k in ('iothread_us_per_req', 'qemu_us_per_req')
                           for x in builds]) for n, c in res['cells'].items()],
                     [f'IOThread {x}' for x in builds] + [f'all {x}' for x in builds]))
    if res['strace']:
        bars.append(('syscalls.png', 'Syscalls per request under strace',
                     [(n, [ci_cols(s[x], k) for k in ('submit_per_req', 'write_per_req')
                           for x in builds]) for n, s in res['strace'].items()],
                     [f'submissions {x}' for x in builds] + [f'write {x}' for x in builds]))
    if res['guest']:
        bars.append(('guest.png', 'TCG guest fio: kIOPS, and IOThread CPU µs per request',
                     [(n, [ci_cols(g['runs'][x], 'iops', 1e3) for x in builds]
                       + [ci_cols(g['runs'][x], 'IOThread_us_per_req') for x in builds])
                      for n, g in res['guest'].items()],
                     [f'kIOPS {x}' for x in builds] + [f'IOThread µs/req {x}' for x in builds]))
    for png, title, rows, cols in bars:
        dat = os.path.join(out, png.replace('.png', '.dat'))
        with open(dat, 'w', encoding='utf-8') as f:
            for n, v in rows:
                f.write(f'"{short(n)}" ' + ' '.join(v) + '\n')
        gp += [f'set output "{os.path.join(out, png)}"',
               f'set title "{title}; medians with {100 * CONFIDENCE:.0f}% intervals"',
               'set style data histograms', 'set style histogram errorbars gap 1 lw 1',
               'set style fill solid 0.8 border -1', *per_cell_axis(len(rows), len(cols)),
               'set xlabel ""', 'set ylabel ""', 'set key top left', 'set yrange [0:*]',
               'plot ' + ', '.join(f'"{dat}" using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}'
                                   + (':xtic(1)' if i == 0 else '') + f' title "{t}"'
                                   for i, t in enumerate(cols)),
               'set xtics norotate', 'set yrange [*:*]', 'set style data points',
               PNG_DEFAULT]
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


def short(name: str) -> str:
    return name.replace(' randread', '').replace('poll-max-ns=', 'poll')


# ---- the guest ----

def guest_pass(args, builds: List[Build], res: dict) -> None:
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
        g = {'aio': aio, 'qd': qd, 'runs': {b.label: [] for b in builds},
             'strace': {b.label: [] for b in builds}}
        for rep in range(args.reps):
            for b in (builds if rep % 2 == 0 else builds[::-1]):
                for trace in (False, True):
                    with tempfile.TemporaryDirectory(prefix='iobatch-bench-',
                                                     dir='/dev/shm') as tmp:
                        try:
                            r = syscalls.one_run(b.build if '/' not in b.build
                                                 else os.path.dirname(b.qemu), aio, qd,
                                                 args.guest_secs, guest, tmp, trace=trace,
                                                 device_props=b.props)
                        except RuntimeError as e:
                            die(f'guest {b.label} aio={aio} iodepth={qd}: {e}')
                    g['strace' if trace else 'runs'][b.label].append(r)
        res['guest'][f'guest {aio} d{qd}'] = g
        print(f'[guest {time.time() - t0:.0f}s] aio={aio} iodepth={qd}: '
              + ', '.join(f'{b.label} {med(g["runs"][b.label], "iops") / 1e3:.1f}k IOPS'
                          for b in builds), flush=True)


def guest_report(res: dict, builds: List[str]) -> List[str]:
    ref = builds[0]
    L = ['', '### Guest fio', '',
         'The TCG guest of tests/guest, fio 4 KiB randread '
         '(libaio, O_DIRECT) on virtio-blk on one IOThread, raw file on tmpfs; '
         f'{res["guest_secs"]} s measured per run. CPU per request of QEMU\'s thread '
         'groups from schedstat (vCPU: the TCG threads that emulate the guest); '
         'submissions (`io_submit`/`io_uring_enter`, any thread) and notifications '
         '(`write` by the IOThread: guest-notifier eventfd writes) per request from '
         'a separate run under strace. Values: medians, ' + ', '.join(builds) + '.', '',
         '| cell | IOPS | ' + ' | '.join(f'{x}/{ref} [interval]' for x in builds[1:])
         + ' | p50 µs | p99 µs | IOThread µs/req | main µs/req | vCPU µs/req '
         '| submissions/req | notifications/req |',
         '|' + ' --- |' * (9 + len(builds) - 1)]
    for n, g in res['guest'].items():
        r, s = g['runs'], g['strace']

        def vals(d, k, fmt='.2f'):
            return ', '.join(format(med(d[x], k), fmt) for x in builds)
        L.append(f'| {n} | ' + ', '.join(f'{med(r[x], "iops") / 1e3:.2f}k' for x in builds)
                 + ' | ' + ' | '.join(
                     f'**{fmt_ci(bootstrap_ci(ratios(r[ref], r[x], "iops")))}**'
                     for x in builds[1:])
                 + f' | {vals(r, "p50_us", ".0f")} | {vals(r, "p99_us", ".0f")} '
                 f'| {vals(r, "IOThread_us_per_req")} | {vals(r, "main_us_per_req")} '
                 f'| {vals(r, "vCPU_us_per_req", ".0f")} '
                 f'| {vals(s, "submissions_per_req", ".3f")} '
                 f'| {vals(s, "notifications_per_req", ".3f")} |')
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
    return f'{os.cpu_count()} CPUs ({cpu}), {mem >> 20} GiB, Linux {os.uname().release}'


def reorder(res: dict, ref: str) -> None:
    """Make ref the build that the report compares the others with.  Run i
    of every build belongs to round i, so any two builds pair up.

    >>> r = {'builds': ['base', 'fork', 'pre'], 'command': 'run.py'}
    >>> reorder(r, 'pre'); r['builds'], r['ref']
    (['pre', 'base', 'fork'], 'pre')
    >>> reorder(r, 'nope')
    Traceback (most recent call last):
    ...
    ValueError: no build 'nope' in this run (pre, base, fork)
    """
    if ref not in res['builds']:
        raise ValueError(f"no build '{ref}' in this run ({', '.join(res['builds'])})")
    res['builds'] = [ref] + [b for b in res['builds'] if b != ref]
    res['ref'] = ref


def save(res: dict, out: str) -> None:
    """bench.json: written after every cell too, so that a run that fails
    late keeps what it measured (--from remakes its report)."""
    tmp = os.path.join(out, 'bench.json.tmp')
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, os.path.join(out, 'bench.json'))


def write_report(res: dict, out: str) -> str:
    res['plots'] = plots(res, out)
    md = report(res)
    with open(os.path.join(out, 'bench.md'), 'w', encoding='utf-8') as f:
        f.write(md)
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    ap.add_argument('--full', action='store_true', help='the whole matrix (1.5-4 hours)')
    ap.add_argument('--reps', type=int, default=5,
                    help='rounds per cell at least, one run per build each (default 5; '
                         'the guest pass makes exactly this many)')
    ap.add_argument('--max-reps', type=int, default=15,
                    help='rounds per cell at most (default 15)')
    ap.add_argument('--ci-width', type=float, default=0.10,
                    help='stop adding rounds once every IOPS ratio\'s interval is at most '
                         'this wide (default 0.10)')
    ap.add_argument('--cell-time', type=float,
                    help='seconds per cell after which no round is added '
                         '(default 60 quick, 120 full)')
    ap.add_argument('--cells', metavar='PATTERN[,PATTERN...]',
                    help='only the cells whose name matches one of these fnmatch '
                         'patterns, e.g. "tmpfs-io_uring*" or "null*,*d128"')
    ap.add_argument('--duration', type=float, default=2, help='seconds measured per run '
                    '(default 2)')
    ap.add_argument('--ramp', type=float, default=0.5, help='seconds before measuring')
    ap.add_argument('--builds', nargs='+', default=['base', 'fork'],
                    metavar='[LABEL=]BUILD[:PROPS]',
                    help='what to compare, ratios against the first (default: base fork). '
                         'BUILD is a directory under build/ (or a path with a "/") that has '
                         'qemu-system-x86_64; PROPS are extra -device virtio-blk-pci '
                         'properties, comma-separated, e.g. '
                         'base fork first=fork:x-notify=first')
    ap.add_argument('--upstream', action='store_true',
                    help='add build/upstream (make upstream: the trixie line\'s pinned base, '
                         'Debian\'s QEMU 10.0) to --builds; '
                         'the report then gives every build against it too')
    ap.add_argument('--kick', choices=('async', 'sync', 'eventfd'), default='async',
                    help='vblk-load --kick: async (default) does not wait for QEMU\'s main '
                         'loop to take a kick, as a KVM guest does not; sync waits '
                         '(what make bench did before); eventfd writes the queue\'s '
                         'ioeventfd itself, as KVM does: no main loop on the kick path')
    ap.add_argument('--pin', action='store_true',
                    help='each IOThread on a CPU of its own, every other thread on the '
                    'other CPUs (vblk-load --pin); a cell with as many IOThreads as CPUs '
                    'runs unpinned, and the report says so')
    ap.add_argument('--qtest-log', default='none', metavar='FILE',
                    help='vblk-load --qtest-log (default none; /dev/null, as before '
                         '2026-12-03, adds a formatted log line per kick to the main loop)')
    ap.add_argument('--no-strace', action='store_true', help='skip the syscall pass')
    ap.add_argument('--guest', action='store_true',
                    help='add the guest fio A/B (TCG guest; --full implies it)')
    ap.add_argument('--no-guest', action='store_true',
                    help='no guest fio A/B, not even with --full')
    ap.add_argument('--guest-only', action='store_true',
                    help='only the guest fio A/B, no device pass')
    ap.add_argument('--guest-secs', type=int, default=8, help='guest fio seconds per run')
    ap.add_argument('--idle-check', type=float, default=2,
                    help='seconds to measure the machine\'s load before starting (default 2)')
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'bench'))
    ap.add_argument('--from', dest='from_json', metavar='JSON',
                    help='measure nothing: remake the report and plots of a bench.json')
    ap.add_argument('--ref', metavar='LABEL',
                    help='with --from: the ratios against this build of the run (e.g. '
                         'pre), not the first; rounds pair the builds whatever the order')
    args = ap.parse_args()
    if args.ref and not args.from_json:
        ap.error('--ref needs --from: a run measures against its first build')
    if args.from_json:
        with open(args.from_json, encoding='utf-8') as f:
            res = json.load(f)
        if args.ref:
            try:
                reorder(res, args.ref)
            except ValueError as e:
                ap.error(f'--ref: {e}')
        os.makedirs(args.out, exist_ok=True)
        write_report(res, args.out)
        print(f'bench: wrote {args.out}/bench.md, ' + ', '.join(res['plots']))
        return
    if args.cell_time is None:
        args.cell_time = 120 if args.full else 60
    if args.reps < 2 or args.max_reps < args.reps:
        ap.error('--reps must be >= 2 and --max-reps >= --reps')
    if args.duration <= 0 or args.ramp < 0 or args.cell_time <= 0 or args.idle_check < 0:
        ap.error('--duration and --cell-time must be > 0, --ramp and --idle-check >= 0')
    if not 0 < args.ci_width:
        ap.error('--ci-width must be > 0')
    try:
        builds = parse_builds(add_upstream(args.builds) if args.upstream else args.builds)
    except ValueError as e:
        ap.error(f'--builds: {e}')
    if len(builds) < 2:
        ap.error('--builds: give at least two entries (ratios are against the first)')
    for b in builds:
        if not os.access(b.qemu, os.X_OK):
            die(f'--builds {b.label}: no {b.qemu}'
                + ('' if '/' in b.build else
                   ': run "make upstream" first (about 25 minutes)' if b.build == 'upstream'
                   else ': run "make build" first'))
        why = b.check_props()
        if why:
            die(f'--builds {b.label}: {why}')
    for tool in ('fio', 'gnuplot') + (() if args.no_strace else ('strace',)):
        if subprocess.run(['sh', '-c', f'command -v {tool}'], stdout=subprocess.DEVNULL,
                          check=False).returncode:
            die(f'{tool} is not installed: run "make deps"')
    if not os.access(LOADGEN, os.X_OK):
        die('bench/vblk-load/vblk-load is missing: run "make vblk-load"')
    os.makedirs(args.out, exist_ok=True)

    mapping = all(b.has_property('iothread-vq-mapping') for b in builds)
    cells = [] if args.guest_only else matrix(args.full, mapping)
    if args.cells and not args.guest_only:
        pats = args.cells.split(',')
        cells = [c for c in cells if any(fnmatch.fnmatch(c.name, p) for p in pats)]
        if not cells:
            die(f'no cell matches {args.cells!r}; the cells are:\n  '
                + '\n  '.join(c.name for c in matrix(args.full, mapping)))
    labels = [b.label for b in builds]
    res = {'machine': machine(), 'mode': 'full' if args.full else 'quick',
           'command': shlex.join(['python3', 'bench/run.py'] + sys.argv[1:]),
           'reps': args.reps, 'duration': args.duration, 'ramp': args.ramp, 'kick': args.kick,
           'qtest_log': args.qtest_log, 'pin': args.pin,
           'builds': labels, 'build_specs': {b.label: b.spec() for b in builds},
           'stats': {'reps': args.reps, 'max_reps': args.max_reps, 'ci_width': args.ci_width,
                     'cell_time': args.cell_time, 'confidence': CONFIDENCE,
                     'bootstrap': BOOTSTRAP},
           'cells': {}, 'strace': {}, 'guest': {}, 'guest_secs': args.guest_secs,
           'plots': []}
    before = load_before(args.idle_check)
    la = before['loadavg']
    print(f'bench: machine before the run: {before["busy_pct"]:.0f}% busy, '
          f'{before["steal_pct"]:.1f}% stolen, load average {la[0]:.2f} {la[1]:.2f} '
          f'{la[2]:.2f}', flush=True)
    res['load'] = {'before': before}
    stat0 = proc_stat()
    t0 = time.time()
    for i, c in enumerate(cells):
        runs, why = run_cell(c, builds, args)
        fio = host_fio(c, args)
        res['cells'][c.name] = {'backend': c.backend, 'rw': c.rw, 'queues': c.queues,
                                'depth': c.depth, 'poll': c.poll, 'threads': c.threads,
                                'iothreads': c.iothreads, 'runs': runs, 'host_fio_iops': fio,
                                'stopped': why, 'pinned': args.pin and pinnable(c)}
        cis = [cell_ci(res['cells'][c.name], labels[0], x, 'iops') for x in labels[1:]]
        print(f'[{i + 1}/{len(cells)} {time.time() - t0:.0f}s] {c.name}: '
              f'{len(runs[labels[0]])} rounds; '
              + ', '.join(f'{x} {med(runs[x], "iops") / 1e3:.1f}k' for x in labels)
              + ' IOPS; ' + ', '.join(f'{x}/{labels[0]} {fmt_ci(ci)}'
                                      for x, ci in zip(labels[1:], cis))
              + (f'; host fio {fio / 1e3:.1f}k' if fio else ''), flush=True)
        save(res, args.out)
    if not args.no_strace:
        sc = [c for c in cells if c.depth == 32 and c.queues == 1 and c.rw == 'randread'
              and c.poll is None]
        for c in sc:
            st: Dict[str, List[dict]] = {b.label: [] for b in builds}
            for rep in range(1 if not args.full else args.reps):
                for b in builds if rep % 2 == 0 else builds[::-1]:
                    st[b.label].append(loadgen(b, c, args, strace=True))
            res['strace'][c.name] = st
            print(f'[strace {time.time() - t0:.0f}s] {c.name}: submissions/req '
                  + ', '.join(f'{x} {med(st[x], "submit_per_req"):.3f}' for x in labels),
                  flush=True)
    if args.guest or args.guest_only or (args.full and not args.no_guest):
        guest_pass(args, builds, res)
    during = load_between(stat0, proc_stat())
    allruns = [r for c in res['cells'].values() for rs in c['runs'].values() for r in rs]
    if allruns:
        loads = [r['load1'] for r in allruns]
        others = [r['others_cpus'] for r in allruns if r.get('others_cpus') is not None]
        during.update(load1_median=statistics.median(loads), load1_max=max(loads),
                      others_median=statistics.median(others) if others else math.nan,
                      others_max=max(others) if others else math.nan)
        res['load']['during'] = during
    res['seconds'] = round(time.time() - t0)
    save(res, args.out)
    md = write_report(res, args.out)
    save(res, args.out)
    print('\n' + md)
    print(f'bench: {time.time() - t0:.0f} s; wrote {args.out}/bench.md, bench.json, '
          + ', '.join(res['plots']))


if __name__ == '__main__':
    main()
