#!/usr/bin/env python3
"""Guest end-to-end tests: real Linux guests under TCG drive a QEMU build.

    python3 tests/guest/run.py --build fork|base [--subset base] [--case NAME...]

Prints `ok NAME` / `FAIL NAME: reason` / `skip NAME: reason` (a case that needs a
device property this QEMU lacks) per case and `N passed, N failed, N skipped`;
exits 1 if any case failed.  See docs/guest-tests.md.
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='fork', help='build/NAME to test (fork, base)')
    ap.add_argument('--subset', choices=['all', 'base', 'long'], default=None,
                    help='base: the smaller subset (default for --build base); long: the '
                    'long forms, not in make test (all: every case but these)')
    ap.add_argument('--case', nargs='+', default=[], metavar='NAME',
                    help='run only these cases (names, or prefixes of names)')
    ap.add_argument('--bindir', metavar='DIR',
                    help='run qemu-system-x86_64 and qemu-img from DIR (e.g. /usr/bin for the '
                    'installed packages) instead of build/BUILD; BUILD still names the '
                    'source tree whose python/qemu drives them')
    ap.add_argument('--list', action='store_true', help='print the case table')
    ap.add_argument('--timeout-scale', type=float, default=1.0,
                    help='multiply every case timeout (slow machine)')
    planted = ap.add_mutually_exclusive_group()
    planted.add_argument('--break-notify', type=int, metavar='N', default=None,
                    help='check the harness: run QEMU under gdb and drop every virtio '
                    'guest notification after the first N; cases must FAIL by timeout')
    planted.add_argument('--drop-write', type=int, metavar='N', default=None,
                    help='check that the cases see a lost write: run QEMU under gdb and make '
                    'the Nth write to an image file succeed without writing; cases must '
                    'FAIL by verification (docs/testing.md)')
    ap.add_argument('--drop-min-bytes', type=int, metavar='B', default=0,
                    help='with --drop-write: count only writes of at least B bytes')
    ap.add_argument('--soak-seconds', type=int, metavar='N', default=None,
                    help='how long the soak case loops (default: $SOAK_SECONDS or 150; '
                    'the long run is 3600)')
    ap.add_argument('--device-props', metavar='PROPS', default='',
                    help='more properties for every virtio-blk and virtio-scsi device, '
                    'e.g. x-notify-batch=deferred (a case\'s own come after them)')
    ap.add_argument('--keep', action='store_true', help='keep each case\'s temp dir')
    ap.add_argument('--repeat', type=int, metavar='N', default=1,
                    help='run each case N times in a row, stopping at its first failure '
                    '(a rare hang: docs/guest-tests.md)')
    a = ap.parse_args()
    # On SIGTERM (a CI timeout), unwind so that each case kills its QEMU.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    harness.use_qemu_python(a.build)
    harness.BINDIR = a.bindir
    import cases  # pylint: disable=import-outside-toplevel

    missing = cases.pairwise_missing()
    if missing:
        print('FAIL pairwise-table: uncovered pairs: ' + ', '.join(missing))
        print('0 passed, 1 failed')
        return 1

    subset = a.subset or ('base' if a.build == 'base' else 'all')
    todo = [c for c in cases.CASES
            if (c.long if subset == 'long' else not c.long and (subset == 'all' or c.base))]
    if a.case:
        # A name that is a case's whole name selects that case only;
        # otherwise it is a prefix.
        names = {c.name for c in todo}
        todo = [c for c in todo
                if any(c.name == n or (n not in names and c.name.startswith(n))
                       for n in a.case)]
        if not todo:
            print(f'no case matches {a.case}')
            print('0 passed, 1 failed')
            return 1
    if a.list:
        for c in todo:
            print(f'{c.name:40} {c.scenario:12} {c.doc}')
        return 0

    if a.device_props:
        for c in todo:
            for d in c.disks:
                d.props = ','.join(p for p in (a.device_props, d.props) if p)

    guest = harness.build_guest()
    print(f'# guest {guest}; {a.bindir or "build/" + a.build}; {len(todo)} cases', flush=True)
    passed = failed = skipped = 0
    t0 = time.time()
    for c in todo:
        why = c.needs and harness.missing_property(c.needs, a.build)
        if not why and c.late_notify and a.bindir:
            # gdb sets breakpoints in the build's own binary; --bindir's
            # (the packages', through tests/deb.py's chroot wrappers) is
            # another, stripped.
            why = 'gdb holds its notifications in build/BUILD\'s binary, not in --bindir\'s'
        if not why and 'debian' in c.binaries and '/' in a.build:
            # debian-qemu.sh fetches the bookworm pin's QEMU (7.2); a build
            # of another line (trixie/fork) is migrated from its own
            # Debian QEMU by make test-deb LINE=... (deb-running-vm).
            why = (f'Debian\'s QEMU here is the bookworm pin\'s, not that of'
                   f' {a.build}\'s line')
        if why:
            skipped += 1
            print(f'skip {c.name}: {why}', flush=True)
            continue
        without = ''
        if c.optional and harness.missing_property(c.optional, a.build):
            for d in c.disks:
                d.props = harness.without_property(d.props, c.optional)
            without = f'without {c.optional}, which this QEMU does not have'
        c.timeout = int(c.timeout * a.timeout_scale)
        if c.soak and a.soak_seconds:
            c.soak = a.soak_seconds
        for i in range(a.repeat):
            ok, why, secs = harness.run_case(c, a.build, guest, a.break_notify, a.keep,
                                             a.drop_write, a.drop_min_bytes)
            run = f' (run {i + 1} of {a.repeat})' if a.repeat > 1 else ''
            if ok:
                passed += 1
                why = '; '.join(w for w in (without, why) if w)
                print(f'ok {c.name}{": " + why if why else ""} ({secs:.0f}s){run}', flush=True)
            else:
                failed += 1
                first, _, rest = why.partition('\n')
                print(f'FAIL {c.name}: {first} ({secs:.0f}s){run}'
                      + (f' ({without})' if without else ''), flush=True)
                if rest.strip():
                    print(rest, flush=True)
                break
    print(f'# total {time.time() - t0:.0f}s')
    print(f'{passed} passed, {failed} failed, {skipped} skipped')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
