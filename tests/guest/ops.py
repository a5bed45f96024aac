"""Operations on a running VM while its guest's I/O is in flight
(cases.py, docs/guest-tests.md#operations-with-io-in-flight):

- stopcont: QMP stop and cont, STOPS times, each stop while a round of
  the verify workload writes (guest/workloads/rounds.sh);
- migrate: live migration to a second QEMU on the same images (TCP on
  127.0.0.1), HOPS times, each switch-over while a round of the verify
  workload runs (guest/workloads/rounds.sh);
- blockjobs: blockdev-mirror to a second file, completed with job-complete
  during writes, then an overlay (blockdev-snapshot) committed back into
  it (block-commit, job-complete); at each job's READY the VM is stopped
  and the images compared with qemu-img compare;
- iothreads: several disks on two IOThreads under load at once; each
  device is on the IOThread it names, each IOThread worked;
- unplug-inflight: device_del while the guest's load has requests in
  flight, device_add, CYCLES times (guest/workloads/inflight.sh);
- reset-storm: RESETS system_resets, each while the load has requests in
  flight and right after it made progress (a reset must not hide a hang);
- enospc: images on small tmpfs file systems that fill up: with
  werror=enospc the VM stops on the first ENOSPC, the host frees space and
  continues, and the guest never sees an error.

The guest verifies its data throughout (fio crc32c or pattern checks);
a hang is a timeout.
"""

import os
import random
import re
import subprocess
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from harness import (CUT_ERRNOS, CaseFail, Run, await_inflight, fio_results, has_queue_stats,
                     launch, qmp_call)

MIGRATE_TIMEOUT = 120       # seconds for one migration
MIGRATE_SLOW = 8 << 20      # bytes/s, until the moment to switch over
HOLD_IOPS = 20              # requests/s a source disk completes meanwhile
JOB_TIMEOUT = 120           # seconds for a block job to get ready or complete


def say(r: Run, msg: str) -> None:
    print(f'# {r.case.scenario}: {msg}', flush=True)


# -- the guest, as its serial log shows it ---------------------------------------

def check_guest(text: str) -> None:
    err = re.search(r'@@ERROR [^\r\n]*', text)
    if err:
        raise CaseFail(f'guest error: {err.group(0)}')
    if '@@RESULT' in text and not re.search(r'@@RESULT rc=0', text):
        raise CaseFail(f'the guest ended: {re.search(r"@@RESULT.*", text).group(0)}')


def wait(r: Run, cond: Callable[[str], object], what: str, timeout: Optional[float] = None):
    """Poll the serial log until cond(log) is true (and return what it
    returned); fail on a guest error, QEMU's exit, or after timeout
    seconds or at the case's deadline, whichever comes first (a timeout:
    a hang?)."""
    t0 = time.time()
    until = r.deadline if timeout is None else min(r.deadline, t0 + timeout)
    while True:
        text = r.log()
        got = cond(text)
        if got:
            return got
        check_guest(text)
        if not r.vm.is_running():
            raise CaseFail(f'QEMU exited (rc {r.vm.exitcode()}) while waiting for {what}')
        if time.time() > until:
            raise CaseFail(f'timeout: no {what} within {time.time() - t0:.0f}s'
                           ' (hang? lost notification?)')
        r.poll_events()
        time.sleep(0.2)


TICK_RE = re.compile(r'@@TICK(.*)')


def ticks(text: str) -> List[Dict[str, Tuple[int, int]]]:
    """The guest's ticks: per disk (completed, in flight)."""
    return [{k: (int(c), int(f)) for k, c, f in re.findall(r'(\S+)=(\d+)/(\d+)', m.group(1))}
            for m in TICK_RE.finditer(text)]


def inflight(t: Dict[str, Tuple[int, int]]) -> int:
    return sum(f for _, f in t.values())


def fmt_tick(t: Dict[str, Tuple[int, int]]) -> str:
    return ' '.join(f'{k}={c}/{f}' for k, (c, f) in t.items()) or '-'


ROUND_RE = re.compile(r'@@MARK (round-start|round-io-done|round-done|rounds-done) (\d+)')


def round_phase(text: str) -> Tuple[str, int, int]:
    """The guest's last round marker: (kind, round, its end in text)."""
    m = list(ROUND_RE.finditer(text))
    return (m[-1].group(1), int(m[-1].group(2)), m[-1].end()) if m else ('', 0, 0)


def count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))


# -- QMP helpers ---------------------------------------------------------------

qmp_on = qmp_call


def event_where(r: Run, name: str, match: Callable[[dict], bool], timeout: float) -> dict:
    """The first event NAME that match() accepts (also among the events
    seen so far)."""
    def look(_text):
        for e in r.events:
            if e['event'] == name and match(e):
                r.events.remove(e)
                return e
        return None
    return wait(r, look, f'event {name}', timeout)


def check_exit(vm, what: str) -> None:
    vm.shutdown()
    if vm.exitcode() != 0:
        raise CaseFail(f'{what} exited with {vm.exitcode()}')


# -- migration ---------------------------------------------------------------

def migrate(r: Run, when: Callable[[str], object]
            ) -> Tuple[dict, Dict[str, Tuple[int, int]], int]:
    """Migrate the VM to a new QEMU on the same images, switching over as
    soon as when(serial log) holds: until then the migration copies RAM at
    MIGRATE_SLOW bytes/s, too slowly to finish its first pass (with a
    downtime limit of 0, QEMU 7.2 completes a migration as soon as a pass
    has found nothing left, without syncing the dirty bitmap again); then
    the bandwidth and the downtime limit go up and the migration completes
    within about a second.  The new QEMU is r.vm afterwards and the old
    one has quit.  Returns the source's last query-migrate, what its
    disks had done (disk_ops) and the requests its devices held right
    before the switch-over (await_inflight)."""
    src = r.vm
    dst = r.new_vm(incoming=True)
    launch(dst)
    qmp_on(dst, 'migrate-incoming', uri='tcp:127.0.0.1:0')
    addr = qmp_on(dst, 'query-migrate').get('socket-address') or []
    ports = [a['port'] for a in addr if a.get('type') == 'inet']
    if not ports:
        raise CaseFail(f'the destination listens on no TCP port: {addr}')
    r.qmp('migrate-set-parameters', **{'max-bandwidth': MIGRATE_SLOW, 'downtime-limit': 0})
    r.qmp('migrate', uri=f'tcp:127.0.0.1:{ports[0]}')
    # Should the migration still complete by itself, the caller sees that
    # the switch-over did not come in time.
    wait(r, lambda t: (r.qmp('query-migrate').get('status') in ('completed', 'failed')
                       or when(t)), 'the moment to switch over', 120)
    held = await_inflight(r, 'the migration\'s switch-over')
    r.qmp('migrate-set-parameters', **{'max-bandwidth': 4 << 30, 'downtime-limit': 60000})
    t0 = time.time()
    while True:
        info = r.qmp('query-migrate')
        st = info.get('status')
        if st == 'completed':
            break
        if st in ('failed', 'cancelled'):
            raise CaseFail(f'migration {st}: {info.get("error-desc", "")}')
        if time.time() - t0 > MIGRATE_TIMEOUT:
            raise CaseFail(f'timeout: the migration did not complete in {MIGRATE_TIMEOUT}s: {info}')
        time.sleep(0.05)
    st = r.qmp('query-status')
    if st['status'] != 'postmigrate':
        raise CaseFail(f'the source is {st["status"]} after the migration, not postmigrate')
    until = time.time() + 30
    while qmp_on(dst, 'query-status')['status'] != 'running':
        if time.time() > until:
            raise CaseFail(f'the destination is {qmp_on(dst, "query-status")} 30 s after'
                           ' the migration completed')
        time.sleep(0.1)
    src_ops = disk_ops(r, src)
    r.vm = dst
    r.events.clear()
    check_exit(src, 'the migration source')
    return info, src_ops, held


def hold_disks(r: Run, vm) -> None:
    """Throttle vm's virtio-blk disks to HOLD_IOPS requests a second
    (block_set_io_throttle), reads and writes together: a round's writes
    (about 400 requests a disk) then last 20 s or more on vm, not the
    second or less they take unthrottled, longer than the switch-over of a
    migration takes.  Whether a round's writes outlasted the switch-over
    had been a race between the host's speed and the guest's.  The
    switch-over drains the requests that the throttle holds, on vm; the
    destination's disks are not throttled."""
    for i, d in enumerate(r.case.disks):
        if d.bus == 'virtio-blk':
            qmp_on(vm, 'block_set_io_throttle', id=f'{r.device_path(i, d)}/virtio-backend',
                   bps=0, bps_rd=0, bps_wr=0, iops=HOLD_IOPS, iops_rd=0, iops_wr=0)


def read(path: str) -> str:
    with open(path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def disk_ops(r: Run, vm) -> Dict[str, Tuple[int, int]]:
    """Per disk of the case (not the control disk): the (reads, writes)
    that this QEMU has completed (query-blockstats)."""
    want = {f'/machine/peripheral/vd{i}/virtio-backend'
            for i, d in enumerate(r.case.disks) if d.bus == 'virtio-blk'}
    return {b['qdev']: (b['stats']['rd_operations'], b['stats']['wr_operations'])
            for b in qmp_on(vm, 'query-blockstats') if b.get('qdev') in want}


class WritingInRound:
    """A condition for wait(): the guest is in a round's I/O and, between
    this poll and the one before (0.2 s), query-blockstats shows every
    disk completing writes; returns the round.  Decided on the host: the
    guest's ticks come once a second, and a round's I/O lasts 1-3 s.
    Keeps the writes of every disk at the first poll of the round
    (`start`) and the round it returned (`fired`)."""

    def __init__(self, r: Run):
        self.r = r
        self.last: Dict[str, Tuple[int, int]] = {}
        self.start: Dict[str, Tuple[int, int]] = {}
        self.round = self.fired = 0

    def __call__(self, text: str) -> int:
        kind, n, _ = round_phase(text)
        if kind != 'round-start':
            self.last = {}
            return 0
        now = disk_ops(self.r, self.r.vm)
        if n != self.round:
            self.round, self.start, self.last = n, now, {}
        busy = bool(self.last) and all(now[k][1] > self.last[k][1] for k in now)
        self.last = now
        if busy:
            self.fired = n
        return n if busy else 0


def wait_round_io(r: Run) -> int:
    """Wait until a round's I/O writes on every disk; returns the round."""
    return wait(r, WritingInRound(r), 'a round of I/O writing on every disk', 120)


def sc_stopcont(r: Run) -> None:
    """STOPS times: stop the VM while a round writes on every disk, check
    that it stays stopped and that no request completes while it is (the
    stop drained them), and continue it.  The rounds go on until the host
    ends them, so every stop lands in the guest's I/O however fast the
    host is."""
    for k in range(r.case.scenario_args.get('stops', 4)):
        n = wait_round_io(r)
        held = await_inflight(r, 'stop')
        r.qmp('stop')
        r.event('STOP')
        if r.qmp('query-status')['running']:
            raise CaseFail('still running after stop')
        before = disk_ops(r, r.vm)
        time.sleep(0.5)
        if disk_ops(r, r.vm) != before:
            raise CaseFail(f'requests completed while the VM was stopped: {before} then'
                           f' {disk_ops(r, r.vm)}')
        r.qmp('cont')
        r.event('RESUME')
        say(r, f'stop {k + 1} in round {n} (in flight: {held})')
    r.ctl_write('IOBATCH-STOP')
    wait(r, lambda t: '@@MARK rounds-done' in t, 'the end of the rounds')


def sc_migrate(r: Run) -> None:
    """HOPS migrations, each switched over while a round of the verify
    workload writes on every disk.  The migration copies RAM from the
    start of a round on, and switches over once query-blockstats on the
    source shows every disk completing writes between two polls 0.2 s
    apart (WritingInRound).  From the start of the round on, the source's
    disks are throttled (hold_disks), so that the round's writes last
    longer than the switch-over however fast the host.  A hop counts if
    the switch-over came in the middle of the round's writes: the source
    completed writes on every disk since the round started, and when the
    guest's `round-io-done` of that round appears the destination has
    completed writes on every disk too (after it the round only reads).  A hop that does not count (the
    migration completed by itself first, or the round's writes ended
    before the switch-over) is retried, at most HOPS+3 migrations in all.
    Then the guest's rounds end and it verifies both regions of every
    disk on the last QEMU.  With two kinds of QEMU (Case.binaries: Debian's
    and the build), a hop that counts is needed in each direction."""
    hops = r.case.scenario_args.get('hops', 2)
    done = tries = 0
    ways = {(a, b) for a, b in zip(r.case.binaries, r.case.binaries[1:] + r.case.binaries[:1])}
    counted: set = set()
    while done < hops or not ways <= counted:
        if tries >= hops + 3:
            raise CaseFail(f'only {done} of {tries} switch-overs came during a round\'s writes'
                           + (f', none from {" to ".join(min(ways - counted))}'
                              if ways - counted else '') + ': make the rounds longer (MB)')
        wait(r, lambda t: round_phase(t)[0] == 'round-start', 'the start of a round', 120)
        hold_disks(r, r.vm)
        tries += 1
        way = (r.kinds[-1], r.case.binaries[len(r.vms) % len(r.case.binaries)])
        cond = WritingInRound(r)
        info, src_ops, held = migrate(r, cond)
        m = cond.fired
        on_both = False
        if m and round_phase(read(r.serials[-2]))[:2] == ('round-start', m):
            io_done = re.compile(rf'@@MARK round-io-done {m}\r?\n')
            wait(r, lambda _t: io_done.search(read(r.serials[-1])),
                 f'the end of round {m}\'s I/O', 120)
            dst_ops = disk_ops(r, r.vm)
            src_w = {k: src_ops[k][1] - cond.start[k][1] for k in src_ops}
            on_both = all(src_w.values()) and all(w for _, w in dst_ops.values())
            where = ('writes of the round on the source / on the destination: '
                     + ' '.join(f'vd{k.split("/")[3][2:]}={src_w[k]}/{dst_ops[k][1]}'
                                for k in sorted(src_ops)))
        else:
            where = 'the migration completed before the round wrote'
        done += on_both
        if on_both:
            counted.add(way)
        say(r, f'migration {tries} ({way[0]} to {way[1]}): {info.get("total-time")} ms, downtime'
            f' {info.get("downtime")} ms, {info.get("ram", {}).get("transferred", 0) >> 20} MiB'
            f' (in flight: {held});'
            f' round {m or round_phase(read(r.serials[-2]))[1]}; {where}'
            + ('' if on_both else ': not during the writes, again'))
    r.ctl_write('IOBATCH-STOP')
    wait(r, lambda t: '@@MARK rounds-done' in t, 'the end of the rounds')


# -- block jobs -------------------------------------------------------------------

def job_event(r: Run, name: str, job: str) -> dict:
    e = event_where(r, name, lambda e: e['data'].get('device') == job, JOB_TIMEOUT)
    if e['data'].get('error'):
        raise CaseFail(f'{job}: {name} with error {e["data"]["error"]}')
    return e


def converge(r: Run, jobs: List[str]) -> None:
    """With the VM stopped, wait until every job has copied everything."""
    until = time.time() + 60
    while True:
        js = {j['device']: j for j in r.qmp('query-block-jobs')}
        left = {j: js[j]['len'] - js[j]['offset'] for j in jobs if j in js}
        if len(left) < len(jobs):
            raise CaseFail(f'jobs gone: {sorted(set(jobs) - set(left))}')
        if not any(left.values()):
            return
        if time.time() > until:
            raise CaseFail(f'the jobs did not converge with the VM stopped: {left}')
        time.sleep(0.2)


def compare(r: Run, a: str, b: str, what: str) -> None:
    p = subprocess.run([r.qemu_img, 'compare', '-U', a, b], capture_output=True, text=True,
                       check=False)
    out = (p.stdout + p.stderr).strip()
    if p.returncode != 0:
        raise CaseFail(f'{what}: qemu-img compare {os.path.basename(a)} {os.path.basename(b)}:'
                       f' {out} (exit {p.returncode})')
    say(r, f'{what}: qemu-img compare: {out}')


def node_of(r: Run, i: int) -> str:
    qdev = f'/machine/peripheral/vd{i}/virtio-backend'
    for b in r.qmp('query-block'):
        if b.get('qdev') == qdev:
            return b.get('inserted', {}).get('node-name', '')
    raise CaseFail(f'no block device for {qdev}')


def stopped_compare(r: Run, jobs: List[str], pairs: List[Tuple[str, str]], what: str) -> None:
    """Stop the VM (its requests drain), let the jobs copy what is left,
    compare each pair of images, continue."""
    r.qmp('stop')
    event_where(r, 'STOP', lambda e: True, 30)
    converge(r, jobs)
    for a, b in pairs:
        compare(r, a, b, what)
    r.qmp('cont')
    event_where(r, 'RESUME', lambda e: True, 30)


def file_opts(r: Run, i: int, path: str) -> dict:
    """A file node for a job's new image, like disk i's.  Without image
    locking: a job's target shares no consistent read, so qemu-img could
    not open it to compare, even with -U."""
    d = r.case.disks[i]
    return {'driver': 'file', 'filename': path, 'aio': d.aio,
            'cache': {'direct': d.aio != 'threads'}, 'locking': 'off'}



def complete_jobs(r: Run, jobs: List[str], disks: Iterable[int], what: str) -> int:
    """job-complete JOBS while a round of I/O has requests in flight, wait
    for them to complete, and check that each disk is on its copy (m<i>)
    again.  Returns the round."""
    n = wait_round_io(r)
    held = await_inflight(r, 'job-complete')
    for j in jobs:
        r.qmp('job-complete', id=j)
    for j in jobs:
        job_event(r, 'BLOCK_JOB_COMPLETED', j)
    for i in disks:
        if node_of(r, i) != f'm{i}':
            raise CaseFail(f'vd{i} is on {node_of(r, i)} after the {what}, not m{i}')
    say(r, f'{what}: job-complete (in flight: {held})')
    return n

def sc_blockjobs(r: Run) -> None:
    """On every disk at once, while the guest's rounds write: a mirror to a
    new raw file, compared at READY (VM stopped) and completed with
    job-complete during a round's I/O; an overlay on the new file
    (blockdev-snapshot), written by a round, committed back (block-commit
    of the active layer), compared at READY and completed during I/O."""
    disks = range(len(r.case.disks))
    tgt = {i: os.path.join(r.tmp, f'mirror{i}.raw') for i in disks}
    ovl = {i: os.path.join(r.tmp, f'overlay{i}.qcow2') for i in disks}
    for i in disks:
        if r.case.disks[i].fmt != 'raw':
            raise CaseFail('blockjobs: raw disks only')
        with open(tgt[i], 'wb') as f:
            f.truncate(r.case.disks[i].size_mb << 20)
    n = wait_round_io(r)
    say(r, f'mirror during round {n}')
    for i in disks:
        r.qmp('blockdev-add', **{'node-name': f'm{i}', 'driver': 'raw',
                                 'file': file_opts(r, i, tgt[i])})
        r.qmp('blockdev-mirror', **{'job-id': f'mirror{i}', 'device': f'd{i}',
                                    'target': f'm{i}', 'sync': 'full'})
    jobs = [f'mirror{i}' for i in disks]
    for j in jobs:
        job_event(r, 'BLOCK_JOB_READY', j)
    say(r, f'mirrors ready in round {round_phase(r.log())[1]}')
    stopped_compare(r, jobs, [(r.images[i], tgt[i]) for i in disks], 'mirror at READY')
    n = complete_jobs(r, jobs, disks, 'mirror')
    say(r, f'mirrors completed during round {n}: the disks are on the copies')

    # A round of writes on the copies, then the overlays, and a round on them.
    wait(r, lambda t: count(t, r'@@MARK round-done') > n, f'the end of round {n}')
    n = wait_round_io(r)
    for i in disks:
        subprocess.run([r.qemu_img, 'create', '-q', '-f', 'qcow2', '-b', tgt[i], '-F', 'raw',
                        ovl[i]], check=True)
        r.qmp('blockdev-add', **{'node-name': f'o{i}', 'driver': 'qcow2',
                                 'file': file_opts(r, i, ovl[i]), 'backing': None})
        r.qmp('blockdev-snapshot', node=f'm{i}', overlay=f'o{i}')
        if node_of(r, i) != f'o{i}':
            raise CaseFail(f'vd{i} is on {node_of(r, i)} after the snapshot, not o{i}')
    say(r, f'overlays during round {n}')
    wait(r, lambda t: count(t, r'@@MARK round-io-done') > n, f'the I/O of round {n}')
    for i in disks:
        p = subprocess.run([r.qemu_img, 'map', '-U', '--output=json', ovl[i]],
                           capture_output=True, text=True, check=True)
        if not re.search(r'"depth": 0, [^}]*"data": true', p.stdout):
            raise CaseFail(f'{os.path.basename(ovl[i])} holds no data after a round of writes')
    n = wait_round_io(r)
    for i in disks:
        r.qmp('block-commit', **{'job-id': f'commit{i}', 'device': f'o{i}'})
    jobs = [f'commit{i}' for i in disks]
    for j in jobs:
        job_event(r, 'BLOCK_JOB_READY', j)
    stopped_compare(r, jobs, [(ovl[i], tgt[i]) for i in disks], 'commit at READY')
    n = complete_jobs(r, jobs, disks, 'commit')
    say(r, f'commits completed during round {n}: the disks are on the copies again')
    wait(r, lambda t: count(t, r'@@MARK round-done') > n, f'the end of round {n}')
    r.ctl_write('IOBATCH-STOP')
    wait(r, lambda t: '@@MARK rounds-done' in t, 'the end of the rounds')


# -- several IOThreads --------------------------------------------------------------

def thread_cpu(pid: int, tid: int) -> float:
    with open(f'/proc/{pid}/task/{tid}/stat', encoding='ascii') as f:
        w = f.read().rsplit(')', 1)[1].split()
    return (int(w[11]) + int(w[12])) / os.sysconf('SC_CLK_TCK')


def sc_iothreads(r: Run) -> None:
    """Every device is on the IOThread its disk names; while the guest's
    rounds run on all disks at once, every IOThread uses CPU (it, not the
    main loop, does its devices' I/O); the fork's counters show every
    device completing requests and notifying."""
    with open(r.pidfile, encoding='ascii') as f:
        pid = int(f.read().strip())
    threads = {t['id']: t['thread-id'] for t in r.qmp('query-iothreads')}
    want = sorted({io for d in r.case.disks for io in d.iothread_ids})
    if sorted(threads) != want:
        raise CaseFail(f'IOThreads {sorted(threads)}, expected {want}')
    for i, d in enumerate(r.case.disks):
        path = Run.device_path(i, d)
        if d.vq_mapping:
            got = r.qmp('qom-get', path=path, property='iothread-vq-mapping')
            if [m.get('iothread') for m in got] != list(d.vq_mapping):
                raise CaseFail(f'{path} has iothread-vq-mapping {got!r}, expected'
                               f' {list(d.vq_mapping)}')
            continue
        got = r.qmp('qom-get', path=path, property='iothread')
        if got != f'/objects/{d.iothread_id}':
            raise CaseFail(f'{path} is on {got!r}, expected /objects/{d.iothread_id}')
    wait(r, lambda t: '@@MARK round-start 1' in t, 'the first round')
    cpu0 = {k: thread_cpu(pid, t) for k, t in threads.items()}
    last = r.case.env['ROUNDS']
    wait(r, lambda t: f'@@MARK round-io-done {last}' in t, f'the I/O of round {last}')
    used = {k: thread_cpu(pid, t) - cpu0[k] for k, t in threads.items()}
    say(r, 'IOThread CPU seconds during the rounds\' I/O: '
        + ', '.join(f'{k} {v:.2f}' for k, v in sorted(used.items())))
    idle = [k for k, v in used.items() if v < 0.03]
    if idle:
        raise CaseFail(f'IOThreads {idle} used less than 0.03 s of CPU under load'
                       ' (are their devices on them?)')
    # A device whose queues are spread over IOThreads: the guest used every
    # queue for a share of the rounds' I/O (its pinned fio jobs: about a
    # quarter each; unpinned, one queue takes nearly all, and the others
    # only the kernel's own few reads).  The rounds complete far fewer than
    # 65536 requests per queue, so the used index is the count.
    for i, d in enumerate(r.case.disks):
        if not d.vq_mapping:
            continue
        used_idx = [r.qmp('x-query-virtio-queue-status', queue=q,
                          path=f'/machine/peripheral/vd{i}/virtio-backend')['used-idx']
                    for q in range(d.num_queues)]
        say(r, f'vd{i} (queues over {"+".join(d.vq_mapping)}): used index per queue'
            f' {used_idx}')
        few = [q for q, u in enumerate(used_idx) if u * 10 < sum(used_idx)]
        if few:
            raise CaseFail(f'vd{i}: queues {few} completed less than a tenth of the'
                           f' requests {used_idx}: the guest did not spread its I/O'
                           ' over them')
    if not has_queue_stats(r):
        return
    for i, d in enumerate(r.case.disks):
        if d.bus != 'virtio-blk':
            continue
        qs = r.qmp('x-query-virtio-queue-stats', path=f'/machine/peripheral/vd{i}/virtio-backend')
        tot = {k: sum(q[k] for q in qs) for k in ('completions', 'notifications')}
        say(r, f'vd{i} ({"+".join(d.iothread_ids)}, {d.aio}): {tot["completions"]} completions,'
            f' {tot["notifications"]} notifications')
        if not (tot['completions'] and tot['notifications']):
            raise CaseFail(f'vd{i}: counters {tot}: no completions or no notifications')


# -- hot-unplug and resets with requests in flight -----------------------------------

def tick_in_flight(r: Run, since: int) -> Optional[Dict[str, Tuple[int, int]]]:
    """A tick after text position `since` that shows requests in flight
    and completions since the tick before it (progress: the I/O is not
    hung)."""
    ts = ticks(r.log()[since:])
    for a, b in zip(ts, ts[1:]):
        if inflight(b) and any(b[k][0] != a.get(k, (-1, 0))[0] for k in b):
            return b
    return None


def cut_errors(results: List[Tuple[str, dict]], c: int) -> Dict[str, List[int]]:
    """The errors that the jobs of cycle c's cut load (results cut-C-*,
    guest/workloads/inflight.sh) ended with, by result/job.

    >>> res = [('cut-1-reads', {'jobs': [{'jobname': 'ra', 'error': 5},
    ...                                  {'jobname': 'ra', 'error': 0}]}),
    ...        ('cut-1-pass', {'jobs': [{'jobname': 'wa', 'error': 28}]}),
    ...        ('cut-2-reads', {'jobs': [{'jobname': 'ra', 'error': 6}]})]
    >>> cut_errors(res, 1)
    {'cut-1-reads/ra': [5, 0], 'cut-1-pass/wa': [28]}
    """
    out: Dict[str, List[int]] = {}
    for name, res in results:
        if name.startswith(f'cut-{c}-'):
            for j in res['jobs']:
                out.setdefault(f'{name}/{j["jobname"]}', []).append(j['error'])
    return out


def check_cut_seen(results: List[Tuple[str, dict]], c: int) -> str:
    """The guest saw unplug c cut its load: some job of the cut load ended
    with an error that a disk that goes gives (harness.CUT_ERRNOS; the
    reads of the load fail with EIO once the disk's capacity is 0, a
    write with ENOSPC).  A load that ended without one, or without
    results, was not cut by the unplug.  Returns the errors, for the log.

    >>> ok = [('cut-1-reads', {'jobs': [{'jobname': 'ra', 'error': 5}]})]
    >>> check_cut_seen(ok, 1)
    'cut-1-reads/ra EIO'
    >>> check_cut_seen([('cut-1-reads', {'jobs': [{'jobname': 'ra', 'error': 0}]})], 1)
    Traceback (most recent call last):
    ...
    harness.CaseFail: unplug 1: the guest saw no I/O error in its load (cut-1-reads/ra 0)
    """
    errs = cut_errors(results, c)
    seen = {k: [CUT_ERRNOS[e] for e in v if e in CUT_ERRNOS] for k, v in errs.items()}
    text = ', '.join(f'{k} {"/".join(map(str, v))}' for k, v in errs.items()) or 'no results'
    if not any(seen.values()):
        raise CaseFail(f'unplug {c}: the guest saw no I/O error in its load ({text})')
    return ', '.join(f'{k} {"/".join(v)}' for k, v in seen.items() if v)


def cycle_mark(text: str, what: str, c: int) -> Optional[int]:
    """Where the guest's mark `what c` ends in text, or None before it;
    fail if the guest's cth mark `what` is not `what c` (its cycles
    counted wrong: the harness would wait for a mark that never comes).

    >>> cycle_mark('@@MARK go 1\\n@@MARK go 2\\n', 'go', 2)
    23
    >>> cycle_mark('@@MARK go 1\\n', 'go', 2) is None
    True
    >>> cycle_mark('@@MARK go 1\\n@@MARK go 1\\n', 'go', 2)
    Traceback (most recent call last):
    ...
    harness.CaseFail: the guest's mark 2 of go says go 1, expected go 2
    """
    marks = list(re.finditer(rf'@@MARK {what} (\d+)\b', text))
    if len(marks) < c:
        return None
    if marks[c - 1].group(1) != str(c):
        raise CaseFail(f'the guest\'s mark {c} of {what} says {what} {marks[c - 1].group(1)},'
                       f' expected {what} {c}')
    return marks[c - 1].end()


def sc_unplug_inflight(r: Run) -> None:
    """CYCLES times: once the guest's load has requests in flight (and
    progresses), device_del; the guest's driver must finish them (Linux
    waits for its requests before it lets the device go: a lost
    completion is no DEVICE_DELETED), the load ends with I/O errors (the
    guest must have seen some: check_cut_seen), device_add, and the guest
    checks the whole disk: every block holds the last complete pass or the
    one the unplug cut, and the blocks of every write of that pass that
    completed hold it (lib.sh check_gens)."""
    cycles = int(r.case.env['CYCLES'])
    for c in range(1, cycles + 1):
        pos = wait(r, lambda t, c=c: cycle_mark(t, 'unplug-me', c), f'unplug-me {c}')
        if c == 1 and r.drop_write is not None:
            # A planted lost write (--drop-write N) must be where the check
            # after the replug sees it whatever the timing: in a pass that
            # completed.  Of the pass that an unplug cuts, the check knows
            # the completed writes only from fio's logs, which the cut may
            # leave unwritten.  So the first unplug waits for the header to
            # name the pass that holds write N (each pass writes every
            # block once, then the header).
            n = pass_of_write(r, r.drop_write)
            wait(r, lambda _t, n=n: (storm_header(r) or (0,))[0] >= n,
                 f'pass {n} (write {r.drop_write}) complete', 120)
        tick = wait(r, lambda _t, p=pos: tick_in_flight(r, p), 'a tick with requests in flight', 60)
        time.sleep(random.uniform(0, 0.5))
        held = await_inflight(r, 'device_del')
        r.qmp('device_del', id='vd0')
        event_where(r, 'DEVICE_DELETED', lambda e: e['data'].get('device') == 'vd0', 60)
        wait(r, lambda t, c=c: f'@@MARK unplugged {c}' in t, f'unplugged {c}', 60)
        seen = check_cut_seen(fio_results(r.log()), c)
        r.device_add(0)
        wait(r, lambda t, c=c: f'@@MARK replugged {c}' in t, f'replugged {c}', 90)
        info = wait(r, lambda t, c=c: re.search(rf'@@INFO check-replug{c}: (.*)', t),
                    f'the check after replug {c}', 120)
        say(r, f'unplug {c} (in flight: {held}): the tick before it {fmt_tick(tick)};'
            f' errors seen: {seen};'
            f' {info.group(1).strip()}')


HEADER_RE = re.compile(rb'IOBATCH-PASS (\d+) (\d+) (\d+) ')


def pass_of_write(r: Run, n: int) -> int:
    """The pass of guest/workloads/inflight.sh that makes the disk's Nth
    write, counting from 1: each pass writes every block of region A (4 KiB
    blocks) and B (128 KiB blocks) once, then the header.

    >>> class R: pass
    >>> r = R(); r.case = R(); r.case.env = {}
    >>> [pass_of_write(r, n) for n in (1, 4353, 4354, 4500, 8706, 8707)]
    [1, 1, 2, 2, 2, 3]
    """
    a_mb, b_mb = inflight_regions_mb(r)
    per_pass = a_mb * 256 + b_mb * 8 + 1
    return (n - 1) // per_pass + 1


def inflight_regions_mb(r: Run) -> Tuple[int, int]:
    """The sizes in MiB of regions A and B of guest/workloads/inflight.sh
    (its A_MB and B_MB, and their defaults there)."""
    env = r.case.env
    return int(env.get('A_MB', 16)), int(env.get('B_MB', 32))


def storm_header(r: Run) -> Optional[Tuple[int, int, int]]:
    """The header sector of the in-flight workload's disk, read from its
    image (guest/workloads/inflight.sh): (the last complete pass, the
    boot, the chunks of the next pass that completed), or None before the
    guest wrote one."""
    hdr = sum(inflight_regions_mb(r)) << 20
    with open(r.images[0], 'rb') as f:
        f.seek(hdr)
        m = HEADER_RE.match(f.read(512))
    return tuple(int(x) for x in m.groups()) if m else None  # type: ignore


def sc_reset_storm(r: Run) -> None:
    """RESETS system_resets, each after the boot verified the disk and
    started the load, once the header on the disk says that 2 chunks of a
    pass of this boot's load completed (so that the next boot checks
    them: a lost write there must fail it) and a tick shows requests in
    flight and progress (a reset must not end a hang), at a random moment
    within 0.5 s of it.
    Boots must be resets + 1; each boot checks that every block holds the
    last complete pass or the one the reset cut (lib.sh check_gens: a
    lost write of a complete pass, a torn or misplaced one fails it)."""
    resets = int(r.case.env['RESETS'])
    chunked = int(r.case.env.get('CHUNKS', 1)) > 1
    inflight_at = []
    t0 = time.time()
    for k in range(1, resets + 1):
        pos = wait(r, lambda t, k=k: cycle_mark(t, 'storm-io', k),
                   f'storm-io {k} (the load of boot {k})')
        while True:
            if chunked:
                wait(r, lambda _t, k=k: (h := storm_header(r)) and h[1] == k and h[2] >= 2,
                     f'the header of boot {k}: 2 chunks of a pass complete', 60)
            tick = wait(r, lambda _t, p=pos: tick_in_flight(r, p),
                        'a tick with requests in flight', 60)
            time.sleep(random.uniform(0, 0.5))
            # A pass may have ended meanwhile: then wait for 2 chunks of
            # the next (the header only ever grows within a pass).
            h = storm_header(r)
            if not chunked or (h and h[1] == k and h[2] >= 2):
                break
            pos = len(r.log())
        held = await_inflight(r, 'system_reset')
        r.qmp('system_reset')
        event_where(r, 'RESET', lambda e: True, 30)
        inflight_at.append((inflight(tick), held))
        if k % 10 == 0 or k == resets:
            say(r, f'{k} resets in {time.time() - t0:.0f}s')
    wait(r, lambda t: '@@MARK inflight-done' in t, 'the end of the last boot')
    text = r.log()
    boots = count(text, r'@@BOOT')
    say(r, f'{resets} resets, {boots} boots; requests in flight in the guest\'s tick'
        f' before each reset: min {min(t for t, _ in inflight_at)},'
        f' max {max(t for t, _ in inflight_at)}; on the devices as QEMU reset them'
        f' (in flight): min {min(h for _, h in inflight_at)},'
        f' max {max(h for _, h in inflight_at)}')
    if boots != resets + 1:
        raise CaseFail(f'{boots} boots for {resets} resets (a panic?)')
    verified = count(text, r'@@MARK boot-verified')
    if verified != boots:
        raise CaseFail(f'{verified} of {boots} boots verified the disk')
    # What each boot found of the pass that the reset cut (lib.sh check_gens).
    cut = re.findall(r'@@INFO check-boot(\d+): \d+ of (\d+) blocks hold pass \d+,'
                     r' (\d+) pass (\d+);[^\r\n]*?(?:the first (\d+) of \d+ chunks[^\r\n]*)?\r?$',
                     text, re.M)
    say(r, 'blocks of the pass the reset cut, found by the next boot: '
        + (', '.join(f'boot {b}: {n}/{t} of pass {k}' + (f' ({c} chunks complete)' if c else '')
                     for b, t, n, k, c in cut) or 'none'))



# -- out of space ---------------------------------------------------------------

def sc_enospc(r: Run) -> None:
    """Each disk is alone on a small tmpfs (Case.small_fs_mb) beside a
    filler file that leaves FREE_MB free.  When a write finds no space,
    werror=enospc stops the VM: BLOCK_IO_ERROR (nospace, stop), status
    io-error, still paused a second later; the host frees FREE_MB on that
    disk's file system and continues, and QEMU retries the requests.  The
    guest never sees an error and verifies everything.  Every disk must
    have stopped the VM at least once."""
    free_mb = r.case.scenario_args.get('free_mb', 2)
    fill: Dict[int, str] = {}
    for i, path in r.small_fs.items():
        fill[i] = os.path.join(path, 'filler')
        st = os.statvfs(path)
        avail = st.f_bavail * st.f_frsize
        with open(fill[i], 'wb') as f:
            f.write(b'\xff' * (avail - (free_mb << 20)))
    nodes = {f'd{i}': i for i in r.small_fs}
    stops = {i: 0 for i in r.small_fs}

    def look(text: str) -> str:
        if any(e['event'] == 'BLOCK_IO_ERROR' for e in r.events):
            return 'error'
        return 'end' if '@@RESULT' in text else ''

    while wait(r, look, 'the end of the workload or an I/O error') == 'error':
        event_where(r, 'STOP', lambda e: True, 30)
        time.sleep(1)
        st = r.qmp('query-status')
        if st['running'] or st['status'] != 'io-error':
            raise CaseFail(f'the VM is {st["status"]} a second after an ENOSPC, not io-error')
        errs = [e for e in r.events if e['event'] == 'BLOCK_IO_ERROR']
        r.events[:] = [e for e in r.events if e['event'] != 'BLOCK_IO_ERROR']
        hit = set()
        for e in errs:
            d = e['data']
            if (d.get('node-name') not in nodes or d.get('action') != 'stop'
                    or d.get('operation') != 'write' or not d.get('nospace')):
                raise CaseFail(f'unexpected BLOCK_IO_ERROR {d}')
            hit.add(nodes[d['node-name']])
        for i in hit:
            size = os.path.getsize(fill[i])
            if size == 0:
                raise CaseFail(f'disk {i}: out of space with the filler gone'
                               ' (small_fs_mb too small?)')
            os.truncate(fill[i], max(0, size - (free_mb << 20)))
            stops[i] += 1
        r.qmp('cont')
        event_where(r, 'RESUME', lambda e: True, 30)
    say(r, 'VM stops on ENOSPC per disk: '
        + ', '.join(f'vd{i} ({r.case.disks[i].aio}) {n}' for i, n in sorted(stops.items())))
    never = [f'vd{i}' for i, n in stops.items() if not n]
    if never:
        raise CaseFail(f'{", ".join(never)} never ran out of space: the workload writes too'
                       ' little for the file system (small_fs_mb, free_mb)')


SCENARIOS = {'stopcont': sc_stopcont, 'migrate': sc_migrate, 'blockjobs': sc_blockjobs,
             'iothreads': sc_iothreads, 'unplug-inflight': sc_unplug_inflight,
             'reset-storm': sc_reset_storm, 'enospc': sc_enospc}
