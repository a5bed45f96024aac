#!/usr/bin/env python3
"""tests/check-update.py: make check-update and make fetch against the
Debian archive, for every line of lines/ (bookworm, trixie).

Runs of scripts/check-update.sh and scripts/fetch-base.sh, one line per
check ("ok NAME", "FAIL NAME: why"); LINE is the line's name:

- LINE/pinned: from one run of check-update.sh without --line (every
  line, as 'make check-update' runs it): against the line's own pin.  With
  nothing newer in the line's suites it must say so in the line's verdict;
  when Debian has published a newer qemu, it must report every patch of
  the line, and the check fails if one needs a refresh.
- every-line/verdicts: that run ends with one verdict per line, in the
  order of lines/, and exits 0 (the worst of the lines).
- LINE/older: against a copy of the line's pin that names an older
  version (bookworm 1:7.2+dfsg-7, trixie 1:10.0.2+ds-2: the versions the
  releases came with), with --line LINE --pin.  It must find the newest
  version of the line's suites, verify and unpack it, report every patch
  of the line's series and its packaging patch (scripts/line.sh's
  LINE_PACKAGING: packaging/x86only.patch, x86only-trixie.patch), and rewrite the copy to pin that version.  When the
  newest is the pinned version, every patch must apply clean and the
  rewritten copy must equal the pin.
- per-line/one-line-fails: in a scratch copy of the checkout (scripts/,
  lines/, packaging/; the caches seeded from this one), the trixie line's
  pin names its older version and its series gets a patch that applies to
  nothing.  check-update.sh without --line must check both lines: the
  trixie verdict says a patch needs work, the bookworm one is that of the
  real pin, and the exit status is 1.
- fetch/LINE/verified: fetch-base.sh --download-only with the line's pin
  (the files of make fetch LINE=LINE, downloaded if .cache/download lacks
  them) verifies the three files.
- fetch/LINE/refuses-wrong-sha256: in a scratch copy whose pin of the line
  has one sha256 changed (that of the .dsc, so that nothing large is
  downloaded when the cache has the files), fetch-base.sh must stop with
  a non-zero status and a message that names the mismatch and says what
  to do, unpack nothing and leave none of the three files in the scratch
  download directory.

It needs the archive (deb.debian.org), as make fetch does; without it the
checks fail with the scripts' own messages.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from lineinfo import line_var

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD_VERSION = {'bookworm': '1:7.2+dfsg-7', 'trixie': '1:10.0.2+ds-2'}
STATUS = re.compile(r'^check-update: +(clean|offset|fuzz|FAILED) +(\S+)$')
failed = False


def report(name, ok, why=''):
    global failed
    failed |= not ok
    print(f'ok {name}' + (f': {why}' if why else '') if ok else f'FAIL {name}: {why}',
          flush=True)


def lines(top=TOP):
    return sorted(d for d in os.listdir(f'{top}/lines')
                  if os.path.isfile(f'{top}/lines/{d}/base.pin'))


def run(script, *args, top=TOP, env=None):
    r = subprocess.run(['bash', f'{top}/scripts/{script}', *args], capture_output=True,
                       text=True, timeout=900, check=False,
                       env=dict(os.environ, **(env or {})))
    out = r.stdout + r.stderr
    for line in out.splitlines():
        print('   ', line, flush=True)
    return r.returncode, out


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def expected_patches(line):
    names = [f'lines/{line}/patches/{s.strip()}'
             for s in read(f'{TOP}/lines/{line}/patches/series').splitlines()
             if s.strip() and not s.startswith('#')]
    packaging = line_var(line, '${LINE_PACKAGING#$top/}')
    return names + ([packaging] if packaging else [])


def statuses(out):
    return dict(reversed(m.groups()) for m in map(STATUS.match, out.splitlines()) if m)


def section(out, line):
    """The output of LINE's check in a run of every line."""
    m = re.search(rf'^check-update: ==== line {line} .*?(?=^check-update: ==== )', out,
                  re.M | re.S)
    return m.group(0) if m else ''


def verdicts(out):
    """The verdicts at the end of a run of every line: {line: text}, in order."""
    _, _, tail = out.rpartition('check-update: ==== the ')
    return dict(re.findall(r'^check-update: ([a-z][a-z0-9-]*): (.*)$', tail, re.M))


def newer_version(out):
    """The version check-update found newer than the pin, or None."""
    m = re.search(r'^check-update: (\S+) is newer than the pinned', out, re.M)
    return m.group(1) if m else None


def pin_value(text, key):
    m = re.search(rf'^{key}=(.*)$', text, re.M)
    return m.group(1) if m else None


def check_reports(name, line, out):
    """Every patch reported; none needing work.  Returns the statuses."""
    got = statuses(out)
    missing = [p for p in expected_patches(line) if p not in got]
    bad = [f'{p} {s}' for p, s in got.items() if s in ('fuzz', 'FAILED')]
    report(f'{name}/every-patch-reported', not missing,
           f'{len(got)} reported' if not missing else f'not reported: {", ".join(missing)}')
    report(f'{name}/series-applies', not bad, ', '.join(bad) or
           f'{sum(s == "clean" for s in got.values())} clean, '
           f'{sum(s == "offset" for s in got.values())} offset')
    return got


def every_line():
    rc, out = run('check-update.sh')
    got = verdicts(out)
    want = lines()
    report('every-line/verdicts', list(got) == want and rc == 0,
           f'exit status {rc}; verdicts of {list(got)}, want {want} in that order')
    for line in want:
        pinned = pin_value(read(f'{TOP}/lines/{line}/base.pin'), 'VERSION')
        text = section(out, line)
        newest = newer_version(text)
        if newest:
            report(f'{line}/pinned/newer-version-reported', True,
                   f'Debian has {newest}: move lines/{line}/base.pin (docs/patch-workflow.md)')
            check_reports(f'{line}/pinned', line, text)
        else:
            report(f'{line}/pinned/nothing-newer',
                   got.get(line, '').startswith(f'nothing newer than {pinned} ')
                   and f'check-update: nothing newer: the newest is {pinned}' in text,
                   f'verdict {got.get(line)!r}')


def older(line):
    pin = read(f'{TOP}/lines/{line}/base.pin')
    pinned = pin_value(pin, 'VERSION')
    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, 'old.pin')
        with open(old, 'w', encoding='utf-8') as f:
            f.write(re.sub(r'^VERSION=.*$', f'VERSION={OLD_VERSION[line]}', pin, flags=re.M))
        rc, out = run('check-update.sh', '--line', line, '--pin', '--base', old)
        name = f'{line}/older'
        newest = newer_version(out)
        report(f'{name}/newer-version-found', bool(newest), f'exit status {rc}')
        if not newest:
            return
        report(f'{name}/verified-and-unpacked', 'verified against the archive' in out)
        got = check_reports(name, line, out)
        rewritten = read(old)
        report(f'{name}/pin-rewritten', rc == 0 and pin_value(rewritten, 'VERSION') == newest,
               f'exit status {rc}, VERSION={pin_value(rewritten, "VERSION")}')
        if newest == pinned:
            unclean = [f'{p} {s}' for p, s in got.items() if s != 'clean']
            report(f'{name}/clean-on-the-pinned-base', not unclean, ', '.join(unclean))
            report(f'{name}/rewritten-pin-equals-base.pin', rewritten == pin,
                   '' if rewritten == pin else f'the rewritten pin differs from lines/{line}/base.pin')


def scratch(tmp):
    """A copy of the checkout's tooling and lines in TMP/top, with the apt
    indices and the downloads of this one (linked: fetch-base.sh removes
    only the files of a failed check, and a link's removal leaves ours)."""
    top = f'{tmp}/top'
    for d in ('scripts', 'lines', 'packaging'):
        shutil.copytree(f'{TOP}/{d}', f'{top}/{d}', symlinks=True)
    if os.path.isdir(f'{TOP}/.cache/apt'):
        shutil.copytree(f'{TOP}/.cache/apt', f'{top}/.cache/apt', symlinks=True)
    os.makedirs(f'{top}/.cache/download')
    if os.path.isdir(f'{TOP}/.cache/download'):
        for f in os.listdir(f'{TOP}/.cache/download'):
            try:
                os.link(f'{TOP}/.cache/download/{f}', f'{top}/.cache/download/{f}')
            except OSError:
                shutil.copy(f'{TOP}/.cache/download/{f}', f'{top}/.cache/download/{f}')
    return top


PLANTED = '''From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: tests/check-update.py <nobody@localhost>
Subject: [PATCH] planted: a patch that applies to nothing

Signed-off-by: tests/check-update.py <nobody@localhost>
---
diff --git a/no/such/file.c b/no/such/file.c
--- a/no/such/file.c
+++ b/no/such/file.c
@@ -1,3 +1,3 @@
 one
-two
+2
 three
'''


def per_line():
    """One line's series fails on its newer version; the other line is
    still checked and has its own verdict; the exit status says so."""
    with tempfile.TemporaryDirectory(prefix='iobatch-check-update-') as tmp:
        top = scratch(tmp)
        t = f'{top}/lines/trixie'
        pin = re.sub(r'^VERSION=.*$', f'VERSION={OLD_VERSION["trixie"]}',
                     read(f'{t}/base.pin'), flags=re.M)
        with open(f'{t}/base.pin', 'w', encoding='utf-8') as f:
            f.write(pin)
        os.makedirs(f'{t}/patches/fixes', exist_ok=True)
        with open(f'{t}/patches/fixes/0001-planted.patch', 'w', encoding='utf-8') as f:
            f.write(PLANTED)
        series = read(f'{t}/patches/series').replace('# fixes\n', '# fixes\nfixes/0001-planted.patch\n')
        with open(f'{t}/patches/series', 'w', encoding='utf-8') as f:
            f.write(series)
        rc, out = run('check-update.sh', top=top)
        got = verdicts(out)
        bookworm = pin_value(read(f'{TOP}/lines/bookworm/base.pin'), 'VERSION')
        want_t = f'is newer than {OLD_VERSION["trixie"]}; 1 patch(es) need work (0 with fuzz, 1 failed)'
        ok = (rc == 1 and list(got) == ['bookworm', 'trixie']
              and want_t in got.get('trixie', '')
              and 'FAILED lines/trixie/patches/fixes/0001-planted.patch' in ' '.join(out.split())
              and (got.get('bookworm', '').startswith(f'nothing newer than {bookworm} ')
                   or 'is newer than' in got.get('bookworm', '')))
        report('per-line/one-line-fails', ok,
               f'exit status {rc} (want 1); verdicts {got}')


def fetch(line):
    rc, out = run('fetch-base.sh', '--download-only', env={'LINE': line})
    report(f'fetch/{line}/verified', rc == 0 and f'verified against lines/{line}/base.pin' in out,
           f'exit status {rc}')
    with tempfile.TemporaryDirectory(prefix='iobatch-fetch-') as tmp:
        top = scratch(tmp)
        p = f'{top}/lines/{line}/base.pin'
        pin = read(p)
        good = pin_value(pin, 'DSC_SHA256')
        bad = ('0' if good[0] != '0' else '1') + good[1:]
        with open(p, 'w', encoding='utf-8') as f:
            f.write(pin.replace(f'DSC_SHA256={good}', f'DSC_SHA256={bad}'))
        names = [pin_value(pin, k) for k in ('DSC', 'ORIG', 'DEBIAN')]
        problems = []
        for args in ([], ['--download-only']):
            rc, out = run('fetch-base.sh', *args, top=top, env={'LINE': line})
            left = [n for n in names if os.path.exists(f'{top}/.cache/download/{n}')]
            msg = ' '.join(out.split())
            if rc == 0:
                problems.append(f'fetch-base.sh {" ".join(args)} exited 0')
            if 'checksum mismatch' not in msg or f'lines/{line}/base.pin' not in msg \
                    or f"make fetch{'' if line == 'bookworm' else ' LINE=' + line}' again" not in msg:
                problems.append(f'fetch-base.sh {" ".join(args)}: no message naming the mismatch, '
                                f'the pin and what to do: {msg[-300:]!r}')
            if left:
                problems.append(f'fetch-base.sh {" ".join(args)} left {left}')
            # The downloads must come back for the next run: link ours again.
            for n in names:
                if os.path.exists(f'{TOP}/.cache/download/{n}') and \
                        not os.path.exists(f'{top}/.cache/download/{n}'):
                    os.link(f'{TOP}/.cache/download/{n}', f'{top}/.cache/download/{n}')
        base = f'{top}/build/src/base' if line == 'bookworm' else f'{top}/build/{line}/src/base'
        if os.path.exists(base):
            problems.append(f'{os.path.relpath(base, top)} was unpacked')
        report(f'fetch/{line}/refuses-wrong-sha256', not problems,
               '; '.join(problems) or 'both runs stopped with the mismatch, nothing unpacked, '
               'the files removed')


def main():
    every_line()
    for line in lines():
        older(line)
    per_line()
    for line in lines():
        fetch(line)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
