#!/usr/bin/env python3
"""Unit tests of scripts/record-run.py (the record of runs, docs/runs.tsv,
and the tables generated from it) and of what .ci/run leaves for it.
make test runs them first:  python3 -m unittest tests/test_record.py"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import importlib.util

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TOP, 'scripts', 'record-run.py')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  pylint: disable=wrong-import-position

_spec = importlib.util.spec_from_file_location('record_run', SCRIPT)
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)

HEADER = '\t'.join(record.FIELDS) + '\n'
ROWS = [
    ['2026-12-01', 'make test-deb', '39 patches, 1e946b914b07', 'unknown',
     '53 passed, 0 failed, 0 skipped', '11.6 min', 'a build VM', ''],
    ['2026-12-02', '.ci/run', '40 patches, 80d3e843d06f', 'abc1234',
     '1535 passed, 0 failed, 643 skipped', '76 min', '2 cores', 'a | in a note'],
    ['2026-12-03', 'make test-deb', '41 patches, db33c8b54f63', 'unknown',
     '54 passed, 0 failed, 0 skipped', '12 min', 'a build VM', 'newer'],
]
VERIFIED = '# Verified\n\n<!-- runs: all -->\n<!-- end of runs -->\n'
INSTALL = ('# Install\n\nSee below.\n\n<!-- runs: latest\nmake test-deb\nmake run\n-->\n'
           '<!-- end of runs -->\n\nThe end.\n')
GUEST = 'Expected:\n\n    0 passed, 1 failed\n'
ITEMS = [
    {'suite': 'docs', 'test': 'links', 'status': 'pass', 'detail': ''},
    {'suite': 'iotests:raw-threads', 'test': '001', 'status': 'pass', 'detail': ''},
    {'suite': 'iotests:raw-native', 'test': '002', 'status': 'skip', 'detail': 'x'},
    {'suite': 'iotests:raw-native', 'test': '130', 'status': 'pass', 'detail': '',
     'retried': 'fail'},
    {'suite': 'chaos-base', 'test': 'hang/packed', 'status': 'xfail', 'detail': 'spins'},
    {'suite': 'guest', 'test': 'soak', 'status': 'timeout', 'detail': 'stall'},
    {'suite': 'unit', 'test': 'test-x', 'status': 'xpass', 'detail': ''},
]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


class Checkout:
    """A checkout with a record, the table, a doc with a block of its
    own, and the guest doc's allowed figure."""

    def __init__(self, rows=ROWS):
        self.dir = tempfile.mkdtemp(prefix='iobatch-record-')
        write(self.path(record.RECORD),
              '# a comment\n' + HEADER + ''.join('\t'.join(r) + '\n' for r in rows))
        write(self.path(record.TABLE), VERIFIED)
        write(self.path('docs/install.md'), INSTALL)
        write(self.path('docs/guest-tests.md'), GUEST)
        write(self.path('README.md'), '# Readme\n')

    def path(self, rel):
        return os.path.join(self.dir, rel)

    def run(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args) + ['--root', self.dir],
                              capture_output=True, text=True, check=False, timeout=60)

    def close(self):
        shutil.rmtree(self.dir)


class Tables(unittest.TestCase):
    def setUp(self):
        self.co = Checkout()
        r = self.co.run('regen')
        self.assertEqual(r.returncode, 0, r.stderr)

    def tearDown(self):
        self.co.close()

    def test_generated(self):
        table = read(self.co.path(record.TABLE))
        latest = table.split('## Every run')[0]
        # The latest run of each command, the command run last first.
        self.assertLess(latest.index('| 2026-12-03 | 54 passed'), latest.index('`.ci/run`'))
        self.assertNotIn('53 passed', latest)
        self.assertIn('40 patches, 80d3e843d06f at abc1234', latest)
        history = table.split('### `make test-deb`')[1]
        self.assertLess(history.index('54 passed'), history.index('53 passed'))
        self.assertIn('a \\| in a note', table)
        install = read(self.co.path('docs/install.md'))
        self.assertIn('[`make test-deb`](verified.md#make-test-deb) | 41 patches', install)
        self.assertIn('| `make run` | - | - | not recorded |', install)
        self.assertTrue(install.endswith('<!-- end of runs -->\n\nThe end.\n'))
        r = self.co.run('check')
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn('3 runs, 2 blocks, 0 problems', r.stdout)
        r = self.co.run('regen')
        self.assertIn('nothing (up to date)', r.stdout)

    def check_fails(self, want):
        r = self.co.run('check')
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(want, r.stdout)

    def test_record_changed(self):
        with open(self.co.path(record.RECORD), 'a', encoding='utf-8') as f:
            f.write('\t'.join(['2026-12-04', 'make test-deb', 'unknown', 'unknown',
                               '1 failed', '9 min', 'x', '']) + '\n')
        self.check_fails('docs/verified.md: its runs block differs from docs/runs.tsv')
        self.check_fails('docs/install.md: its runs block differs')

    def test_table_edited(self):
        path = self.co.path('docs/install.md')
        write(path, read(path).replace('54 passed', '55 passed'))
        self.check_fails('docs/install.md: its runs block differs')

    def test_figure_outside(self):
        path = self.co.path('docs/install.md')
        write(path, read(path) + '\nLast run: 12 passed in 1.2 minutes.\n')
        self.check_fails('docs/install.md:19: a run figure outside docs/verified.md: '
                         'Last run: 12 passed')
        write(self.co.path('README.md'), '# Readme\n\n    make test   # 1557 passed\n')
        self.check_fails('README.md:3: a run figure outside')

    def test_allowed_figure_elsewhere(self):
        write(self.co.path('docs/testing.md'), 'Expected:\n\n    0 passed, 1 failed\n')
        self.check_fails('docs/testing.md:3: a run figure outside')

    def test_malformed(self):
        with open(self.co.path(record.RECORD), 'a', encoding='utf-8') as f:
            f.write('2026-12-04\tmake deb\tunknown\n')
        self.check_fails('docs/runs.tsv:6: 3 fields, want 8')
        r = self.co.run('regen')
        self.assertNotEqual(r.returncode, 0)

    def test_bad_date_and_empty(self):
        write(self.co.path(record.RECORD), HEADER + '\t'.join(
            ['3 Dec', 'make deb', 'unknown', 'unknown', 'built', '1 min', 'x', '']) + '\n')
        self.check_fails("date '3 Dec' is not YYYY-MM-DD or unknown")
        write(self.co.path(record.RECORD), HEADER + '\t'.join(
            ['unknown', 'make deb', '', 'unknown', 'built', '1 min', 'x', '']) + '\n')
        self.check_fails('empty series (write "unknown")')

    def test_table_missing(self):
        write(self.co.path(record.TABLE), '# Verified\n')
        self.check_fails('docs/verified.md or its "runs: all" block is missing')


class Counts(unittest.TestCase):
    def test_same_as_run_summary(self):
        res = run.Results(run.KnownFailures(os.devnull, 'fork'))
        res.items = [dict(i) for i in ITEMS]
        result, note = record.counts(ITEMS)
        self.assertEqual(result, run.summary_line(res))
        self.assertEqual(result, '4 passed, 1 failed, 1 skipped (passed after a retry: 1)')
        self.assertEqual(note, 'passed per suite: docs 1, iotests 2, chaos-base 0, guest 0, '
                               'unit 1; expected failures (tests/known-failures): '
                               'chaos-base 1; failed: guest soak')


class AddCiRun(unittest.TestCase):
    """add --ci-run in a git checkout with a finished .ci/run."""

    def setUp(self):
        self.co = Checkout(ROWS[:1])
        write(self.co.path('scripts/version.sh'),
              '#!/bin/sh\necho "qemu-iobatch, 3 patches, 0123456789ab"\n')
        os.chmod(self.co.path('scripts/version.sh'), 0o755)
        write(self.co.path('.gitignore'), '/build/\n')
        git = ['git', '-C', self.co.dir, '-c', 'user.name=t', '-c', 'user.email=t@t']
        subprocess.run(git + ['init', '-q'], check=True)
        subprocess.run(git + ['add', '-A'], check=True)
        subprocess.run(git + ['commit', '-q', '-m', 'x'], check=True)
        self.head = subprocess.run(git + ['rev-parse', '--short=7', 'HEAD'], check=True,
                                   capture_output=True, text=True).stdout.strip()
        # Started an hour ago; the results were written since.
        started = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
        self.date = started.date().isoformat()
        write(self.co.path('build/ci-run.json'), json.dumps(
            {'command': '.ci/run', 'started': started.strftime('%Y-%m-%dT%H:%M:%SZ'),
             'seconds': 3840, 'exit': 1}))
        write(self.co.path('build/test-results.json'), json.dumps(ITEMS))
        self.co.run('regen')

    def tearDown(self):
        self.co.close()

    def last_row(self):
        return read(self.co.path(record.RECORD)).rstrip('\n').split('\n')[-1].split('\t')

    def test_row(self):
        r = self.co.run('add', '--ci-run', '--where', '2 cores, ccache cold')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.last_row(), [
            self.date, '.ci/run', '3 patches, 0123456789ab', self.head,
            '4 passed, 1 failed, 1 skipped (passed after a retry: 1)', '64 min',
            '2 cores, ccache cold',
            'passed per suite: docs 1, iotests 2, chaos-base 0, guest 0, unit 1; expected '
            'failures (tests/known-failures): chaos-base 1; failed: guest soak'])
        self.assertIn('| [`.ci/run`](#cirun) | 3 patches, 0123456789ab at '
                      f'{self.head} | {self.date} | 4 passed, 1 failed',
                      read(self.co.path(record.TABLE)))
        self.assertEqual(self.co.run('check').returncode, 0)

    def test_uncommitted(self):
        write(self.co.path('scripts/version.sh'),
              '#!/bin/sh\necho "qemu-iobatch, 4 patches, 0123456789ab"\n')
        self.co.run('add', '--ci-run', '--where', 'x')
        self.assertEqual(self.last_row()[2:4],
                         ['4 patches, 0123456789ab', f'{self.head} + uncommitted changes'])

    def test_stale_results(self):
        """Results older than the run's start are another run's."""
        os.utime(self.co.path('build/test-results.json'), (0, 0))
        self.co.run('add', '--ci-run', '--where', 'x')
        self.assertEqual(self.last_row()[4], '0 passed, 1 failed (no test ran: setup, '
                         'build or check-patches failed; exit 1)')

    def test_by_hand(self):
        r = self.co.run('add', '--command', 'make test-deb', '--where', 'x')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('give --result, --time', r.stderr)
        r = self.co.run('add', '--command', 'make test-deb', '--result', 'a\tb',
                        '--time', '1 min', '--where', 'x')
        self.assertIn('result has a tab', r.stderr)
        self.assertEqual(len(read(self.co.path(record.RECORD)).split('\n')), 4)


class CiRun(unittest.TestCase):
    """.ci/run leaves build/ci-run.json; with a stand-in make, nothing built."""

    def ci(self, make):
        with tempfile.TemporaryDirectory(prefix='iobatch-ci-') as tmp:
            os.makedirs(f'{tmp}/co/.ci')
            shutil.copy(os.path.join(TOP, '.ci', 'run'), f'{tmp}/co/.ci/run')
            write(f'{tmp}/bin/make', '#!/bin/sh\n' + make)
            os.chmod(f'{tmp}/bin/make', 0o755)
            r = subprocess.run([f'{tmp}/co/.ci/run'], capture_output=True, text=True,
                               timeout=60, check=False,
                               env=dict(os.environ, PATH=f'{tmp}/bin:{os.environ["PATH"]}'))
            with open(f'{tmp}/co/build/ci-run.json', encoding='utf-8') as f:
                ci = json.load(f)
            return r, ci, os.path.exists(f'{tmp}/co/build/test-results.json')

    def test_passed(self):
        r, ci, _ = self.ci('mkdir -p build; echo "5 passed, 0 failed, 0 skipped" '
                           '>build/test-summary.txt; sleep 1\n')
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.splitlines()[-1], '5 passed, 0 failed, 0 skipped')
        self.assertEqual((ci['command'], ci['exit']), ('.ci/run', 0))
        self.assertGreaterEqual(ci['seconds'], 1)
        self.assertRegex(ci['started'], r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$')

    def test_no_test_ran(self):
        r, ci, results = self.ci('exit 2\n')
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout.splitlines()[-1], '0 passed, 1 failed')
        self.assertEqual(ci['exit'], 2)
        self.assertFalse(results)


if __name__ == '__main__':
    unittest.main()
