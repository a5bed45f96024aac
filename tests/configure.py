#!/usr/bin/env python3
"""tests/configure.py: the configure lines of scripts/build.sh fit the QEMU
trees they are used on, without building anything.

    python3 tests/configure.py [--no-run]

Issue 36: build.sh gave QEMU 10.0 the 7.2 line, 10.0's configure rejected
--with-git-submodules=ignore, and only a 25-minute 'make upstream' found out.
One line per check, "ok NAME: what" or "FAIL NAME: why and what to do":

- fetch-upstream: scripts/upstream.sh --fetch-only (the trixie line's
  pinned QEMU 10.0 source, lines/trixie/base.pin, fetched and verified as
  make fetch LINE=trixie does into build/trixie/src/base, and trixie's
  meson, cached under .cache/upstream; about 15 s and 80 MB on a fresh
  clone).
- options:upstream, options:base: every option of the line that a build
  would use (scripts/upstream.sh --print-configure, scripts/build.sh
  --print-configure base build/src/base) is one that the tree's
  'configure --help' lists, with a value where it takes one, and every
  target of --target-list is one it offers (about 2 s each).
- configure:upstream: scripts/upstream.sh --configure-only runs 10.0's
  configure with that line and the build's meson into a scratch build
  directory, which is removed afterwards (kept with its log if it fails):
  it catches what --help cannot, such as a dependency that 10.0 needs
  newer (about 40 s; --no-run leaves it out).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = 'configure-check-upstream'
failed = 0


def report(name, ok, what):
    global failed
    failed += not ok
    print(f'ok {name}: {what}' if ok else f'FAIL {name}: {what}', flush=True)


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=kw.pop('cwd', TOP), **kw)


def rel(path):
    return os.path.relpath(path, TOP)


def tail(text, n=15):
    return '\n'.join(f'    {line}' for line in text.strip().splitlines()[-n:])


def help_options(src):
    """The options that SRC's 'configure --help' lists: a dict of option
    name to True when it takes a value (--opt=VALUE), and the list of
    targets --target-list offers.  Run in a scratch directory: 10.0's
    configure run in its own source directory makes a build/ there."""
    with tempfile.TemporaryDirectory(prefix='iobatch-configure-help-') as tmp:
        r = run([f'{src}/configure', '--help'], timeout=120, cwd=tmp)
    if r.returncode != 0 or 'Usage: configure' not in r.stdout:
        return None, None, f'exit {r.returncode}: {(r.stdout + r.stderr)[-300:]!r}'
    opts, targets = {}, []
    in_features = in_targets = False
    for line in r.stdout.splitlines():
        if line.startswith('Optional features, enabled with --enable-FEATURE'):
            in_features = True
            continue
        if in_targets:
            if re.match(r'^\s+--', line) or not line.strip():
                in_targets = False
            else:
                targets += line.split()
                continue
        m = re.match(r'^\s+Available targets:(.*)$', line)
        if m:
            targets += m.group(1).split()
            in_targets = True
            continue
        m = re.match(r'^  (--[a-z0-9][a-z0-9-]*)(\[?=)?', line)
        if m:
            name, value = m.group(1), bool(m.group(2))
            opts[name] = opts.get(name, False) or value
            # A boolean meson option is listed as the form that is not
            # the default; configure takes both.
            b = re.match(r'^--(enable|disable)-(.*)$', name)
            if b and not value:
                other = 'disable' if b.group(1) == 'enable' else 'enable'
                opts.setdefault(f'--{other}-{b.group(2)}', False)
            continue
        if in_features:
            m = re.match(r'^  ([a-z0-9][a-z0-9-]*)(\s|$)', line)
            if m:
                opts[f'--enable-{m.group(1)}'] = False
                opts[f'--disable-{m.group(1)}'] = False
    return opts, targets, None


def check_options(label, src, line, where):
    """Every option of LINE (a list of arguments) is in SRC's configure
    --help; WHERE says where the line comes from, for the message."""
    version = open(f'{src}/VERSION', encoding='utf-8').read().strip()
    opts, targets, err = help_options(src)
    if opts is None:
        report(f'options:{label}', False, f"'{rel(src)}/configure --help' failed ({err})")
        return
    problems = []
    for arg in line:
        name, eq, value = arg.partition('=')
        if name not in opts:
            problems.append(f'{arg} (QEMU {version} has no {name}: configure would stop '
                            "with 'unknown option')")
        elif bool(eq) != opts[name]:
            problems.append(f'{arg} ({name} ' +
                            ('takes no value' if eq else 'needs =VALUE') + ')')
        elif name == '--target-list':
            bad = [t for t in value.split(',') if t not in targets]
            if bad:
                problems.append(f'{arg} (QEMU {version} offers no target {",".join(bad)})')
    if problems:
        report(f'options:{label}', False,
               f"configure --help of QEMU {version} ({rel(src)}) does not accept "
               f"{'; '.join(problems)}.  The line comes from {where}: give QEMU "
               f"{version.split('.')[0]}.x a line it accepts there (each option of "
               f"scripts/build.sh says why it is there; compare with "
               f"'{rel(src)}/configure --help'), then run 'python3 tests/configure.py'")
    else:
        report(f'options:{label}', True,
               f'the {len(line)} options of {where} are in configure --help of QEMU '
               f'{version}: {" ".join(line)}')


def check_printed(label, src, cmd, where):
    """check_options() on the line that CMD (a script of the repo and its
    arguments) prints, one option a line."""
    r = run([f'{TOP}/{cmd[0]}'] + cmd[1:])
    if r.returncode != 0:
        report(f'options:{label}', False, f'{" ".join(cmd)} failed:\n'
               + tail(r.stdout + r.stderr))
    else:
        check_options(label, src, r.stdout.splitlines(), where)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--no-run', action='store_true',
                    help="check the options against 'configure --help' only; "
                         "do not run 10.0's configure")
    args = ap.parse_args()
    src = f'{TOP}/build/trixie/src/base'   # the trixie line's base (scripts/line.sh)

    t0 = time.monotonic()
    r = run([f'{TOP}/scripts/upstream.sh', '--fetch-only'], timeout=900)
    if r.returncode != 0:
        report('fetch-upstream', False,
               "scripts/upstream.sh --fetch-only failed, so the 10.0 configure line "
               "was not checked (the error is below: most often no network; "
               "'make upstream' would fail the same way):\n" + tail(r.stdout + r.stderr))
    else:
        report('fetch-upstream', True,
               f'QEMU {open(f"{src}/VERSION", encoding="utf-8").read().strip()} in '
               f'{rel(src)} ({time.monotonic() - t0:.0f} s)')
        check_printed('upstream', src, ['scripts/upstream.sh', '--print-configure'],
                      "scripts/build.sh's line for a 10.x tree plus upstream.sh's "
                      'CONFIGURE_EXTRA (scripts/upstream.sh --print-configure)')

    base = f'{TOP}/build/src/base'
    if not os.path.isfile(f'{base}/configure'):
        report('options:base', False, f"no {rel(base)}: run 'make fetch' first")
    else:
        check_printed('base', base, ['scripts/build.sh', '--print-configure', 'base', base],
                      "scripts/build.sh's line for base and fork "
                      '(scripts/build.sh --print-configure base build/src/base)')

    if args.no_run or not os.path.isfile(f'{src}/VERSION'):
        return finish()
    out = f'{TOP}/build/{SCRATCH}'
    shutil.rmtree(out, ignore_errors=True)
    t1 = time.monotonic()
    r = run(['nice', '-n', '19', f'{TOP}/scripts/upstream.sh', '--configure-only', SCRATCH])
    took = time.monotonic() - t1
    if r.returncode == 0 and os.path.isfile(f'{out}/build.ninja'):
        shutil.rmtree(out)
        os.remove(f'{out}.configure.log')
        report('configure:upstream', True,
               f"10.0's configure accepts the line of make upstream ({took:.0f} s; "
               f'{rel(out)} removed)')
    else:
        errors = [line.strip() for line in (r.stdout + r.stderr).splitlines()
                  if line.startswith('ERROR')]
        report('configure:upstream', False,
               f"10.0's configure with the line of make upstream failed"
               f"{' (' + errors[0] + ')' if errors else ''}, so make upstream "
               f'would fail too; its last lines are below, the log is {rel(out)}.configure.log. '
               "Fix the 10.x line of scripts/build.sh (or the dependency it names: "
               "'make deps'), then run 'python3 tests/configure.py':\n"
               + tail(r.stdout + r.stderr))
    return finish()


def finish():
    print(f'configure: {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
