#!/usr/bin/env python3
"""tests/check-update.py: make check-update against the Debian archive.

Two runs of scripts/check-update.sh, one line per check ("ok NAME",
"FAIL NAME: why"):

- pinned: against lines/bookworm/base.pin itself.  With nothing newer in the archive it
  must say so and exit 0.  When Debian has published a newer qemu, it must
  report every patch, and the check fails if one needs a refresh.
- older: against a copy of that pin that names 1:7.2+dfsg-7, the version
  bookworm was released with (older than every update), with --pin.  It
  must find the archive's newest version, verify and unpack it, report
  every patch of lines/bookworm/patches/series and packaging/x86only.patch,
  and rewrite the copy to pin that version.  When the newest is the pinned
  version, every patch must apply clean and the rewritten copy must equal
  the pin.

It needs the archive (deb.debian.org), as make fetch does; without it the
checks fail with check-update's own message.
"""
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TOP, 'scripts', 'check-update.sh')
OLD_VERSION = '1:7.2+dfsg-7'
STATUS = re.compile(r'^check-update: +(clean|offset|fuzz|FAILED) +(\S+)$')
failed = False


def report(name, ok, why=''):
    global failed
    failed |= not ok
    print(f'ok {name}' + (f': {why}' if why else '') if ok else f'FAIL {name}: {why}',
          flush=True)


def check_update(*args):
    r = subprocess.run(['bash', SCRIPT, *args], capture_output=True, text=True,
                       timeout=900, check=False)
    out = r.stdout + r.stderr
    for line in out.splitlines():
        print('   ', line, flush=True)
    return r.returncode, out


def expected_patches():
    with open(os.path.join(TOP, 'lines/bookworm/patches/series'), encoding='utf-8') as f:
        names = [f'lines/bookworm/patches/{line.strip()}' for line in f
                 if line.strip() and not line.startswith('#')]
    return names + ['packaging/x86only.patch']


def statuses(out):
    return dict(reversed(m.groups()) for m in map(STATUS.match, out.splitlines()) if m)


def newer_version(out):
    """The version check-update found newer than the pin, or None."""
    m = re.search(r'^check-update: (\S+) is newer than the pinned', out, re.M)
    return m.group(1) if m else None


def pin_value(text, key):
    m = re.search(rf'^{key}=(.*)$', text, re.M)
    return m.group(1) if m else None


def check_reports(name, out):
    """Every patch reported; none needing work.  Returns the statuses."""
    got = statuses(out)
    missing = [p for p in expected_patches() if p not in got]
    bad = [f'{p} {s}' for p, s in got.items() if s in ('fuzz', 'FAILED')]
    report(f'{name}/every-patch-reported', not missing,
           f'{len(got)} reported' if not missing else f'not reported: {", ".join(missing)}')
    report(f'{name}/series-applies', not bad, ', '.join(bad) or
           f'{sum(s == "clean" for s in got.values())} clean, '
           f'{sum(s == "offset" for s in got.values())} offset')
    return got


def main():
    with open(os.path.join(TOP, 'lines/bookworm/base.pin'), encoding='utf-8') as f:
        pin = f.read()
    pinned = pin_value(pin, 'VERSION')

    rc, out = check_update()
    newest = newer_version(out)
    if newest:
        report('pinned/newer-version-reported', True,
               f'Debian has {newest}: move lines/bookworm/base.pin (docs/patch-workflow.md)')
        check_reports('pinned', out)
    else:
        report('pinned/nothing-newer', rc == 0 and
               f'check-update: nothing newer: the newest is {pinned}' in out,
               f'exit status {rc}')

    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, 'old.pin')
        with open(old, 'w', encoding='utf-8') as f:
            f.write(re.sub(r'^VERSION=.*$', f'VERSION={OLD_VERSION}', pin, flags=re.M))
        rc, out = check_update('--line', 'bookworm', '--pin', '--base', old)
        newest = newer_version(out)
        report('older/newer-version-found', bool(newest), f'exit status {rc}')
        if not newest:
            return 1
        report('older/verified-and-unpacked', 'verified against the archive' in out)
        got = check_reports('older', out)
        with open(old, encoding='utf-8') as f:
            rewritten = f.read()
        report('older/pin-rewritten', rc == 0 and pin_value(rewritten, 'VERSION') == newest,
               f'exit status {rc}, VERSION={pin_value(rewritten, "VERSION")}')
        if newest == pinned:
            unclean = [f'{p} {s}' for p, s in got.items() if s != 'clean']
            report('older/clean-on-the-pinned-base', not unclean, ', '.join(unclean))
            report('older/rewritten-pin-equals-base.pin', rewritten == pin,
                   '' if rewritten == pin else 'the rewritten pin differs from lines/bookworm/base.pin')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
