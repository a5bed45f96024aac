#!/usr/bin/env python3
"""Run the fork's test suites on one build (build/fork by default).

Suites: the documentation's links and the make help (tests/docs.py); the
configure lines of scripts/build.sh against the QEMU 7.2 and 10.0 trees,
without a build (tests/configure.py, started beside the first suites at the
lowest priority and reported after check-update); the versions, make
install and uninstall, the apt repository and the held-back check
(tests/packaging.py);
tests/smoke.py; vblk-load as a hostile guest (bench/vblk-load/chaos.sh);
a short run of the virtio-blk fuzz targets (scripts/fuzz.sh, fork only);
the QEMU unit tests; the block-related x86_64 qtests; qemu-iotests
group "quick" (plus the tests named in EXTRA_IOTESTS) for raw and qcow2 in
each aio mode; the guest end-to-end tests of tests/guest; Debian's libvirt
running the build's QEMU (tests/libvirt.py); make check-update against the
archive, for each line with its pin and an older one (tests/check-update.py); the unit
tests and the virtio-blk and virtio-scsi qtests on the fork built with the
debug check of deferred calls (build/dbg, suite debug).  With
--base, the hostile driver and the guest soak also run on the unpatched
base, for comparison (suites chaos-base, soak-base).  Every test runs
under a timeout, so a hang is a failure.

Known failures of the base are listed in tests/known-failures, each with its
reason and the issue that fixes it.  They are reported as expected failures
("xfail"); one that passes is reported as "xpass", except where it is
listed as "racy" (a race of the base that fails some runs only: a pass
says nothing).  Tests listed there as "flaky" are retried once, visibly, and a pass after a retry is counted as
such.  Any other failure fails the run.

Every skip keeps its reason (an iotest's .notrun file, the comment of a
TAP "# SKIP" line, a unit test's output) and the summary gives the reasons
per suite.  The skips expected on this kind of machine are listed in
tests/expected-skips: a skip that is not listed there, or a listed skip
that did not happen, in a suite that ran, fails the run with its reason
(--update-expected-skips rewrites the list from the run).

The last line is "N passed, N failed, N skipped (passed after a retry: N)";
the exit code is 0 when nothing failed.
"""

import argparse
import concurrent.futures
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

QOS_DEVICES = ['virtio-blk-pci', 'virtio-scsi-pci', 'vhost-user-blk-pci']
QTESTS = ['drive_del-test', 'hd-geo-test', 'cdrom-test', 'device-plug-test',
          'fuzz-virtio-scsi-test']
# The TCG system tests that a line's series adds (tests/tcg/x86_64/system),
# built and run from the build's tests/tcg/x86_64-softmmu
TCG_TESTS = {'trixie': ['mmio-remap']}
# The unit tests that a line's series adds or changes, for a line whose
# fork has no unit suite of its own (the bookworm line's runs them all in
# the suite unit)
UNIT_TESTS = {'trixie': ['test-block-iothread']}
# The suites, in the order they run (docs/testing.md)
SUITES = ('docs', 'configure', 'packaging', 'smoke', 'chaos', 'fuzz', 'unit', 'qtest',
          'iotests', 'guest', 'planted', 'libvirt', 'check-update', 'debug')

IOTEST_CONFIGS = {
    'raw-threads': ['-raw', '-i', 'threads'],
    'raw-native': ['-raw', '-nocache', '-i', 'native'],
    'raw-io_uring': ['-raw', '-i', 'io_uring'],
    'qcow2-threads': ['-qcow2', '-i', 'threads'],
    'qcow2-native': ['-qcow2', '-nocache', '-i', 'native'],
    'qcow2-io_uring': ['-qcow2', '-i', 'io_uring'],
}
# Not in group "quick", but tests of what the fork changes or fixes.
EXTRA_IOTESTS = ['281', 'graph-changes-while-io']

QTEST_TIMEOUT = 600
GUEST_TIMEOUT = 1800
LIBVIRT_TIMEOUT = 1200
CHAOS_TIMEOUT = 900
# The configurations of chaos.sh that run on the unpatched base too, for
# comparison (suite chaos-base): split ring polled, without EVENT_IDX,
# io_uring, and a packed ring.
CHAOS_BASE_CONFIGS = ['iothread', 'iothread-irq-noevidx', 'io_uring-irq',
                      'packed-irq']
# The guest cases of the trixie line's fork in make test (suite
# guest-trixie): what the bookworm line cannot run, and the TCG test of
# its fixes/
TRIXIE_GUEST_CASES = ['iothread-vq-mapping', 'migrate-mapping', 'migrate-late-notify',
                      'blockjobs-mapping', 'smc-race']
# Seconds per fuzz target in 'make test' (make fuzz: FUZZ_SECONDS, longer).
FUZZ_TEST_SECONDS = 30
FUZZ_TARGETS = ['virtio-blk-fuzz', 'virtio-blk-flags-fuzz',
                'generic-fuzz-virtio-blk', 'virtio-blk-iothread-fuzz',
                'virtio-blk-iothread-native-fuzz',
                'virtio-blk-iothread-io_uring-fuzz']
HANG_TIMEOUT = 90


# The sections of the log ("== NAME" lines) and how long each took, for
# the summary: where a run's time went
SECTIONS = []


def log(msg):
    head = msg.lstrip('\n')
    if head.startswith('== '):
        now = time.monotonic()
        if SECTIONS and SECTIONS[-1][2] is None:
            SECTIONS[-1][2] = now
        if not head.startswith('== summary'):
            SECTIONS.append([head[3:], now, None])
    print(msg, flush=True)


def section_times():
    """One line per section of the log, minutes and seconds each."""
    return [f'  {int(end - start) // 60:3d}:{int(end - start) % 60:02d}  {name}'
            for name, start, end in SECTIONS if end is not None]


# Suites that run on another build than the one under test, by the end of
# their name: the unpatched base (--base), the trixie line's fork (--trixie)
OTHER_BUILDS = {'-base': 'base', '-trixie': 'trixie'}


def build_path(arg):
    """A build named on the command line: a name under build/ (fork,
    base), or a path, which has a "/" (build/trixie/fork)"""
    return os.path.abspath(arg if '/' in arg else f'{TOP}/build/{arg}')


def build_suite(build, suite):
    """BUILD:SUITE, what the patterns of tests/known-failures and
    tests/expected-skips match.  The suites NAME-base run on the unpatched
    base whatever build the run tests (--base): they are the base's; the
    suites NAME-trixie are the trixie line's (BUILD "trixie")."""
    for end, other in OTHER_BUILDS.items():
        if suite.endswith(end):
            return f'{other}:{suite}'
    return f'{build}:{suite}'


class KnownFailures:
    """tests/known-failures: WHERE TEST ISSUE KIND REASON..., where WHERE
    is an fnmatch pattern for BUILD:SUITE."""

    def __init__(self, path, build):
        self.build = build
        self.entries = []
        with open(path, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith('#'):
                    continue
                fields = line.split(None, 4)
                if len(fields) < 5 or fields[3] not in ('fail', 'hang',
                                                        'racy', 'flaky'):
                    sys.exit(f'{path}:{n}: expected "WHERE TEST ISSUE '
                             f'fail|hang|racy|flaky REASON"')
                self.entries.append(fields)

    def lookup(self, suite, test):
        for pat, name, issue, kind, reason in self.entries:
            if (fnmatch.fnmatchcase(build_suite(self.build, suite), pat) and
                    name == test):
                return kind, f'{issue}: {reason}'
        return None, None


# The lines of a failure's output that the summary repeats: the end of a
# CI log is what is kept of it.
FAILURE_LINES = 40


class Results:
    def __init__(self, known):
        self.known = known
        self.items = []

    def add(self, suite, test, status, detail='', retried=None, output=None):
        """status: pass, fail, skip or timeout, as the test ended; for a
        skip, detail is its reason.  retried: the status of the first
        attempt, when the test was run again.  output: what a failed test
        printed about its failure (lines), repeated under the summary."""
        kind, reason = self.known.lookup(suite, test)
        if kind in ('fail', 'hang', 'racy'):
            if status in ('fail', 'timeout'):
                status, detail = 'xfail', reason
            elif status == 'pass' and kind != 'racy':
                status, detail = 'xpass', reason
        item = {'suite': suite, 'test': test, 'status': status,
                'detail': detail}
        if retried:
            item['retried'] = retried
        if output and status in ('fail', 'timeout'):
            item['output'] = output[-FAILURE_LINES:]
        self.items.append(item)
        if status not in ('pass', 'skip'):
            log(f'  {status.upper()}: {suite} {test} {detail}')
        return status

    def retried_passes(self, suite=None):
        return sum(1 for i in self.items if i.get('retried') and
                   i['status'] in ('pass', 'xpass') and
                   (suite is None or i['suite'].split(':')[0] == suite))

    def is_flaky(self, suite, test):
        return self.known.lookup(suite, test)[0] == 'flaky'

    def count(self, status, suite=None):
        return sum(1 for i in self.items if i['status'] == status and
                   (suite is None or i['suite'].split(':')[0] == suite))


class ExpectedSkips:
    """tests/expected-skips: WHERE TEST REASON..., where WHERE is an fnmatch
    pattern for BUILD:SUITE; the skips a run on this kind of machine has,
    each with the reason the test gave."""

    HEADER = """\
# Expected skips, named rather than counted: tests/run.py fails a run in
# which a test skips that is not listed here, or a test listed here for a
# suite that ran did not skip (it passed, failed or did not run), and shows
# the reason.  Produced from a real run on this kind of machine with
#   python3 tests/run.py --suite unit --suite qtest --suite iotests \\
#       --update-expected-skips
# which rewrites the entries of the suites it ran and keeps the others.
#
# WHERE is an fnmatch pattern for BUILD:SUITE (BUILD is fork, base or tree);
# REASON is what the test said when it skipped: a skip for another reason
# fails the run (blanks compared as one space).  A skip
# that did not happen fails the run too, unless WHERE starts with "?": the
# test needs a tool, a kernel feature or an optional library that machines
# of this kind may or may not have, so it is only reported (SKIP GONE).
#
# WHERE                    TEST                    REASON
"""

    def __init__(self, path, build):
        self.path = path
        self.build = build
        self.entries = []
        if not os.path.exists(path):
            return
        with open(path, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith('#'):
                    continue
                fields = line.split(None, 2)
                if len(fields) < 3:
                    sys.exit(f'{path}:{n}: expected "WHERE TEST REASON"')
                self.entries.append(fields)

    def _matches(self, pattern, suite):
        return fnmatch.fnmatchcase(build_suite(self.build, suite), pattern.lstrip('?'))

    @staticmethod
    def _varies(where):
        return where.startswith('?')

    @staticmethod
    def same_reason(listed, said):
        """Whether a test that said @said skipped for the reason @listed
        (what update() writes for a test that gave none included)"""
        said = ' '.join((said or '').split()) or '(no reason given)'
        return ' '.join(listed.split()) == said

    def lookup(self, suite, test):
        for where, name, reason in self.entries:
            if name == test and self._matches(where, suite):
                return reason
        return None

    def check(self, res):
        """Turn each skip that is not expected into a failure, and each
        expected skip of a suite that ran that did not happen, unless its
        entry says that it varies between machines of this kind.  Return
        those, as (suite, test, what happened): they are reported."""
        ran = {i['suite'] for i in res.items}
        by_test = {(i['suite'], i['test']): i for i in res.items}
        for i in res.items:
            if i['status'] != 'skip':
                continue
            reason = self.lookup(i['suite'], i['test'])
            if reason is None:
                i['status'] = 'fail'
                i['detail'] = (f'skipped, and not in tests/expected-skips: '
                               f'{i["detail"]}')
                log(f'  NEW SKIP: {i["suite"]} {i["test"]}: {i["detail"]}')
            elif not self.same_reason(reason, i['detail']):
                i['status'] = 'fail'
                i['detail'] = (f'skipped for another reason than '
                               f'tests/expected-skips lists ({reason}): '
                               f'{i["detail"] or "(no reason given)"}')
                log(f'  SKIP REASON: {i["suite"]} {i["test"]}: {i["detail"]}')
        gone = []
        for suite in sorted(ran):
            for where, name, reason in self.entries:
                if not self._matches(where, suite):
                    continue
                i = by_test.get((suite, name))
                if i is not None and i['status'] == 'skip':
                    continue
                what = ('did not run' if i is None else
                        f'ended as {i["status"]}')
                detail = f'{what}; listed as skipping ({reason})'
                if self._varies(where):
                    gone.append((suite, name, detail))
                    continue
                detail = f'expected to skip (tests/expected-skips), {detail}'
                if i is None:
                    res.add(suite, name, 'fail', detail)
                else:
                    i['status'] = 'fail'
                    i['detail'] = detail
                log(f'  SKIP GONE: {suite} {name}: {detail}')
        return gone

    def update(self, res):
        """Rewrite the file: the skips of this run for the suites it ran,
        the entries of other suites (or builds) as they were."""
        ran = {i['suite'] for i in res.items}
        keep = [e for e in self.entries
                if not any(self._matches(e[0], s) for s in ran)]
        varies = {(s, e[1]) for e in self.entries if self._varies(e[0])
                  for s in ran if self._matches(e[0], s)}
        new = [(('?' if (i['suite'], i['test']) in varies else '') + '*:' + i['suite'],
                i['test'], i['detail'] or '(no reason given)')
               for i in res.items if i['status'] == 'skip']
        with open(self.path, 'w', encoding='utf-8') as f:
            f.write(self.HEADER)
            for where, name, reason in sorted(tuple(e) for e in keep + new):
                reason = ' '.join(reason.split())
                f.write(f'{where:24} {name:23} {reason}\n')
        log(f'wrote {os.path.relpath(self.path, TOP)}: {len(new)} skips of '
            f'this run, {len(keep)} entries of other suites kept')


def skip_summary(res, suite):
    """The skips of suite (and its configurations), grouped by reason."""
    out = []
    subs = sorted({i['suite'] for i in res.items
                   if i['suite'].split(':')[0] == suite})
    for sub in subs:
        reasons = {}
        for i in res.items:
            if i['suite'] == sub and i['status'] == 'skip':
                reasons.setdefault(i['detail'] or '(no reason given)',
                                   []).append(i['test'])
        if not reasons:
            continue
        n = sum(len(t) for t in reasons.values())
        out.append(f'skipped in {sub}: {n}')
        for reason, tests in sorted(reasons.items(),
                                    key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(f'  {len(tests):4} {reason}: {" ".join(sorted(tests))}')
    return out


def descendants(pid):
    """All live descendants of pid, found through /proc."""
    children = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat', encoding='utf-8') as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(')', 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid, include_self=False):
    for p in descendants(pid) + ([pid] if include_self else []):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stream(cmd, timeout, on_line, env=None):
    """Run cmd in a session of its own, calling on_line for each line it
    prints; kill it and all its descendants after timeout seconds.
    Returns (exit status, whether it was killed)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    timer = threading.Timer(timeout, kill_tree, (p.pid, True))
    timer.start()
    for line in p.stdout:
        on_line(line)
    p.stdout.close()
    p.wait()
    timed_out = not timer.is_alive()
    timer.cancel()
    return p.returncode, timed_out


def qemu_env(build):
    env = dict(os.environ)
    env.update({
        'QTEST_QEMU_BINARY': f'{build}/qemu-system-x86_64',
        'QTEST_QEMU_IMG': f'{build}/qemu-img',
        'QTEST_QEMU_STORAGE_DAEMON_BINARY':
            f'{build}/storage-daemon/qemu-storage-daemon',
        'PYTHONUNBUFFERED': '1',
        'MALLOC_PERTURB_': '219',
    })
    return env


def run_smoke(build, res):
    log('== smoke (tests/smoke.py)')
    r = subprocess.run([sys.executable, f'{TOP}/tests/smoke.py', build],
                       capture_output=True, text=True, timeout=300,
                       check=False)
    print(r.stdout + r.stderr, end='', flush=True)
    n = 0
    for line in r.stdout.splitlines():
        m = re.match(r'^(ok|FAIL) +([^:]+)(?::(.*))?$', line)
        if m:
            n += 1
            res.add('smoke', m.group(2).strip(),
                    'pass' if m.group(1) == 'ok' else 'fail', m.group(3) or '')
    if r.returncode != 0 and n == 0:
        res.add('smoke', 'smoke.py', 'fail', f'exit status {r.returncode}')


class Started:
    """A command started now at the lowest CPU priority, beside the suites,
    and reported later (run_reported(..., started=...)): its output is
    kept until then.  For checks that take a while but little CPU."""

    def __init__(self, cmd, timeout, env=None):
        self.cmd = cmd
        self.lines = []
        self.result = None
        self.thread = threading.Thread(
            target=self._run, args=(['nice', '-n', '19'] + cmd, timeout, env),
            daemon=True)
        self.thread.start()

    def _run(self, cmd, timeout, env):
        t0 = time.monotonic()
        self.result = stream(cmd, timeout, self.lines.append, env=env)
        self.took = time.monotonic() - t0

    def wait(self):
        self.thread.join()
        return self.result


def run_reported(cmd, pattern, want, timeout, suite, res, env=None, started=None):
    """Run cmd, which prints a line per test that @pattern matches, with
    the groups ok|FAIL, the test's name and a detail.  A test of @want
    that it does not report fails, and so does an exit status that no
    failed test explains.  With @started (a Started of cmd), wait for it
    and report its output instead of running cmd again."""
    seen = set()
    name = os.path.basename(cmd[0])

    def on_line(line):
        print('   ', line, end='', flush=True)
        m = re.match(pattern, line.rstrip())
        if m:
            seen.add(m.group(2))
            res.add(suite, m.group(2),
                    'pass' if m.group(1) == 'ok' else 'fail', m.group(3))

    if started:
        rc, timed_out = started.wait()
        log(f'    (started beside the suites, took {started.took:.0f} s)')
        for line in started.lines:
            on_line(line)
    else:
        rc, timed_out = stream(cmd, timeout, on_line, env=env)
    if timed_out:
        res.add(suite, name, 'timeout', f'killed after {timeout}s')
        return
    for test in want:
        if test not in seen:
            res.add(suite, test, 'fail', f'not reported ({name} exit status {rc})')
    # An expected failure (tests/known-failures) explains the exit status too.
    if rc != 0 and not any(i['status'] in ('fail', 'xfail') for i in res.items
                           if i['suite'] == suite):
        res.add(suite, name, 'fail', f'exit status {rc}, no test failed')


def chaos_names(vdir, configs, qemu):
    """What chaos.sh must report on @qemu: test-image, every case in each of
    its configurations (split and packed rings, aio threads, native and
    io_uring; two IOThreads where @qemu has iothread-vq-mapping), every
    self-test; chaos.sh --list names them."""
    out = subprocess.run([f'{vdir}/chaos.sh', *configs, '--list', qemu],
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def run_chaos(build, res, suite='chaos', configs=None):
    """bench/vblk-load/chaos.sh: vblk-load as a broken or malicious guest on
    one queue while another does checked I/O, each case in a fresh QEMU
    (docs/vblk-load.md), in all of chaos.sh's configurations or only in
    @configs.  A case that chaos.sh does not report fails."""
    configs = ['--configs', ','.join(configs)] if configs else []
    log(f'== hostile driver (bench/vblk-load/chaos.sh) on {os.path.relpath(build, TOP)}')
    vdir = f'{TOP}/bench/vblk-load'
    r = subprocess.run(['make', '-s', '-C', vdir, 'vblk-load', 'test-image'],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        print(r.stdout + r.stderr, end='', flush=True)
        res.add(suite, 'build', 'fail', f'make exited {r.returncode}')
        return
    run_reported([f'{vdir}/chaos.sh', *configs, f'{build}/qemu-system-x86_64'],
                 r'^(ok|FAIL) +(\S+?): (.*)$',
                 chaos_names(vdir, configs, f'{build}/qemu-system-x86_64'),
                 CHAOS_TIMEOUT, suite, res)


# What --beside TARGET makes (make's arguments)
BESIDE_TARGETS = {'fuzz-build': ['fuzz-build'], 'base': ['base'],
                  'debug-build': ['debug-build'],
                  'trixie-fork': ['fork', 'LINE=trixie']}


class Beside:
    """make targets built beside the test suites, one after the other, at
    the lowest CPU priority.  The suites leave much of the machine idle (a
    warm 'make test' on 2 cores used 18 of the 48 CPU-minutes it had), so
    the builds that only the last suites need cost little time there."""

    def __init__(self, targets):
        self.log = f'{TOP}/build/beside.log'
        self.rc = {t: None for t in targets}
        self.done = {t: threading.Event() for t in targets}
        if targets:
            log(f'== make {" ".join(targets)}, beside the suites '
                f'(log: {os.path.relpath(self.log, TOP)})')
            threading.Thread(target=self._run, args=(targets,),
                             daemon=True).start()

    def _run(self, targets):
        with open(self.log, 'w', encoding='utf-8') as f:
            for t in targets:
                f.write(f'== make {t}\n')
                f.flush()
                self.rc[t] = subprocess.run(['nice', '-n', '19', 'make',
                                             *BESIDE_TARGETS[t]],
                                            cwd=TOP, stdout=f,
                                            stderr=subprocess.STDOUT,
                                            check=False).returncode
                self.done[t].set()

    def ready(self, target, suite, res):
        """Wait for target if it is built here; False (and one failure in
        suite) if that build failed."""
        if target not in self.done:
            return True
        self.done[target].wait()
        if self.rc[target] != 0:
            with open(self.log, encoding='utf-8', errors='replace') as f:
                print(''.join(f.readlines()[-30:]), end='', flush=True)
            res.add(suite, f'make {target}', 'fail',
                    f'exit status {self.rc[target]} (log: build/beside.log)')
            return False
        return True


def run_fuzz(build, res):
    """scripts/fuzz.sh: each virtio-blk libFuzzer target of the fuzzing
    build (build/fuzz/qemu, made by 'make fuzz-build') for a short while, so
    that the targets keep building and running (docs/fuzzing.md).  The
    fuzzing build is of the fork's source, so the suite says nothing about
    another build."""
    log('== fuzzing smoke run (scripts/fuzz.sh)')
    if os.path.basename(build) != 'fork':
        res.add('fuzz', 'fuzz.sh', 'skip', 'the fuzzing build is of the fork')
        return
    if not os.path.exists(f'{TOP}/build/fuzz/qemu/qemu-fuzz-i386'):
        res.add('fuzz', 'fuzz.sh', 'fail',
                'no build/fuzz/qemu/qemu-fuzz-i386: run make fuzz-build')
        return
    # A fresh corpus each time (a campaign's would take longer to load
    # than the run lasts), and its own logs.
    fdir = f'{TOP}/build/fuzz/test'
    subprocess.run(['rm', '-rf', fdir], check=True)
    env = dict(os.environ, FUZZ_SECONDS=str(FUZZ_TEST_SECONDS),
               FUZZ_TARGETS=' '.join(FUZZ_TARGETS), FUZZ_DIR=fdir)
    run_reported([f'{TOP}/scripts/fuzz.sh'], r'^fuzz: (ok|FAIL) (\S+?): (.*)$',
                 FUZZ_TARGETS, len(FUZZ_TARGETS) * (FUZZ_TEST_SECONDS + 120),
                 'fuzz', res, env)


def run_guest(build, res, suite='guest', cases=()):
    """tests/guest/run.py: real Linux guests under TCG (docs/guest-tests.md),
    all the cases of the build's subset, or only @cases.  Every case has its
    own timeout; this one only bounds a stuck harness."""
    log(f'== guest end-to-end tests (tests/guest/run.py) on '
        f'{os.path.relpath(build, TOP)}')
    n = 0

    def on_line(line):
        nonlocal n
        print('   ', line, end='', flush=True)
        m = re.match(r'^(ok|FAIL|skip) (\S+?)(?:: (.*))?(?: \(\d+s\))?$', line.rstrip())
        if m:
            n += 1
            res.add(suite, m.group(2),
                    {'ok': 'pass', 'FAIL': 'fail'}.get(m.group(1), 'skip'),
                    m.group(3) or '')

    cmd = [sys.executable, f'{TOP}/tests/guest/run.py', '--build',
           os.path.relpath(build, f'{TOP}/build')]
    if cases:
        cmd += ['--case', *cases]
    rc, timed_out = stream(cmd, GUEST_TIMEOUT, on_line)
    if timed_out:
        res.add(suite, 'run.py', 'timeout', f'killed after {GUEST_TIMEOUT}s')
    elif rc != 0 and not any(i['status'] == 'fail' for i in res.items
                             if i['suite'] == suite):
        res.add(suite, 'run.py', 'fail',
                f'exit status {rc}, {n} cases reported')
    if not cases and not timed_out:
        check_guest_cases(build, res, suite)


# The planted defects of docs/testing.md#planted-defects: runs of
# tests/guest/run.py that must FAIL, and say why in words that match
# (name, case, options, what the FAIL line must say).  A run that passes
# is a blind check; one that fails some other way proves nothing.
PLANTED = [
    # Every guest notification after the first 200 is dropped: the guest
    # waits for an interrupt that never comes, and the case times out.
    ('lost-interrupt', 'pw-threads-noiot-q1-evidx-split-raw',
     ['--break-notify', '200', '--timeout-scale', '0.25'], r'^timeout'),
    # Write 450 reaches no image: round 3 rewrites the region that round
    # 1 wrote, and fio's verify of round 3 finds round 1's data.
    ('lost-write-rounds', 'rounds4', ['--subset', 'long', '--drop-write', '450'],
     r'@@ERROR fio verify-r\d+-rd0 rc=\d+.*\[dropped write 450:'),
    # Write 4500 is in the second pass; with --drop-write the first unplug
    # waits for that pass to complete (ops.sc_unplug_inflight), so the
    # check after the replug finds the block whatever the timing.
    ('lost-write-unplug', 'unplug-inflight', ['--drop-write', '4500'],
     r'@@ERROR check-\S+: .*\[dropped write 4500:'),
    # Write 4400 of at least 4 KiB is early in pass 2, the pass that the
    # reset cuts once its header says 2 of its 16 chunks completed: the
    # next boot finds the block of a complete chunk without pass 2.
    ('lost-write-reset', 'reset-once',
     ['--subset', 'long', '--drop-write', '4400', '--drop-min-bytes', '4096'],
     r'@@ERROR check-boot2: .*\[dropped write 4400:'),
]
PLANTED_TIMEOUT = 900


def run_planted(build, res, planted=None, runner=None):
    """Each planted defect of PLANTED (or @planted) on @build: the guest
    case must FAIL as its pattern says (res: pass), never pass (fail: the
    check is blind) nor fail otherwise (fail: the defect was not what
    failed it).  @runner: tests/guest/run.py, or a stand-in for the unit
    tests."""
    log('== planted defects: guest cases that must fail (tests/guest/run.py)')
    runner = runner or f'{TOP}/tests/guest/run.py'
    for name, case, opts, want in planted or PLANTED:
        cmd = [sys.executable, runner, '--build',
               os.path.relpath(build, f'{TOP}/build'), '--case', case, *opts]
        lines = []

        def on_line(line, lines=lines):
            print('   ', line, end='', flush=True)
            lines.append(line.rstrip('\n'))

        rc, timed_out = stream(cmd, PLANTED_TIMEOUT, on_line)
        got = [l for l in lines if re.match(rf'(ok|FAIL) {re.escape(case)}\b', l)]
        what = f'{case} {" ".join(opts)}'
        if timed_out:
            res.add('planted', name, 'timeout', f'{what}: killed after {PLANTED_TIMEOUT}s')
        elif len(got) != 1:
            res.add('planted', name, 'fail', f'{what}: {len(got)} results for the case'
                    f' (exit status {rc})')
        elif got[0].startswith('ok '):
            res.add('planted', name, 'fail', f'{what}: the case passed; its check is blind'
                    f' to the planted defect ({got[0]})')
        elif rc == 0 or not re.search(want, got[0].split(': ', 1)[-1]):
            res.add('planted', name, 'fail', f'{what}: failed, but not as planted'
                    f' (want /{want}/, exit status {rc}): {got[0]}')
        else:
            res.add('planted', name, 'pass', f'seen: {got[0]}')


def expected_guest_cases(subset, path=None):
    """The cases of @subset in tests/expected-guest-cases"""
    path = path or f'{TOP}/tests/expected-guest-cases'
    names = []
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0].startswith('#'):
                continue
            if len(fields) != 2:
                sys.exit(f'{path}:{n}: expected "SUBSET CASE"')
            if fields[0] == subset:
                names.append(fields[1])
    return names


def check_guest_cases(build, res, suite, path=None):
    """A case listed for the build's subset that did not report fails, and
    so does a case that reported and is not listed"""
    subset = 'base' if os.path.basename(build) == 'base' else 'all'
    want = expected_guest_cases(subset, path)
    got = {i['test'] for i in res.items if i['suite'] == suite}
    for name in want:
        if name not in got:
            res.add(suite, name, 'fail', 'listed in tests/expected-guest-cases '
                    f'({subset}) and did not report')
    for i in res.items:
        if (i['suite'] == suite and i['test'] not in want
                and i['test'] != 'run.py'):
            i['status'] = 'fail'
            i['detail'] = (f'not in tests/expected-guest-cases ({subset}); '
                           f'{i["detail"]}')


def run_libvirt(build, res):
    """tests/libvirt.py: a libvirt domain whose <emulator> is this build.
    It skips (visibly, never as a pass) only where libvirt cannot be
    installed."""
    log('== libvirt end to end (tests/libvirt.py)')
    n = 0

    def on_line(line):
        nonlocal n
        print('   ', line, end='', flush=True)
        m = re.match(r'^(ok|FAIL|SKIP) (\S+?)(?:: (.*))?$', line.rstrip())
        if m:
            n += 1
            res.add('libvirt', m.group(2),
                    {'ok': 'pass', 'FAIL': 'fail', 'SKIP': 'skip'}[m.group(1)],
                    m.group(3) or '')

    rc, timed_out = stream([sys.executable, f'{TOP}/tests/libvirt.py', '--emulator',
                            f'{build}/qemu-system-x86_64'], LIBVIRT_TIMEOUT, on_line)
    if timed_out:
        res.add('libvirt', 'libvirt.py', 'timeout', f'killed after {LIBVIRT_TIMEOUT}s')
    elif n == 0 or (rc != 0 and not any(i['status'] == 'fail' for i in res.items
                                        if i['suite'] == 'libvirt')):
        res.add('libvirt', 'libvirt.py', 'fail', f'exit status {rc}, {n} checks reported')


def run_docs(res):
    """tests/docs.py: links in README.md and docs/, make help, make check,
    the tables of the record of runs."""
    log('== docs (tests/docs.py)')
    run_reported([sys.executable, f'{TOP}/tests/docs.py'],
                 r'^(ok|FAIL) (\S+?)(?:: (.*))?$',
                 ['links:README.md', 'links-checker', 'make-help', 'make-check', 'runs'],
                 300, 'docs', res)


CONFIGURE_CMD = [sys.executable, f'{TOP}/tests/configure.py']
CONFIGURE_TIMEOUT = 900


def start_configure():
    """tests/configure.py, started beside the first suites: most of its
    minute is 10.0's configure, which waits on the compiler more than it
    uses the machine."""
    return Started(CONFIGURE_CMD, CONFIGURE_TIMEOUT)


def run_configure(res, started):
    """tests/configure.py: the configure lines of scripts/build.sh fit the
    7.2 and 10.0 trees (configure --help, and 10.0's configure run)."""
    log('== configure lines (tests/configure.py)')
    run_reported(CONFIGURE_CMD, r'^(ok|FAIL) (\S+?)(?:: (.*))?$',
                 ['fetch-upstream', 'options:upstream', 'options:base',
                  'configure:upstream'],
                 CONFIGURE_TIMEOUT, 'configure', res, started=started)


def run_packaging(build, res):
    """tests/packaging.py: versions, make install/uninstall (a stand-in
    build into a DESTDIR), the signed apt repository and qemu-iobatch-apt,
    the held-back check and its fallback command (a private apt
    configuration), and the build's --version."""
    log('== packaging (tests/packaging.py)')
    want = ['version-series', 'version-rev', 'version-rev-grows', 'version-rev-shallow',
            'version-rev-tarball', 'build-version', 'deb-changelog-merge', 'deb-src-metadata',
            'deb-src-metadata-trixie', 'deb-profile-packages-bookworm',
            'deb-profile-packages-trixie', 'install-uninstall', 'install-refuses',
            'repo-install', 'repo-signed', 'repo-rejects-other-key',
            'repo-rejects-modified-release', 'repo-rejects-modified-packages',
            'repo-apt-package', 'repo-migrate-setup-apt', 'repo-upgrade', 'held-back-newer', 'held-back-fallback',
            'held-back-hook']
    run_reported([sys.executable, f'{TOP}/tests/packaging.py', '--build', build],
                 r'^(ok|FAIL) (\S+?)(?:: (.*))?$', want, 900, 'packaging', res)


def run_check_update(res):
    """tests/check-update.py: make check-update against the archive, for
    each line with its pin and with an older pin, one line failing beside
    the other, and make fetch refusing a pin whose sha256 is wrong."""
    log('== make check-update (tests/check-update.py)')
    lines = sorted(d for d in os.listdir(f'{TOP}/lines')
                   if os.path.isfile(f'{TOP}/lines/{d}/base.pin'))
    want = ['every-line/verdicts', 'per-line/one-line-fails']
    for line in lines:
        want += [f'{line}/older/newer-version-found', f'{line}/older/verified-and-unpacked',
                 f'{line}/older/every-patch-reported', f'{line}/older/series-applies',
                 f'{line}/older/pin-rewritten', f'fetch/{line}/verified',
                 f'fetch/{line}/refuses-wrong-sha256']
    run_reported([sys.executable, f'{TOP}/tests/check-update.py'],
                 r'^(ok|FAIL) (\S+?)(?:: (.*))?$', want, 1800, 'check-update', res)


def run_unit(build, res, jobs, suite='unit'):
    log(f'== unit tests ({suite})')
    logbase = 'iobatch-unit'
    r = subprocess.run(['meson', 'test', '-C', build, '--suite', 'unit',
                        '--no-rebuild', '--num-processes', str(jobs),
                        '--print-errorlogs', '--logbase', logbase],
                       env=qemu_env(build), check=False)
    path = f'{build}/meson-logs/{logbase}.json'
    if not os.path.exists(path):
        res.add(suite, 'meson-test', 'fail', f'meson test exited {r.returncode}')
        return
    status = {'OK': 'pass', 'SKIP': 'skip', 'TIMEOUT': 'timeout',
              'EXPECTEDFAIL': 'pass'}
    with open(path, encoding='utf-8') as f:
        for line in f:
            t = json.loads(line)
            st = status.get(t['result'], 'fail')
            detail = t['result']
            if st == 'skip':
                detail = tap_skip_reason(t.get('stdout', ''))
            res.add(suite, t['name'], st, detail)


def tap_skip_reason(out):
    """Why a TAP test binary skipped, from its output: the reason of its
    "1..0 # SKIP" plan or of its skipped test cases."""
    reasons = []
    for line in (out or '').splitlines():
        m = re.search(r'# SKIP\b:?\s*(.*)$', line, re.I)
        if m and m.group(1).strip() and m.group(1).strip() not in reasons:
            reasons.append(m.group(1).strip())
    return '; '.join(reasons) or '(no reason in its output)'


TAP_RE = re.compile(r'^(ok|not ok) \d+ (\S+)(.*)$')


def run_tap_binary(cmd, build, suite, res, timeout):
    """Run a glib test binary with --tap; one result per test case."""
    log(f'-- {" ".join(cmd)}')
    if not os.access(cmd[0], os.X_OK):
        res.add(suite, os.path.basename(cmd[0]), 'fail',
                f'not built: {cmd[0]} is missing')
        return
    seen = 0

    def on_line(line):
        nonlocal seen
        m = TAP_RE.match(line)
        if not m:
            if not line.startswith('#') and line.strip():
                print('   ', line, end='')
            return
        seen += 1
        detail = m.group(3).strip()
        if m.group(1) == 'ok':
            skip = re.match(r'^# SKIP\b:?\s*(.*)$', detail, re.I)
            status = 'skip' if skip else 'pass'
            if skip:
                detail = skip.group(1) or '(no reason given)'
        else:
            status = 'fail'
        res.add(suite, m.group(2), status, detail)

    rc, timed_out = stream(cmd + ['--tap', '-k'], timeout, on_line,
                           env=qemu_env(build))
    if timed_out:
        res.add(suite, os.path.basename(cmd[0]), 'timeout',
                f'killed after {timeout}s')
    elif rc != 0 or seen == 0:
        res.add(suite, os.path.basename(cmd[0]), 'fail',
                f'exit status {rc}, {seen} test cases reported')


def qos_prefixes(build):
    """The qos-test path prefixes that end at the block devices we test."""
    out = subprocess.run([f'{build}/tests/qtest/qos-test', '-l'],
                         env=qemu_env(build), capture_output=True,
                         text=True, check=True).stdout.split()
    prefixes = set()
    for path in out:
        if not path.startswith('/x86_64/'):
            continue
        parts = path.split('/')
        for dev in QOS_DEVICES:
            if dev in parts:
                prefixes.add('/'.join(parts[:parts.index(dev) + 1]))
    return sorted(prefixes)


def run_qtests(build, res, suite='qtest'):
    log(f'== block qtests (x86_64) on {os.path.relpath(build, TOP)}')
    qos = f'{build}/tests/qtest/qos-test'
    if os.access(qos, os.X_OK):
        prefixes = qos_prefixes(build)
        why = 'no qos-test path for this device'
    else:
        prefixes = []
        why = f'not built: {qos} is missing'
    for dev in QOS_DEVICES:
        if not any(p.endswith('/' + dev) for p in prefixes):
            res.add(suite, f'qos-test:{dev}', 'fail', why)
    for prefix in prefixes:
        run_tap_binary([qos, '-r', prefix], build, suite, res,
                       QTEST_TIMEOUT)
    for t in QTESTS:
        run_tap_binary([f'{build}/tests/qtest/{t}'], build, suite, res,
                       QTEST_TIMEOUT)


def run_tcg_tests(build, res, suite, tests):
    """Build and run TCG system tests of the series with the build's own
    tests/tcg makefiles; each test's output (its .out file) is shown."""
    tcg = f'{build}/tests/tcg/x86_64-softmmu'
    log(f'== TCG system tests on {os.path.relpath(build, TOP)}')
    for t in tests:
        name = f'tcg:{t}'
        if not os.path.exists(f'{tcg}/Makefile'):
            res.add(suite, name, 'fail',
                    f'no {os.path.relpath(tcg, TOP)}/Makefile: configure '
                    'found no compiler for x86_64 system tests (install gcc)')
            continue
        out = f'{tcg}/{t}.out'
        if os.path.exists(out):
            os.unlink(out)
        cmd = ['make', '-C', tcg, f'run-{t}']
        rc, timed_out = stream(cmd, QTEST_TIMEOUT,
                               lambda line: print('   ', line, end=''))
        lines = []
        if os.path.exists(out):
            with open(out, errors='replace') as f:
                lines = f.readlines()
            for line in lines:
                print('    |', line, end='')
        if timed_out:
            res.add(suite, name, 'timeout', f'killed after {QTEST_TIMEOUT}s',
                    output=lines)
        elif rc != 0:
            res.add(suite, name, 'fail', f'make run-{t}: exit status {rc}',
                    output=lines)
        else:
            res.add(suite, name, 'pass', '')


def run_debug(tested, res, jobs):
    """The unit tests and the virtio-blk and virtio-scsi qtests on build/dbg
    (make debug-build): the fork with --enable-debug-defer-call, where a
    blocking aio_poll() with deferred calls queued aborts."""
    build = f'{TOP}/build/dbg'
    log('== debug check of deferred calls (build/dbg)')
    if os.path.basename(tested) != 'fork':
        res.add('debug', 'debug-build', 'skip', 'build/dbg is of the fork')
        return
    if not os.path.exists(f'{build}/qemu-system-x86_64'):
        res.add('debug', 'debug-build', 'fail',
                'no build/dbg/qemu-system-x86_64: run make debug-build')
        return
    run_unit(build, res, jobs, 'debug')
    qos = f'{build}/tests/qtest/qos-test'
    prefixes = [p for p in qos_prefixes(build)
                if p.endswith(('/virtio-blk-pci', '/virtio-scsi-pci'))]
    if not prefixes:
        res.add('debug', 'qos-test', 'fail', 'no virtio-blk-pci qos-test path')
    for prefix in prefixes:
        run_tap_binary([qos, '-r', prefix], build, 'debug', res,
                       QTEST_TIMEOUT)


def run_check(build, config, tests, res, timeout, tmp):
    """Run qemu-iotests' check on the given tests; a watchdog kills the
    test that is running when it exceeds its time limit."""
    suite = f'iotests:{config}'
    args = IOTEST_CONFIGS[config]
    env = qemu_env(build)
    env['TEST_DIR'] = tempfile.mkdtemp(prefix='scratch', dir=tmp)
    env['SOCK_DIR'] = tempfile.mkdtemp(prefix='sock', dir=tmp)
    cmd = ['./check', '-tap'] + args + tests
    tag = f'[{config}]'
    p = subprocess.Popen(cmd, cwd=f'{build}/tests/qemu-iotests', env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    current = {'test': None, 'since': 0.0, 'killed': set()}
    lock = threading.Lock()
    done = threading.Event()

    def limit(test):
        kind, _ = res.known.lookup(suite, test)
        return HANG_TIMEOUT if kind == 'hang' else timeout

    def watchdog():
        while not done.wait(1):
            with lock:
                t = current['test']
                if t and time.monotonic() - current['since'] > limit(t):
                    log(f'  TIMEOUT: {suite} {t}: killing it after {limit(t)}s')
                    current['killed'].add(t)
                    current['test'] = None
                    kill_tree(p.pid)

    w = threading.Thread(target=watchdog, daemon=True)
    w.start()
    results, reasons, outputs = {}, {}, {}
    failed = None       # check prints a failed test's diff after "not ok"
    for line in p.stdout:
        print(f'    {tag} {line}', end='', flush=True)
        m = re.match(r'^# running \S+ (\S+)$', line)
        if m:
            failed = None
            with lock:
                current['test'], current['since'] = m.group(1), time.monotonic()
            continue
        m = re.match(r'^(ok|not ok) \S+ (\S+)( # SKIP)?', line)
        if not m:
            if failed:
                outputs[failed].append(line.rstrip('\n'))
            continue
        failed = None
        with lock:
            current['test'] = None
        if m.group(1) == 'not ok':
            status = 'fail'
            failed = m.group(2)
            outputs[failed] = []
        else:
            status = 'skip' if m.group(3) else 'pass'
        results[m.group(2)] = status
        if status == 'skip':
            reasons[m.group(2)] = notrun_reason(env['TEST_DIR'], m.group(2))
    p.stdout.close()
    p.wait()
    done.set()
    w.join()
    for t in tests:
        status = results.get(t)
        if t in current['killed']:
            status = 'timeout'
        elif status is None:
            status = 'fail'
        results[t] = status
    return suite, results, reasons, outputs


def notrun_reason(test_dir, test):
    """Why an iotest did not run: the .notrun file it left in TEST_DIR
    (TEST_DIR/TEST/ when check runs tests in parallel)."""
    for d in (test_dir, os.path.join(test_dir, test)):
        try:
            with open(os.path.join(d, f'{test}.notrun'), encoding='utf-8',
                      errors='replace') as f:
                return ' '.join(f.read().split()) or '(empty .notrun file)'
        except OSError:
            pass
    return '(no .notrun file)'


def iotests_config(build, res, config, timeout, tmp):
    """One iotests configuration: the quick group and EXTRA_IOTESTS, the
    tests listed as flaky run once more.  Returns what res.add() takes,
    for the caller to add in the order of the configurations."""
    check = f'{build}/tests/qemu-iotests'
    fmt = IOTEST_CONFIGS[config][0]
    tests = subprocess.run(['./check', '-n', fmt, '-g', 'quick'] +
                           EXTRA_IOTESTS, cwd=check,
                           capture_output=True, text=True,
                           check=True).stdout.split()
    # Tests in the tests/ subdirectory are selected by name only.
    tests = [os.path.basename(t) for t in tests]
    start = time.monotonic()
    suite, results, reasons, outputs = run_check(build, config, tests, res,
                                                 timeout, tmp)
    retry = [t for t, s in results.items()
             if s in ('fail', 'timeout') and res.is_flaky(suite, t)]
    first = {}
    if retry:
        log(f'  RETRY (listed as flaky): {suite} {" ".join(retry)}')
        _, again, again_reasons, again_outputs = run_check(
            build, config, retry, res, timeout, tmp)
        for t in retry:
            log(f'  RETRY: {suite} {t}: {results[t]} then {again[t]}')
            first[t] = results[t]
            results[t] = again[t]
            if t in again_reasons:
                reasons[t] = again_reasons[t]
            outputs[t] = again_outputs.get(t)
    took = int(time.monotonic() - start)
    log(f'  {suite}: {len(tests)} tests in {took // 60}:{took % 60:02d}')
    return [(suite, t, results[t], reasons.get(t, ''), first.get(t),
             outputs.get(t)) for t in tests]


def run_iotests(build, res, configs, timeout, jobs):
    """The iotests configurations, JOBS of them at a time: each is one
    ./check with its own TEST_DIR, SOCK_DIR and watchdog.  They wait on
    I/O and sleeps far more than on the CPU, so two at a time halves the
    wall time on two cores.  (check -j would run tests of one
    configuration in parallel, but then the watchdog cannot tell which
    test to kill.)"""
    log(f'== qemu-iotests: {", ".join(configs)} ({jobs} at a time)')
    for config in configs:
        log(f'  {config}: {" ".join(IOTEST_CONFIGS[config])}')
    with tempfile.TemporaryDirectory(prefix='iobatch_iotests_') as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = [pool.submit(iotests_config, build, res, config, timeout, tmp)
                for config in configs]
        # Added in the order of the configurations, whichever ends first
        for run in runs:
            for suite, test, status, reason, first, output in run.result():
                res.add(suite, test, status, reason, retried=first,
                        output=output)


def summary_line(res):
    """The counts first, as .ci/run has always ended: "N passed, N failed,
    N skipped"; then how many of the passes needed a retry."""
    bad = sum(1 for i in res.items if i['status'] in ('fail', 'timeout'))
    return (f'{res.count("pass") + res.count("xpass")} passed, {bad} failed, '
            f'{res.count("skip")} skipped (passed after a retry: '
            f'{res.retried_passes()})')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--build', default='fork',
                    help='build to test: a name under build/ or a path '
                         '(default: fork)')
    ap.add_argument('--suite', action='append',
                    choices=SUITES,
                    help='run only this suite (repeatable)')
    ap.add_argument('--no-suite', action='append', default=[], metavar='SUITE',
                    choices=SUITES,
                    help='leave this suite out of the default ones (repeatable; no '
                    'effect beside --suite): make test leaves out fuzz, which make '
                    'test-full runs')
    ap.add_argument('--iotests', action='append',
                    choices=sorted(IOTEST_CONFIGS),
                    help='run only this iotests configuration (repeatable)')
    ap.add_argument('--iotest-timeout', type=int, default=300,
                    help='seconds one iotest may take (default: 300)')
    ap.add_argument('--iotest-jobs', type=int, default=2, metavar='N',
                    help='iotests configurations to run at a time '
                    '(default 2)')
    ap.add_argument('--jobs', type=int, default=os.cpu_count())
    ap.add_argument('--beside', action='append', default=[], metavar='TARGET',
                    choices=list(BESIDE_TARGETS),
                    help='make TARGET beside the suites, at low priority; '
                         'the suites that need it wait for it (repeatable)')
    ap.add_argument('--base', metavar='BUILD',
                    help='also run the hostile driver and the guest soak on '
                         'this build of the unpatched base, for comparison '
                         '(suites chaos-base, soak-base)')
    ap.add_argument('--trixie', metavar='BUILD',
                    help='also run the block qtests, the hostile driver and '
                         'the guest cases that need it on this build of the '
                         'trixie line\'s fork (make fork LINE=trixie: '
                         'build/trixie/fork; suites qtest-trixie, '
                         'chaos-trixie, guest-trixie)')
    ap.add_argument('--update-expected-skips', action='store_true',
                    help='rewrite tests/expected-skips from the skips of '
                         'this run (the suites it ran), instead of checking '
                         'them against it')
    ap.add_argument('--json', help='write the results here')
    ap.add_argument('--summary', help='write the summary line here')
    args = ap.parse_args()

    build = build_path(args.build)
    if not os.path.exists(f'{build}/qemu-system-x86_64'):
        sys.exit(f'run.py: {build} has no qemu-system-x86_64; build it first '
                 f'(make build)')
    suites = args.suite or list(SUITES)
    if not args.suite and os.path.basename(build) != 'fork':
        # The planted defects test the checks of the harness, not the
        # QEMU under them: once, on the fork, is enough.
        suites.remove('planted')
    if args.no_suite and not args.suite:
        suites = [x for x in suites if x not in args.no_suite]
        log(f'== not run here: {", ".join(args.no_suite)} (--no-suite; make test-full'
            ' runs every suite)')
    res = Results(KnownFailures(f'{TOP}/tests/known-failures',
                                os.path.basename(build)))
    t0 = time.monotonic()
    # Only what the chosen suites need: the base for its comparison runs
    base_suites = [x for x in ('chaos', 'guest') if x in suites] if args.base else []
    # and the trixie line's fork for the suites that run there too
    trixie_suites = ([x for x in ('qtest', 'chaos', 'guest') if x in suites]
                     if args.trixie else [])
    beside = Beside([t for t in args.beside
                     if (t, True) in (('fuzz-build', 'fuzz' in suites),
                                      ('base', bool(base_suites)),
                                      ('debug-build', 'debug' in suites),
                                      ('trixie-fork', bool(trixie_suites)))])

    configure = start_configure() if 'configure' in suites else None
    if 'docs' in suites:
        run_docs(res)
    if 'packaging' in suites:
        run_packaging(build, res)
    if 'smoke' in suites:
        run_smoke(build, res)
    if 'chaos' in suites:
        run_chaos(build, res)
    if 'unit' in suites:
        run_unit(build, res, args.jobs)
    if 'qtest' in suites:
        run_qtests(build, res)
    if 'iotests' in suites:
        run_iotests(build, res, args.iotests or list(IOTEST_CONFIGS),
                    args.iotest_timeout, args.iotest_jobs)
    if 'guest' in suites:
        run_guest(build, res)
    if 'planted' in suites:
        run_planted(build, res)
    if 'libvirt' in suites:
        run_libvirt(build, res)
    if 'check-update' in suites:
        run_check_update(res)
    if configure:
        run_configure(res, configure)
    if 'fuzz' in suites and beside.ready('fuzz-build', 'fuzz', res):
        run_fuzz(build, res)
    if base_suites:
        base = build_path(args.base)
        if 'chaos' in base_suites:
            suites.append('chaos-base')
            if beside.ready('base', 'chaos-base', res):
                run_chaos(base, res, 'chaos-base', CHAOS_BASE_CONFIGS)
        if 'guest' in base_suites:
            suites.append('soak-base')
            if beside.ready('base', 'soak-base', res):
                run_guest(base, res, 'soak-base', ['soak'])
    if 'debug' in suites and beside.ready('debug-build', 'debug', res):
        run_debug(build, res, args.jobs)
    if trixie_suites:
        trixie = build_path(args.trixie)
        for s in trixie_suites:
            suites.append(f'{s}-trixie')
        if beside.ready('trixie-fork', f'{trixie_suites[0]}-trixie', res):
            if 'qtest' in trixie_suites:
                run_qtests(trixie, res, 'qtest-trixie')
                run_tcg_tests(trixie, res, 'qtest-trixie', TCG_TESTS['trixie'])
                for t in UNIT_TESTS['trixie']:
                    run_tap_binary([f'{trixie}/tests/unit/{t}'], trixie, 'qtest-trixie',
                                   res, QTEST_TIMEOUT)
            if 'chaos' in trixie_suites:
                run_chaos(trixie, res, 'chaos-trixie')
            if 'guest' in trixie_suites:
                run_guest(trixie, res, 'guest-trixie', TRIXIE_GUEST_CASES)

    skips = ExpectedSkips(f'{TOP}/tests/expected-skips', os.path.basename(build))
    if args.update_expected_skips:
        skips.update(res)
        gone = []
    else:
        gone = skips.check(res)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump(res.items, f, indent=1)
    log(f'\n== summary ({os.path.relpath(build, TOP)}, '
        f'{(time.monotonic() - t0) / 60:.1f} min)')
    for s in suites:
        log(f'{s:10} {res.count("pass", s)} passed '
            f'({res.retried_passes(s)} after a retry), '
            f'{res.count("fail", s) + res.count("timeout", s)} failed, '
            f'{res.count("skip", s)} skipped, {res.count("xfail", s)} '
            f'expected failures, {res.count("xpass", s)} unexpected passes')
    for s in suites:
        for line in skip_summary(res, s):
            log(line)
    log('time per section (min:s; builds beside the suites overlap them):')
    for line in section_times():
        log(line)
    bad = [i for i in res.items if i['status'] in ('fail', 'timeout')]
    for i in res.items:
        if i.get('retried') and i['status'] in ('pass', 'xpass'):
            log(f'PASSED AFTER A RETRY: {i["suite"]} {i["test"]} (first '
                f'{i["retried"]})')
    for i in bad:
        log(f'FAILED: {i["suite"]} {i["test"]} ({i["status"]}) {i["detail"]}')
        for line in i.get('output', []):
            log(f'    | {line}')
    for i in res.items:
        if i['status'] == 'xpass':
            log(f'NOW PASSING (remove from tests/known-failures): '
                f'{i["suite"]} {i["test"]} ({i["detail"]})')
    for suite, test, what in gone:
        log(f'SKIP GONE (not a failure: listed as varying between machines '
            f'in tests/expected-skips): {suite} {test}: {what}')
    log(f'expected failures (tests/known-failures): {res.count("xfail")}')
    summary = summary_line(res)
    if args.summary:
        with open(args.summary, 'w', encoding='utf-8') as f:
            f.write(summary + '\n')
    log(summary)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
