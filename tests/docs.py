#!/usr/bin/env python3
"""tests/docs.py: the links of the documentation and the make targets' help.

    python3 tests/docs.py

One line per check, "ok NAME: what" or "FAIL NAME: why":

- links:GROUP: scripts/check-links.py on README.md and docs/ (GROUP:
  README.md, each docs/*.md, docs/benchmarks/ as one); the broken links
  are printed above, one per line.
- links-checker: the checker itself, on a sample with a missing file, a
  missing anchor and a link outside the checkout (all reported), and good
  links, anchors with punctuation, repeated headings and a link in a code
  block (none reported).
- make-help: 'make' without a target prints what 'make help' prints, and
  that names every target of the Makefile (and .PHONY has them all).
- make-check: 'make check' runs what 'make test' runs (make -n).
- runs: scripts/record-run.py check: every table generated from the
  record of runs (docs/runs.tsv; docs/verified.md, docs/install.md) is
  what regenerating it gives, and no doc states a run figure ("N
  passed") of its own outside them; the problems are printed above, one
  per line.  tests/test_record.py tests the checker itself.
"""

import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failed = 0


def report(name, ok, what):
    global failed
    failed += not ok
    print(f'ok {name}: {what}' if ok else f'FAIL {name}: {what}', flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, **kw)


def links():
    r = run([sys.executable, f'{TOP}/scripts/check-links.py'])
    groups = 0
    for line in r.stdout.splitlines():
        m = re.match(r'^(ok|FAIL) (\S+): (.*)$', line)
        if m:
            groups += 1
            report(f'links:{m.group(2)}', m.group(1) == 'ok', m.group(3))
        else:
            print(f'    {line}', flush=True)
    if groups == 0 or r.returncode not in (0, 1):
        report('links', False, f'check-links.py exited {r.returncode}: {r.stderr.strip()}')


SAMPLE_README = '''# Sample

See [the guide](docs/guide.md), [its setup](docs/guide.md#set-up-qemu-72-io_uring),
the [second "Notes"](docs/guide.md#notes-1), ![a plot](docs/plot.png),
[gone](docs/gone.md), [a bad anchor](docs/guide.md#nowhere),
[outside](../outside.md), [external](https://example.org/x.md) and
[a directory](docs/).

```
[in a code block](nothing.md)
```

And `[in a code span](nothing.md)`.

[ref]: docs/guide.md#notes
'''
SAMPLE_GUIDE = '''# Guide

## Set up QEMU 7.2 (`io_uring`)

## Notes

## Notes

Back to [the top](../README.md#sample).
'''


def links_checker():
    with tempfile.TemporaryDirectory(prefix='iobatch-links-') as tmp:
        os.makedirs(f'{tmp}/docs')
        for path, text in (('README.md', SAMPLE_README), ('docs/guide.md', SAMPLE_GUIDE),
                           ('docs/plot.png', '')):
            with open(f'{tmp}/{path}', 'w', encoding='utf-8') as f:
                f.write(text)
        r = run([sys.executable, f'{TOP}/scripts/check-links.py', '--root', tmp])
    broken = sorted(re.findall(r'^README\.md:\d+: (\S+): ', r.stdout, re.M))
    want = sorted(['docs/gone.md', 'docs/guide.md#nowhere', '../outside.md'])
    ok = r.returncode == 1 and broken == want and 'FAIL README.md: 3 of ' in r.stdout \
        and 'ok docs/guide.md: 1 links' in r.stdout
    report('links-checker', ok,
           f'reported {broken}, exit 1' if ok else
           f'exit {r.returncode}, reported {broken}, want {want}: {r.stdout.strip()!r}')


def make_help():
    # A dry run first: if 'make' alone would build, it must not run here.
    dry_bare = run(['make', '-n', '--no-print-directory'], cwd=TOP)
    dry_help = run(['make', '-n', '--no-print-directory', 'help'], cwd=TOP)
    if dry_bare.returncode != 0 or dry_bare.stdout != dry_help.stdout:
        report('make-help', False, "'make' alone would not run the help: make -n prints "
               f'{dry_bare.stdout[:150]!r}')
        return
    bare = run(['make', '-s', '--no-print-directory'], cwd=TOP)
    helped = run(['make', '-s', '--no-print-directory', 'help'], cwd=TOP)
    with open(f'{TOP}/Makefile', encoding='utf-8') as f:
        mk = f.read()
    targets = sorted(set(re.findall(r'^([a-z][a-z-]*):(?!=)', mk, re.M)))
    phony = set(re.search(r'^\.PHONY:((?:.*\\\n)*.*)$', mk, re.M).group(1)
                .replace('\\\n', ' ').split())
    listed = set(re.findall(r'^  make (\S+) ', helped.stdout, re.M))
    problems = []
    if bare.returncode != 0 or bare.stdout != helped.stdout:
        problems.append(f"'make' alone (exit {bare.returncode}) does not print the help: "
                        f'{bare.stdout[:200]!r}')
    if set(targets) - listed:
        problems.append(f'not in make help: {sorted(set(targets) - listed)}')
    if listed - set(targets):
        problems.append(f'in make help but not targets: {sorted(listed - set(targets))}')
    if set(targets) != phony:
        problems.append(f'.PHONY differs from the targets: {sorted(set(targets) ^ phony)}')
    for t in ('repo', 'test-deb'):
        line = re.search(rf'^  make {t} .*$', helped.stdout, re.M)
        if not line or '[host]' not in line.group(0):
            problems.append(f'make help does not mark {t} as changing the host')
    if not re.search(r"^  make test-deb .*REPLACES THIS HOST'S QEMU", helped.stdout, re.M):
        problems.append("make help does not say that test-deb replaces the host's QEMU")
    report('make-help', not problems,
           '; '.join(problems) or f"'make' alone prints the help; {len(targets)} targets, "
           'each with its line')


def make_check():
    c = run(['make', '-n', '--no-print-directory', 'check'], cwd=TOP)
    t = run(['make', '-n', '--no-print-directory', 'test'], cwd=TOP)
    ok = c.returncode == 0 and c.stdout == t.stdout and 'tests/run.py' in c.stdout
    report('make-check', ok, 'make -n check prints what make -n test prints' if ok else
           f'make -n check (exit {c.returncode}) differs from make -n test: '
           f'{c.stdout[-200:]!r} vs {t.stdout[-200:]!r}')


def runs():
    r = run([sys.executable, f'{TOP}/scripts/record-run.py', 'check'])
    lines = r.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(f'    {line}', flush=True)
    last = lines[-1] if lines else r.stderr.strip()
    report('runs', r.returncode == 0 and last.endswith(' 0 problems'),
           f'{last}: the tables match docs/runs.tsv, no run figure outside them'
           if r.returncode == 0 else
           f'exit {r.returncode}: {last} (edit docs/runs.tsv, then scripts/record-run.py regen; '
           'a run figure of a doc goes into the record, docs/verified.md)')


def main():
    links()
    links_checker()
    make_help()
    make_check()
    runs()
    print(f'docs: {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
