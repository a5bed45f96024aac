#!/usr/bin/env python3
"""Check that every relative link in the project's Markdown resolves.

    scripts/check-links.py [--root DIR] [FILE.md ...]

Default: README.md and docs/**/*.md of the checkout (or of DIR).  Checks inline links and images
([text](target), ![alt](target)), reference definitions ([name]: target)
and HTML href/src attributes, outside code blocks and code spans.  A
relative target must name a file or directory of the checkout, inside it;
a #anchor must match a heading of the target Markdown file (GitHub's
slugs: lower case, punctuation dropped, spaces to hyphens, -1, -2 for
repeats) or an explicit id/name; in other files only GitHub's line anchors
(#L10, #L10-L20).  Links with a scheme (https:, mailto:) are not checked.

Prints each broken link as "FILE:LINE: TARGET: why", then one line per
group (README.md, each docs/*.md, and docs/benchmarks/ as one):
"ok GROUP: N links" or "FAIL GROUP: K of N links broken".  Exit status 1
when a link is broken.
"""

import glob
import os
import re
import sys
import unicodedata
import urllib.parse

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
ATX = re.compile(r'^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$')
SETEXT = re.compile(r'^ {0,3}(=+|-+)[ \t]*$')
INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)'
                    r'(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
REFDEF = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)')
HTML = re.compile(r'<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*["\']([^"\']*)["\']', re.I)
HTML_ID = re.compile(r'<[a-z][^>]*?\b(?:id|name)\s*=\s*["\']([^"\']+)["\']', re.I)
CODE_SPAN = re.compile(r'(`+)(.+?)\1')
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')
LINE_ANCHOR = re.compile(r'^L\d+(-L\d+)?$')


def text_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def heading_text(raw):
    """What GitHub renders of a heading's inline Markdown, as far as slugs
    care: code spans keep their text, links and images their text, HTML
    tags go."""
    t = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    t = re.sub(r'!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)', r'\1', t)
    t = re.sub(r'<[^>]+>', '', t)
    return t


def slug(text):
    """GitHub's anchor for a heading: lower case; every character but
    letters, digits, marks, '_', '-' and spaces dropped; spaces to '-'."""
    out = []
    for ch in text.strip().lower():
        if ch in ' -_' or unicodedata.category(ch)[0] in 'LNM':
            out.append('-' if ch == ' ' else ch)
    return ''.join(out)


_anchors = {}


def anchors(path):
    """The anchors a Markdown file has: heading slugs and explicit ids."""
    if path in _anchors:
        return _anchors[path]
    found, seen = set(), {}
    prev = None
    for _, line in text_lines(path):
        heads = []
        m = ATX.match(line)
        if m:
            heads.append(m.group(2) or '')
        elif prev is not None and prev.strip() and SETEXT.match(line) and \
                not ATX.match(prev) and not prev.lstrip().startswith(('-', '*', '>', '|')):
            heads.append(prev)
        for h in heads:
            s = slug(heading_text(h))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f'{s}-{n}')
        found.update(HTML_ID.findall(line))
        prev = line
    _anchors[path] = found
    return found


def links(path):
    """(line number, target) of every link in a Markdown file."""
    for n, line in text_lines(path):
        m = REFDEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        plain = CODE_SPAN.sub(lambda m: ' ' * len(m.group(0)), line)
        for m in INLINE.finditer(plain):
            yield n, m.group(1)
        for m in HTML.finditer(plain):
            yield n, m.group(1)


def check(path, target):
    """Why the link is broken, or None."""
    if target.startswith('<') and target.endswith('>'):
        target = target[1:-1]
    if not target:
        return 'empty link target'
    if SCHEME.match(target) or target.startswith('//'):
        return None
    where, _, frag = target.partition('#')
    where = urllib.parse.unquote(where.split('?', 1)[0])
    if where:
        dest = os.path.normpath(os.path.join(os.path.dirname(path), where))
        if os.path.relpath(dest, TOP).startswith('..'):
            return 'points outside the repository'
        if not os.path.exists(dest):
            return f'no such file or directory: {os.path.relpath(dest, TOP)}'
    else:
        dest = path
    if not frag:
        return None
    frag = urllib.parse.unquote(frag)
    if dest.endswith('.md') and os.path.isfile(dest):
        if frag.lower() in {a.lower() for a in anchors(dest)}:
            return None
        return f'no heading or id with the anchor #{frag} in {os.path.relpath(dest, TOP)}'
    if os.path.isfile(dest) and LINE_ANCHOR.match(frag):
        return None
    return f'anchor #{frag} cannot be checked in {os.path.relpath(dest, TOP)} (not Markdown)'


def group(rel):
    return 'docs/benchmarks/' if rel.startswith('docs/benchmarks/') else rel


def main():
    global TOP
    args = sys.argv[1:]
    if args[:1] == ['--root']:
        if len(args) < 2:
            sys.exit('usage: check-links.py [--root DIR] [FILE.md ...]')
        TOP = os.path.abspath(args[1])
        args = args[2:]
    files = args or (
        [os.path.join(TOP, 'README.md')] +
        sorted(glob.glob(os.path.join(TOP, 'docs', '**', '*.md'), recursive=True)))
    groups = {}
    broken = 0
    for f in files:
        path = os.path.abspath(f)
        if not os.path.isfile(path):
            sys.exit(f'check-links: no such file: {f}')
        rel = os.path.relpath(path, TOP)
        g = groups.setdefault(group(rel), [0, 0])
        for n, target in links(path):
            g[0] += 1
            why = check(path, target)
            if why:
                g[1] += 1
                broken += 1
                print(f'{rel}:{n}: {target}: {why}')
    for name, (total, bad) in groups.items():
        if bad:
            print(f'FAIL {name}: {bad} of {total} links broken')
        else:
            print(f'ok {name}: {total} links')
    print(f'check-links: {sum(g[0] for g in groups.values())} links in {len(files)} files, '
          f'{broken} broken')
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main())
