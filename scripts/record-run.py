#!/usr/bin/env python3
"""record-run.py: the record of the runs that verified the fork
(docs/runs.tsv), and the tables generated from it.

    scripts/record-run.py add --where TEXT [--ci-run [CHECKOUT]]
        [--command CMD] [--results FILE | --result TEXT] [--time TEXT]
        [--date YYYY-MM-DD] [--series TEXT] [--commit TEXT] [--note TEXT]
    scripts/record-run.py regen
    scripts/record-run.py check

(each with --root DIR: the checkout whose record and docs, default this
one).  add appends one row to docs/runs.tsv and regenerates the tables.
With --ci-run the row comes from a finished .ci/run in CHECKOUT (default:
the --root checkout): its date and time from build/ci-run.json, its result from
build/test-results.json (tests/run.py --json), its series from
CHECKOUT's scripts/version.sh and its commit from git.  For other runs,
--results takes the JSON of a tests/run.py run, --result the result as
the command printed it; --time is how long it took.  Unknown is
"unknown", never a guess.

regen rewrites every generated block of README.md and docs/**/*.md from
the record.  A block starts with "<!-- runs: all ... -->" (the latest run
of each command, then every run) or "<!-- runs: latest ... -->" followed
by one command a line and "-->" (the latest run of those commands), and
ends with "<!-- end of runs -->".

check exits 1 when a block differs from what regen would write, the
record is malformed, or a doc states a run figure of its own ("N passed")
outside the blocks; one line per problem.
"""

import argparse
import datetime
import functools
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = 'docs/runs.tsv'
TABLE = 'docs/verified.md'
FIELDS = ['date', 'command', 'series', 'commit', 'result', 'time', 'where', 'notes']
DATE = re.compile(r'^(\d{4}-\d{2}-\d{2}|unknown)$')
BLOCK = re.compile(r'(<!-- runs: (all|latest)\b(.*?)-->\n)(.*?)(<!-- end of runs -->)', re.S)
FIGURE = re.compile(r'\b\d+ passed\b')
# "N passed" that is not a report of a run: (file, text on the line, why).
NOT_RUN_FIGURES = [
    ('docs/guest-tests.md', '0 passed, 1 failed',
     'the output that --break-notify must give, not a run'),
]


@functools.lru_cache(maxsize=None)
def check_links():
    spec = importlib.util.spec_from_file_location(
        'check_links', os.path.join(TOP, 'scripts', 'check-links.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def slug(heading):
    """The anchor of a heading, as scripts/check-links.py (GitHub) makes it."""
    return check_links().slug(check_links().heading_text(heading))


def read_record(root):
    """The rows of the record, oldest first, as dicts; ValueError if a line
    is malformed."""
    rows = []
    with open(os.path.join(root, RECORD), encoding='utf-8') as f:
        lines = f.read().split('\n')
    if lines[-1] == '':
        lines.pop()
    header = [n for n, line in enumerate(lines) if not line.startswith('#')]
    if not header or lines[header[0]].split('\t') != FIELDS:
        raise ValueError(f'{RECORD}: the first line that is not a comment must be the '
                         f'header {chr(9).join(FIELDS)!r}')
    for n in header[1:]:
        cells = lines[n].split('\t')
        where = f'{RECORD}:{n + 1}'
        if len(cells) != len(FIELDS):
            raise ValueError(f'{where}: {len(cells)} fields, want {len(FIELDS)} '
                             f'(tab-separated: {", ".join(FIELDS)})')
        row = dict(zip(FIELDS, (c.strip() for c in cells)))
        empty = [k for k in FIELDS[:-1] if not row[k]]
        if empty:
            raise ValueError(f'{where}: empty {", ".join(empty)} (write "unknown")')
        if not DATE.match(row['date']):
            raise ValueError(f'{where}: date {row["date"]!r} is not YYYY-MM-DD or unknown')
        rows.append(row)
    return rows


def cell(text):
    return text.replace('|', '\\|') if text else '-'


def series_cell(row):
    if row['commit'] in ('unknown', '-'):
        return cell(row['series'])
    return cell(f'{row["series"]} at {row["commit"]}')


def latest(rows):
    """The last row of each command, the command run last first."""
    last = {}
    for r in rows:
        last.pop(r['command'], None)
        last[r['command']] = r
    return dict(reversed(last.items()))


def latest_table(commands, last, link):
    out = ['| command | series | date | result | time | where |',
           '| --- | --- | --- | --- | --- | --- |']
    for c in commands:
        r = last.get(c)
        name = f'[`{c}`]({link}#{slug(f"`{c}`")})' if r else f'`{c}`'
        if r is None:
            out.append(f'| {name} | - | - | not recorded | - | - |')
        else:
            out.append(f'| {name} | {series_cell(r)} | {r["date"]} | {cell(r["result"])} | '
                       f'{cell(r["time"])} | {cell(r["where"])} |')
    return out


def render(mode, commands, rows, doc):
    """The generated text of a block of @mode in the file @doc (relative)."""
    last = latest(rows)
    if mode == 'all':
        out = ['## The latest run of each command', '']
        out += latest_table(list(last), last, '')
        out += ['', '## Every run, newest first']
        for c in last:
            out += ['', f'### `{c}`', '',
                    '| date | series | result | time | where | notes |',
                    '| --- | --- | --- | --- | --- | --- |']
            for r in reversed([r for r in rows if r['command'] == c]):
                out.append(f'| {r["date"]} | {series_cell(r)} | {cell(r["result"])} | '
                           f'{cell(r["time"])} | {cell(r["where"])} | {cell(r["notes"])} |')
    else:
        link = os.path.relpath(TABLE, os.path.dirname(doc))
        out = latest_table(commands, last, link)
    return '\n' + '\n'.join(out) + '\n\n'


def docs(root):
    return [os.path.relpath(p, root) for p in
            [os.path.join(root, 'README.md')] +
            sorted(glob.glob(os.path.join(root, 'docs', '**', '*.md'), recursive=True))
            if os.path.isfile(p)]


def regenerate(root, rows, doc):
    """(the file's text, the text with its blocks regenerated)."""
    with open(os.path.join(root, doc), encoding='utf-8') as f:
        text = f.read()

    def sub(m):
        commands = [c.strip() for c in m.group(3).split('\n')[1:] if c.strip()]
        if m.group(2) == 'latest' and not commands:
            raise ValueError(f'{doc}: a "runs: latest" block names no command '
                             '(one a line before "-->")')
        return m.group(1) + render(m.group(2), commands, rows, doc) + m.group(5)
    return text, BLOCK.sub(sub, text)


def stray_figures(root, doc):
    """The lines of @doc outside the blocks that state a run figure."""
    with open(os.path.join(root, doc), encoding='utf-8') as f:
        text = BLOCK.sub(lambda m: m.group(1) + '\n' * m.group(4).count('\n') + m.group(5),
                         f.read())
    found = []
    for n, line in enumerate(text.split('\n'), 1):
        if FIGURE.search(line) and not any(doc == d and t in line
                                           for d, t, _ in NOT_RUN_FIGURES):
            found.append(f'{doc}:{n}: a run figure outside {TABLE}: {line.strip()}')
    return found


def regen(root):
    rows = read_record(root)
    changed = []
    for doc in docs(root):
        old, new = regenerate(root, rows, doc)
        if new != old:
            with open(os.path.join(root, doc), 'w', encoding='utf-8') as f:
                f.write(new)
            changed.append(doc)
    print(f'record-run: {len(rows)} runs in {RECORD}; rewrote '
          f'{", ".join(changed) or "nothing (up to date)"}')


def check(root):
    problems = []
    try:
        rows = read_record(root)
    except (OSError, ValueError) as e:
        print(f'record-run: {e}')
        return 1
    blocks, tables = 0, 0
    for doc in docs(root):
        try:
            old, new = regenerate(root, rows, doc)
        except ValueError as e:
            problems.append(str(e))
            continue
        found = BLOCK.findall(old)
        blocks += len(found)
        tables += doc == TABLE and any(b[1] == 'all' for b in found)
        if new != old:
            problems.append(f'{doc}: its runs block differs from {RECORD}: '
                            'scripts/record-run.py regen rewrites it '
                            '(edit the record, not the table)')
        problems += stray_figures(root, doc)
    if not tables:
        problems.append(f'{TABLE} or its "runs: all" block is missing')
    for p in problems:
        print(p)
    print(f'record-run: {len(rows)} runs, {blocks} blocks, {len(problems)} problems')
    return 1 if problems else 0


def counts(items):
    """tests/run.py's summary line of these results, and a note: the
    passes per suite, expected failures, and the failed tests."""
    bad = [i for i in items if i['status'] in ('fail', 'timeout')]
    passed = [i for i in items if i['status'] in ('pass', 'xpass')]
    retried = sum(1 for i in passed if i.get('retried'))
    result = (f'{len(passed)} passed, {len(bad)} failed, '
              f'{sum(1 for i in items if i["status"] == "skip")} skipped '
              f'(passed after a retry: {retried})')
    suites = {}
    for i in items:
        s = suites.setdefault(i['suite'].split(':')[0], [0, 0])
        s[0] += i['status'] in ('pass', 'xpass')
        s[1] += i['status'] == 'xfail'
    note = 'passed per suite: ' + ', '.join(f'{s} {n}' for s, (n, _) in suites.items())
    xfail = [f'{s} {x}' for s, (_, x) in suites.items() if x]
    if xfail:
        note += '; expected failures (tests/known-failures): ' + ', '.join(xfail)
    if bad:
        names = [f'{i["suite"]} {i["test"]}' for i in bad]
        note += '; failed: ' + ', '.join(names[:5]) + (' ...' if len(names) > 5 else '')
    return result, note


def git(checkout, *args):
    return subprocess.run(['git', '-C', checkout] + list(args), capture_output=True,
                          text=True, check=True).stdout.strip()


def add(args, root):
    row = dict.fromkeys(FIELDS, '')
    checkout = os.path.abspath(args.ci_run or root)
    items = None
    if args.ci_run is not None:
        try:
            with open(os.path.join(checkout, 'build', 'ci-run.json'), encoding='utf-8') as f:
                ci = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f'record-run: no finished .ci/run in {checkout}: {e}')
        started = datetime.datetime.fromisoformat(ci['started'].replace('Z', '+00:00'))
        row['command'] = ci['command']
        row['date'] = started.date().isoformat()
        row['time'] = f'{round(ci["seconds"] / 60)} min'
        results = os.path.join(checkout, 'build', 'test-results.json')
        if os.path.exists(results) and os.path.getmtime(results) >= started.timestamp():
            args.results = results
        elif args.result is None:
            args.result = (f'0 passed, 1 failed (no test ran: setup, build or '
                           f'check-patches failed; exit {ci["exit"]})')
    if args.results:
        with open(args.results, encoding='utf-8') as f:
            items = json.load(f)
        row['result'], row['notes'] = counts(items)
        if not row['date']:
            row['date'] = datetime.datetime.fromtimestamp(
                os.path.getmtime(args.results), datetime.timezone.utc).date().isoformat()
    if args.result is not None and items is None:
        row['result'] = args.result
    if args.command:
        row['command'] = args.command
    if args.time:
        row['time'] = args.time
    if args.date:
        row['date'] = args.date
    if not row['date']:
        row['date'] = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    row['where'] = args.where
    if args.series:
        row['series'] = args.series
    else:
        out = subprocess.run([os.path.join(checkout, 'scripts', 'version.sh'), 'series'],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f'record-run: scripts/version.sh series failed in {checkout}: '
                     f'{out.stderr.strip()} (or give --series)')
        row['series'] = out.stdout.strip().removeprefix('qemu-iobatch, ')
    if args.commit:
        row['commit'] = args.commit
    else:
        row['commit'] = git(checkout, 'rev-parse', '--short=7', 'HEAD')
        # The docs are where runs get recorded: changes there do not change a run.
        if git(checkout, 'status', '--porcelain', '--untracked-files=no', '--',
               '.', ':!docs', ':!README.md'):
            row['commit'] += ' + uncommitted changes'
    if args.note:
        row['notes'] = f'{args.note}; {row["notes"]}' if row['notes'] else args.note
    missing = [k for k in ('command', 'result', 'time') if not row[k]]
    if missing:
        sys.exit(f'record-run: give {", ".join("--" + k for k in missing)} '
                 '("unknown" when it is not known)')
    for k, v in row.items():
        if '\t' in v or '\n' in v:
            sys.exit(f'record-run: {k} has a tab or a newline: {v!r}')
    read_record(root)  # refuse to append to a malformed record
    with open(os.path.join(root, RECORD), 'a', encoding='utf-8') as f:
        f.write('\t'.join(row[k] for k in FIELDS) + '\n')
    print(f'record-run: {RECORD} += {row["date"]} {row["command"]}: {row["result"]}')
    regen(root)
    return 0


def main():
    global TOP
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    a = sub.add_parser('add', help='append a run to the record, regenerate the tables')
    a.add_argument('--where', required=True,
                   help="the machine and what it had, e.g. '2 cores, ccache warm'")
    a.add_argument('--ci-run', nargs='?', const='', metavar='CHECKOUT',
                   help='a finished .ci/run in CHECKOUT (default: the --root checkout)')
    a.add_argument('--command', help='the command as it was run')
    a.add_argument('--results', help='the --json of a tests/run.py run')
    a.add_argument('--result', help='the result as the command printed it')
    a.add_argument('--time', help="how long it took, e.g. '1.1 min'")
    a.add_argument('--date', help='YYYY-MM-DD (default: from the run, else today, UTC)')
    a.add_argument('--series', help="default: scripts/version.sh series of the checkout")
    a.add_argument('--commit', help='default: the checkout\'s HEAD')
    a.add_argument('--note')
    sub.add_parser('regen', help='rewrite the generated tables from the record')
    sub.add_parser('check', help='exit 1 if a table is stale or a doc has its own run figure')
    for p in sub.choices.values():
        p.add_argument('--root', default=TOP,
                       help='the checkout whose docs/runs.tsv and docs (default: this one)')
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if args.cmd == 'add':
        if args.date and not DATE.match(args.date):
            sys.exit(f'record-run: --date {args.date}: want YYYY-MM-DD')
        try:
            return add(args, root)
        except (OSError, ValueError, subprocess.CalledProcessError) as e:
            sys.exit(f'record-run: {e}')
    if args.cmd == 'regen':
        try:
            regen(root)
        except (OSError, ValueError) as e:
            sys.exit(f'record-run: {e}')
        return 0
    return check(root)


if __name__ == '__main__':
    sys.exit(main())
