"""The soak scenario (cases.py "soak", docs/guest-tests.md#soak).

The guest (guest/workloads/soak.sh) runs rounds of the verify workload on
four virtio-blk disks on one IOThread until the host's clock reaches
Run.soak_end.  Meanwhile the host loops through its actions while the
guest's round is doing I/O: stop/cont, the fork's notification counters
(x-query-virtio-queue-stats), blkdebug errors on soak-err (its format
node's file switched to the blkdebug node; werror/rerror=stop pause the VM,
the host switches back and continues it, the request is retried) and
system_reset; after every round it unplugs soak-uring and plugs it back
when the guest asks.  It samples QEMU's RSS throughout.

Nothing may be lost: every fio verify passes (harness.check_fio), the guest
makes progress (its ticks, every second while fio runs, show requests
completing, or it prints something else; none of that for the case's
timeout is a hang: a lost notification), a reset never ends a hang (it
comes only right after a tick in which every disk with requests in flight
completed some), the guest boots once per system_reset and no more,
the fork's counters move and never go back within a device's life, and
QEMU's RSS, less the guest's RAM and TCG's translation buffer, reaches no
new high in the last third of the run beyond a bound (see check_rss).
"""

import re
import time
from typing import Callable, Dict, List, Optional, Tuple

from harness import CaseFail, Run, fio_results, has_queue_stats, tf

PLUG_DISK = 2           # soak-uring: unplugged and plugged back after each round
ERR_DISK = 3            # soak-err: its file switched to blkdebug and back
ACTION_GAP = 2.0        # seconds between two actions
ERROR_WAIT = 10.0       # how long an error window waits for the guest's I/O
COUNTERS = ('completions', 'notifications', 'suppressed', 'merged')
# QEMU's RSS less the guest's RAM and TCG's translation buffer (both
# bounded by configuration, and both filling for minutes): its maximum in
# the last third of the run may exceed its maximum before by this much.
# Not the first third's: under TCG the rest warms up with the translation
# buffer (its metadata, malloc arenas) for about two minutes, which in the
# short soak is more than a third of the run.
RSS_GROWTH_MB = 128
RSS_GROWTH_PCT = 50
GUEST_RAM_MB = 1024     # harness: -m 1G


def say(msg: str) -> None:
    print(f'# soak: {msg}', flush=True)


def from_boot(line: str) -> str:
    """The line from the guest's @@BOOT marker on, if it has one.  A
    system_reset can cut the guest's last line short; the new boot's
    first line then continues it on the console, and a boot that the
    soak does not see would make it compare two boots' counters.

    >>> from_boot('@@TICK threads=4496/3 nat@@BOOT 6.1.0-28-amd64')
    '@@BOOT 6.1.0-28-amd64'
    >>> from_boot('@@TICK threads=4496/3 native=4120/2')
    '@@TICK threads=4496/3 native=4120/2'
    """
    i = line.find('@@BOOT')
    return line[i:] if i > 0 else line


class Soak:
    """The state of a soak run, as the serial log and QMP show it."""

    def __init__(self, r: Run):
        self.r = r
        self.t0 = time.time()
        self.stall = r.case.timeout          # seconds without guest progress: a hang
        self.pos = 0                         # how far the serial log is read
        self.partial = b''
        self.last_progress = self.t0
        self.tick: Dict[str, Tuple[int, int]] = {}   # disk: (completed, in flight)
        self.tick_ok = 0.0                   # the last tick in which every disk progressed
        self.result: Optional[str] = None
        self.boots = 0
        self.boot_time = self.t0
        self.phase = 'boot'                  # boot, io, between, plug, reset, done
        self.rounds = 0                      # round-done markers, all boots
        self.rounds_this_boot = 0
        self.boots_verified = 0
        self.marks: set = set()              # the markers of this boot
        self.plug_request: Optional[str] = None
        self.plug_gen = 0
        self.done: Dict[str, int] = {a: 0 for a in ('stop-cont', 'reset', 'unplug', 'error',
                                                    'error-stop', 'stats')}
        self.io_errors = 0                   # BLOCK_IO_ERROR events, all in error windows
        self.reset_every = max(45, r.case.soak // 12)
        self.rss: List[Tuple[float, int, int, int]] = []    # seconds, kB: all, RAM, TCG
        self.rss_every = max(5, min(30, r.case.soak // 60))
        self.next_rss = self.t0
        with open(r.pidfile, encoding='ascii') as f:
            self.pid = int(f.read().strip())
        self.has_stats = False
        self.stats_last: Dict[int, Tuple[tuple, Dict[str, int]]] = {}
        self.stats_sum: Dict[int, Dict[str, int]] = {}
        self.stats_moved: set = set()

    # -- watching the guest ---------------------------------------------------
    def pump(self) -> None:
        """Read the new serial output, follow the guest's markers, sample
        the RSS; fail on a guest error, a stall, the deadline, or QEMU's exit."""
        now = time.time()
        if now >= self.next_rss:
            self.sample_rss()
            self.next_rss = now + self.rss_every
        with open(self.r.serial, 'rb') as f:
            f.seek(self.pos)
            data = f.read()
        if data:
            self.pos += len(data)
            lines = (self.partial + data).split(b'\n')
            self.partial = lines.pop()
            for line in lines:
                self.line(line.decode('utf-8', 'replace').rstrip('\r'))
        if self.result is not None:
            return
        if not self.r.vm.is_running():
            raise CaseFail(f'QEMU exited (rc {self.r.vm.exitcode()}) in the soak')
        if now - self.last_progress > self.stall:
            last = ' '.join(f'{k}={v[0]}/{v[1]}' for k, v in self.tick.items())
            raise CaseFail(f'timeout: no guest progress for {self.stall}s in phase {self.phase},'
                           f' last tick (completed/in flight) {last or "-"}'
                           f' (hang? lost notification?)\n{self.cpu_state()}')
        if now > self.r.deadline:
            raise CaseFail(f'timeout after {self.r.case.soak + self.r.case.timeout}s'
                           f' in phase {self.phase} (hang? lost notification?)')

    def line(self, line: str) -> None:
        line = from_boot(line)
        if line.startswith('@@TICK'):
            self.on_tick(line)
            return
        self.last_progress = time.time()
        if line.startswith('@@ERROR'):
            raise CaseFail(f'guest error: {line}')
        m = re.match(r'@@RESULT rc=(\d+)', line)
        if m:
            self.result = m.group(1)
        elif line.startswith('@@BOOT'):
            self.boots += 1
            self.boot_time = time.time()
            self.phase = 'boot'
            self.rounds_this_boot = 0
            self.plug_request = None
            self.tick = {}
            self.marks.clear()
        m = re.match(r'@@MARK (\S+) ?(\S*)', line)
        if not m:
            return
        what, arg = m.groups()
        self.marks.add(line[len('@@MARK '):])
        if what == 'soak-boot':
            say(f'boot {self.boots} at {time.time() - self.t0:.0f}s:'
                + line[len('@@MARK soak-boot'):])
        elif what == 'boot-verified':
            self.boots_verified += 1
            self.phase = 'between'
        elif what == 'round-start':
            self.phase = 'io'
        elif what == 'round-done':
            self.rounds += 1
            self.rounds_this_boot += 1
            self.phase = 'between'
        elif what == 'unplug-me':
            self.plug_request = arg
            self.phase = 'plug'
        elif what == 'replugged':
            self.phase = 'between'
        elif what == 'soak-done':
            self.phase = 'done'

    def on_tick(self, line: str) -> None:
        """A disk progressed if it completed requests since the last tick,
        or had none in flight then."""
        tick = {k: (int(c), int(f)) for k, c, f in re.findall(r'(\S+)=(\d+)/(\d+)', line)}
        moved = [k for k, (c, _) in tick.items() if k in self.tick and c != self.tick[k][0]]
        if moved:
            self.last_progress = time.time()
        if tick and all(k in self.tick and (k in moved or self.tick[k][1] == 0) for k in tick):
            self.tick_ok = time.time()
        self.tick = tick

    def cpu_state(self) -> str:
        """Where the vCPUs are, for a hang report (twice, 1 s apart: a
        spinning guest moves, a hung one may not)."""
        out = []
        for _ in range(2):
            r = self.r.vm.qmp('human-monitor-command', command_line='info registers -a')
            for line in r.get('return', '').splitlines():
                w = line.split()
                if line.startswith('CPU#'):
                    out.append(w[0])
                elif line.startswith(('RIP=', 'EIP=')):
                    out[-1] += ' ' + ' '.join(x for x in w if x.startswith(('RIP', 'EIP', 'HLT')))
                elif line.startswith('CS ='):
                    out[-1] += f' CS={w[1][1:] if w[1].startswith("=") else w[1]}'
            time.sleep(1)
        return 'vCPUs: ' + '; '.join(out)

    def wait(self, cond: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Pump until cond() holds."""
        until = time.time() + timeout
        while not cond():
            self.pump()
            if self.result is not None:
                raise CaseFail(f'the guest ended while the host waited for {what}')
            if time.time() > until:
                raise CaseFail(f'gave up after {timeout:.0f}s waiting for {what}')
            time.sleep(0.1)

    def sample_rss(self) -> None:
        """VmRSS, and how much of it is the guest's RAM (the anonymous
        read-write mapping of its size) and TCG's translation buffer (the
        anonymous read-write-execute mappings), from /proc/PID/smaps."""
        ram = tcg = 0
        kind = ''
        try:
            with open(f'/proc/{self.pid}/smaps', encoding='utf-8', errors='replace') as f:
                for line in f:
                    m = re.match(r'([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(\S*)', line)
                    if m:
                        size = int(m.group(2), 16) - int(m.group(1), 16)
                        anon = m.group(4) == '0' and not m.group(5)
                        ram_like = size >= GUEST_RAM_MB << 20 and m.group(3) == 'rw-p'
                        kind = ('ram' if anon and ram_like
                                else 'tcg' if anon and m.group(3) == 'rwxp' else '')
                    elif line.startswith('Rss:') and kind:
                        kb = int(line.split()[1])
                        ram += kb if kind == 'ram' else 0
                        tcg += kb if kind == 'tcg' else 0
            with open(f'/proc/{self.pid}/status', encoding='ascii') as f:
                total = int(re.search(r'^VmRSS:\s+(\d+) kB', f.read(), re.M).group(1))
        except (OSError, AttributeError):
            return              # QEMU has just exited; pump() reports it
        if ram and tcg:         # not a QEMU that is exiting (its mappings gone)
            self.rss.append((time.time() - self.t0, total, ram, tcg))

    # -- QMP --------------------------------------------------------------------
    def qmp_event(self, name: str, match: Callable[[dict], bool] = lambda e: True,
                  timeout: float = 30) -> dict:
        """The first event NAME (that match() accepts) since the last clear."""
        found: List[dict] = []

        def look() -> bool:
            self.r.poll_events()
            found.extend(e for e in self.r.events if e['event'] == name and match(e))
            return bool(found)
        self.wait(look, f'event {name}', timeout)
        self.r.events.remove(found[0])
        return found[0]

    def clear_events(self) -> None:
        """Forget the events so far; a BLOCK_IO_ERROR outside an error
        window fails."""
        self.r.poll_events()
        for e in self.r.events:
            if e['event'] == 'BLOCK_IO_ERROR':
                raise CaseFail(f'BLOCK_IO_ERROR outside an error window: {e["data"]}')
        self.r.events.clear()

    def stop_cont(self) -> None:
        self.clear_events()
        self.r.qmp('stop')
        self.qmp_event('STOP')
        if self.r.qmp('query-status')['running']:
            raise CaseFail('still running after stop')
        time.sleep(0.5)
        self.r.qmp('cont')
        self.qmp_event('RESUME')
        self.done['stop-cont'] += 1

    def switch_file(self, child: str) -> None:
        i = ERR_DISK
        d = self.r.case.disks[i]
        self.r.qmp('blockdev-reopen', options=[{'driver': d.fmt, 'node-name': f'd{i}',
                                                'file': child}])

    def error(self) -> None:
        """Switch soak-err to blkdebug until the guest's I/O hits an error
        (which stops the VM), switch back, continue: the request is retried."""
        self.clear_events()
        self.switch_file(f'dbg{ERR_DISK}')
        self.done['error'] += 1
        until = time.time() + ERROR_WAIT
        hit = False
        while not hit and time.time() < until:
            self.pump()
            self.r.poll_events()
            hit = any(e['event'] == 'BLOCK_IO_ERROR' for e in self.r.events)
            time.sleep(0.1)
        if hit:
            self.qmp_event('STOP')
            st = self.r.qmp('query-status')
            if st['running'] or st['status'] != 'io-error':
                raise CaseFail(f'VM not paused on the injected error: {st}')
        self.switch_file(f'file{ERR_DISK}')
        self.r.poll_events()
        errors = [e for e in self.r.events if e['event'] == 'BLOCK_IO_ERROR']
        if errors and not hit:          # the guest's I/O came just before the switch
            self.qmp_event('STOP')
        for e in errors:
            d = e['data']
            if d.get('node-name') != f'd{ERR_DISK}' or d.get('action') != 'stop':
                raise CaseFail(f'unexpected BLOCK_IO_ERROR {d}')
        self.io_errors += len(errors)
        self.r.events[:] = [e for e in self.r.events if e['event'] != 'BLOCK_IO_ERROR']
        if errors:
            self.r.qmp('cont')
            self.qmp_event('RESUME')
            self.done['error-stop'] += 1

    def reset_due(self) -> bool:
        """A reset every reset_every seconds, once a round has completed
        in this boot, while a round does I/O, and right after a tick in
        which every disk progressed: a reset would end a hang that must
        fail the run."""
        now = time.time()
        return (self.rounds_this_boot >= 1 and now - self.boot_time >= self.reset_every
                and self.phase == 'io' and now - self.tick_ok < 0.5)

    def reset(self) -> None:
        self.stats()            # the counters of this boot, before they are reset
        self.clear_events()
        self.r.qmp('system_reset')
        self.qmp_event('RESET')
        self.phase = 'reset'
        self.done['reset'] += 1

    def hotplug(self) -> None:
        """The guest asked: unplug soak-uring, plug it back."""
        rnd = self.plug_request
        self.plug_request = None
        self.stats()            # soak-uring's counters of this life
        self.clear_events()
        self.r.qmp('device_del', id=f'vd{PLUG_DISK}')
        self.qmp_event('DEVICE_DELETED', lambda e: e['data'].get('device') == f'vd{PLUG_DISK}',
                       timeout=60)
        self.wait(lambda: f'unplugged {rnd}' in self.marks, f'unplugged {rnd}')
        self.r.device_add(PLUG_DISK)
        self.plug_gen += 1
        self.done['unplug'] += 1
        try:
            self.wait(lambda: f'replugged {rnd}' in self.marks, f'replugged {rnd}', 90)
        except CaseFail as e:
            # The device state shows whether the guest's driver found it.
            raise CaseFail(f'timeout: soak-uring not back in the guest ({e};'
                           ' hang? lost notification?)') from e

    def check_stats_available(self) -> None:
        self.has_stats = has_queue_stats(self.r)
        if not self.has_stats:
            say('x-query-virtio-queue-stats is not in this build (the base, Debian\'s QEMU): '
                'the notification counters are not queried')

    def stats(self) -> None:
        """The notification counters of every disk: within one life of a
        device (a boot; for soak-uring, a plug) they never go back, and
        they move: a life starts at zero (the device's reset), and the
        guest does I/O on every disk in every round."""
        if not self.has_stats or self.phase == 'reset':
            return
        for i in range(len(self.r.case.disks)):
            qs = self.r.qmp('x-query-virtio-queue-stats',
                            path=f'/machine/peripheral/vd{i}/virtio-backend')
            tot = {k: sum(q[k] for q in qs) for k in COUNTERS}
            epoch = (self.boots, self.plug_gen if i == PLUG_DISK else 0)
            last = self.stats_last.get(i)
            if last and last[0] == epoch:
                for k in COUNTERS:
                    if tot[k] < last[1][k]:
                        raise CaseFail(f'vd{i} {k} went back from {last[1][k]} to {tot[k]}')
                if tot['completions'] > last[1]['completions']:
                    self.stats_moved.add(i)
            else:
                if last:
                    self.add_stats(i, last[1])
                if tot['completions'] and tot['notifications']:
                    self.stats_moved.add(i)
            self.stats_last[i] = (epoch, tot)
        self.done['stats'] += 1

    def add_stats(self, i: int, tot: Dict[str, int]) -> None:
        acc = self.stats_sum.setdefault(i, dict.fromkeys(COUNTERS, 0))
        for k in COUNTERS:
            acc[k] += tot[k]

    # -- the end --------------------------------------------------------------
    def report(self) -> None:
        secs = time.time() - self.t0
        say(f'{secs:.0f}s: {self.boots} boots, {self.rounds} rounds, '
            + ', '.join(f'{k} {v}' for k, v in self.done.items())
            + f', BLOCK_IO_ERROR events {self.io_errors}')
        res = fio_results(self.r.log())
        kinds: Dict[str, int] = {}
        for name, _ in res:
            k = name.split('-r')[0]
            kinds[k] = kinds.get(k, 0) + 1
        bad = sum(1 for _, j in res for job in j['jobs'] if job['error'])
        say('fio runs: ' + ', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))
            + f'; jobs with an error: {bad}')
        for i, (_, tot) in sorted(self.stats_last.items()):
            self.add_stats(i, tot)
        for i, acc in sorted(self.stats_sum.items()):
            ratio = acc['notifications'] / acc['completions'] if acc['completions'] else 0
            d = self.r.case.disks[i]
            say(f'vd{i} (aio={d.aio}, event_idx={tf(d.event_idx)}; the last sample of each'
                ' life of the device, summed): '
                + ', '.join(f'{k} {acc[k]}' for k in COUNTERS)
                + f', notifications/completion {ratio:.3f}')
        say('RSS in MiB at seconds: all = guest RAM + TCG buffer + the rest')
        series = [f'{t:.0f}s {a >> 10}={m >> 10}+{c >> 10}+{(a - m - c) >> 10}'
                  for t, a, m, c in self.rss]
        for k in range(0, len(series), 8):
            say('RSS ' + ', '.join(series[k:k + 8]))

    def check(self) -> None:
        if self.boots != self.done['reset'] + 1:
            raise CaseFail(f'{self.boots} boots for {self.done["reset"]} resets: '
                           'the guest rebooted by itself (a panic?)')
        if self.boots_verified != self.boots:
            raise CaseFail(f'{self.boots_verified} of {self.boots} boots verified the last round')
        missing = [k for k in ('stop-cont', 'reset', 'unplug', 'error-stop')
                   if not self.done[k]]
        if self.rounds < 2 or missing:
            raise CaseFail(f'{self.rounds} rounds; never: {", ".join(missing) or "-"}:'
                           ' the soak was too short (--soak-seconds)')
        if self.has_stats:
            still = [f'vd{i}' for i in range(len(self.r.case.disks)) if i not in self.stats_moved]
            if still:
                raise CaseFail(f'the notification counters of {", ".join(still)} never moved')
        self.check_rss()

    def check_rss(self) -> None:
        if len(self.rss) < 6:
            raise CaseFail(f'only {len(self.rss)} RSS samples')
        span = self.rss[-1][0]
        rest = [(t, a - m - c) for t, a, m, c in self.rss]
        first = max(kb for t, kb in rest if t < 2 * span / 3)
        last = max(kb for t, kb in rest if t >= 2 * span / 3)
        bound = first + max(RSS_GROWTH_MB << 10, first * RSS_GROWTH_PCT // 100)
        say(f'RSS less guest RAM and TCG buffer: max {first >> 10} MiB in the first two'
            f' thirds, {last >> 10} MiB in the last; the bound is {bound >> 10} MiB'
            f' (+{RSS_GROWTH_PCT}% or +{RSS_GROWTH_MB} MiB, whichever is more)')
        if last > bound:
            raise CaseFail(f'RSS less guest RAM and TCG buffer grew from {first >> 10} MiB'
                           f' to {last >> 10} MiB (bound {bound >> 10} MiB)')


def run(r: Run) -> None:
    s = Soak(r)
    s.check_stats_available()
    say(f'{r.case.soak}s of host actions, then the last round; a reset at most every'
        f' {s.reset_every}s; RSS every {s.rss_every}s; a hang is {s.stall}s without progress')
    actions = (s.stop_cont, s.stats, s.error, s.stats)
    k = 0
    next_action = 0.0
    while True:
        s.pump()
        if s.result is not None:
            break
        if s.plug_request is not None:
            s.hotplug()
            continue
        now = time.time()
        if now < r.soak_end and s.reset_due():
            s.reset()
            continue
        if now < r.soak_end and s.phase == 'io' and now >= next_action:
            actions[k % len(actions)]()
            k += 1
            next_action = time.time() + ACTION_GAP
        time.sleep(0.2)
    s.clear_events()
    s.report()
    if s.result == '0':
        s.check()
