#!/usr/bin/env python3
"""deb-changelog.py VERSION OURS DEBIAN [TOP]: the fork's debian/changelog.

Prints Debian's changelog (DEBIAN) with the entries of the fork's releases
(OURS, the line's packaging/changelog or changelog-trixie: one entry per
release, newest first, in debian/changelog's format; empty while the line
has no release) merged into it by version: each of ours goes
above the first of Debian's entries whose version is lower, so that a
release on an older base stays below Debian's later updates.  The top entry
must be VERSION, the version being built: OURS has it (a release), or TOP,
a file with one entry generated for a build between releases, goes first.

Errors (exit 1, a message saying what to fix): an entry of OURS above
VERSION, a version in both, OURS not newest first, no entry for VERSION.
"""

import re
import subprocess
import sys

HEADER = re.compile(r'^(\S+) \(([^() ]+)\) ')


def die(msg):
    sys.exit(f'deb-changelog: error: {msg}')


def entries(path, may_be_empty=False):
    """[(version, text)] of a changelog, in file order; text ends in one
    blank line."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        m = HEADER.match(line)
        if m:
            out.append([m.group(2), [line]])
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            die(f'{path}: text before the first entry: {line!r}')
    if not out and not may_be_empty:
        die(f'{path} has no entry')
    return [(v, '\n'.join(ls).rstrip('\n') + '\n\n') for v, ls in out]


def gt(a, b):
    return subprocess.run(['dpkg', '--compare-versions', a, 'gt', b],
                          check=False).returncode == 0


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.split('\n\n', maxsplit=1)[0].strip())
    version, ours_path, debian_path = sys.argv[1:4]
    ours, debian = entries(ours_path, may_be_empty=True), entries(debian_path)
    top = entries(sys.argv[4]) if len(sys.argv) == 5 else []
    for (a, _), (b, _) in zip(ours, ours[1:]):
        if not gt(a, b):
            die(f'{ours_path}: {a} is not above the entry after it, {b}: newest first')
    if ours and gt(ours[0][0], version):
        die(f'{ours_path} has {ours[0][0]}, above the version being built, {version}: '
            'build from the commit of that release, or set IOBATCH_REV above it')
    debian_versions = {v for v, _ in debian}
    for v, _ in ours + top:
        if v in debian_versions:
            die(f'{v} is in Debian\'s changelog already: a fork release needs a version of its own')
    if top and (len(top) != 1 or top[0][0] != version or (ours and ours[0][0] == version)):
        die(f'the generated entry must be one entry for {version}, which {ours_path} lacks')
    merged, i = list(top), 0
    for v, text in ours:
        while i < len(debian) and not gt(v, debian[i][0]):
            merged.append(debian[i][1])
            i += 1
        merged.append(text)
    merged += [t for _, t in debian[i:]]
    merged = [t if isinstance(t, str) else t[1] for t in merged]
    first = HEADER.match(merged[0]).group(2)
    if first != version:
        die(f'no entry for {version}: record the release in {ours_path}, '
            'or let scripts/deb-src.sh generate one')
    sys.stdout.write(''.join(merged).rstrip('\n') + '\n')


if __name__ == '__main__':
    main()
