#!/usr/bin/env python3
"""Unit tests of tests/run.py's accounting: retries, expected skips, skip
reasons.  make test runs them first:  python3 -m unittest tests/test_run.py"""

import io
import os
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  pylint: disable=wrong-import-position


def write(text):
    f = tempfile.NamedTemporaryFile('w', delete=False, suffix='.txt')
    f.write(text)
    f.close()
    return f.name


class Accounting(unittest.TestCase):
    def setUp(self):
        self.known = write('*:iotests:* 130 - flaky timing\n'
                           'base:iotests:* 307 #4 fail abort\n'
                           'base:chaos* hang/packed #27 fail spins\n'
                           'base:chaos* race/packed #27 racy spins sometimes\n')
        self.skips = write('*:iotests:raw 233 not suitable for this image format\n'
                           '?*:iotests:raw 162 ssh not available\n'
                           '*:unit test-x a reason\n'
                           'base:fuzz fuzz.sh the fuzzing build is of the fork\n')

    def tearDown(self):
        os.unlink(self.known)
        os.unlink(self.skips)

    def results(self, build='fork'):
        return run.Results(run.KnownFailures(self.known, build))

    def check(self, res, build='fork'):
        with redirect_stdout(io.StringIO()):
            return run.ExpectedSkips(self.skips, build).check(res)

    def test_retry_counted(self):
        res = self.results()
        with redirect_stdout(io.StringIO()):
            res.add('iotests:raw', '130', 'pass', retried='fail')
            res.add('iotests:raw', '001', 'pass')
            res.add('iotests:raw', '233', 'skip', 'not suitable for this image format')
            res.add('iotests:raw', '162', 'skip', 'ssh not available')
        self.check(res)
        self.assertEqual(res.retried_passes(), 1)
        self.assertEqual(run.summary_line(res),
                         '2 passed, 0 failed, 2 skipped (passed after a retry: 1)')

    def test_base_suite_known_failure(self):
        # chaos-base runs on the base in a run of the fork: the base's
        # known failures apply to it, and not to the fork's own chaos
        res = self.results('fork')
        with redirect_stdout(io.StringIO()):
            self.assertEqual(res.add('chaos-base', 'hang/packed', 'fail'), 'xfail')
            self.assertEqual(res.add('chaos', 'hang/packed', 'fail'), 'fail')
            self.assertEqual(res.add('iotests:raw', '307', 'fail'), 'fail')

    def test_trixie_suite_is_trixies(self):
        # qtest-trixie runs on the trixie line's fork in a run of the
        # bookworm fork: patterns for fork:* do not reach it, trixie:* do
        self.assertEqual(run.build_suite('fork', 'qtest-trixie'),
                         'trixie:qtest-trixie')
        self.assertEqual(run.build_suite('fork', 'chaos-base'), 'base:chaos-base')
        self.assertEqual(run.build_suite('fork', 'qtest'), 'fork:qtest')
        res = self.results('fork')
        with redirect_stdout(io.StringIO()):
            self.assertEqual(res.add('iotests:raw-trixie', '307', 'fail'), 'fail')

    def test_build_path(self):
        # a name is under build/; a path (with a "/") is taken as it is,
        # so that build/trixie/fork is not build/build/trixie/fork and
        # trixie/fork not build/trixie/fork
        self.assertEqual(run.build_path('fork'), f'{run.TOP}/build/fork')
        self.assertEqual(run.build_path('build/trixie/fork'),
                         os.path.abspath('build/trixie/fork'))
        self.assertEqual(run.build_path('/x/trixie/fork'), '/x/trixie/fork')

    def test_racy_known_failure(self):
        # a race of the base: a failure is expected, a pass is a plain pass
        # (not "now passing"); on the fork it is an ordinary test
        res = self.results('fork')
        with redirect_stdout(io.StringIO()):
            self.assertEqual(res.add('chaos-base', 'race/packed', 'fail'), 'xfail')
            self.assertEqual(res.add('chaos-base', 'race/packed', 'pass'), 'pass')
            self.assertEqual(res.add('chaos-base', 'hang/packed', 'pass'), 'xpass')
            self.assertEqual(res.add('chaos', 'race/packed', 'fail'), 'fail')

    def test_new_skip_fails(self):
        res = self.results()
        res.add('iotests:raw', '233', 'skip', 'not suitable for this image format')
        res.add('iotests:raw', '162', 'skip', 'ssh not available')
        res.add('iotests:raw', '999', 'skip', 'no frobnicator')
        self.check(res)
        item = [i for i in res.items if i['test'] == '999'][0]
        self.assertEqual(item['status'], 'fail')
        self.assertIn('no frobnicator', item['detail'])
        self.assertTrue(run.summary_line(res).startswith('0 passed, 1 failed, 2 skipped'))

    def test_skip_reason_differs_fails(self):
        # listed by test and reason: the same test skipping for another
        # reason is a failure; blanks do not count
        res = self.results()
        res.add('iotests:raw', '233', 'skip', 'not  suitable for this image format ')
        res.add('iotests:raw', '162', 'skip', 'sudo not available')
        self.check(res)
        by = {i['test']: i for i in res.items}
        self.assertEqual(by['233']['status'], 'skip')
        self.assertEqual(by['162']['status'], 'fail')
        self.assertIn('another reason', by['162']['detail'])
        self.assertIn('ssh not available', by['162']['detail'])
        self.assertIn('sudo not available', by['162']['detail'])

    def test_skip_no_reason(self):
        # update() lists a skip without a reason as "(no reason given)";
        # check() accepts that entry for such a skip, and only for it
        skips = write('*:unit test-y (no reason given)\n')
        try:
            res = self.results()
            res.add('unit', 'test-y', 'skip', '')
            with redirect_stdout(io.StringIO()):
                run.ExpectedSkips(skips, 'fork').check(res)
            self.assertEqual(res.items[0]['status'], 'skip')
            res = self.results()
            res.add('unit', 'test-y', 'skip', 'a reason after all')
            with redirect_stdout(io.StringIO()):
                run.ExpectedSkips(skips, 'fork').check(res)
            self.assertEqual(res.items[0]['status'], 'fail')
        finally:
            os.unlink(skips)

    def test_guest_cases(self):
        # the guest suite must report exactly the cases listed for its
        # subset: one that did not report fails, and so does one unlisted
        listed = write('# comment\nall case-a\nall case-b\nbase case-a\n')
        try:
            res = self.results()
            with redirect_stdout(io.StringIO()):
                res.add('guest', 'case-a', 'pass')
                res.add('guest', 'case-c', 'pass')
            run.check_guest_cases('/x/build/fork', res, 'guest', listed)
            by = {i['test']: i for i in res.items}
            self.assertEqual(by['case-a']['status'], 'pass')
            self.assertEqual(by['case-b']['status'], 'fail')
            self.assertIn('did not report', by['case-b']['detail'])
            self.assertEqual(by['case-c']['status'], 'fail')
            res = self.results('base')
            with redirect_stdout(io.StringIO()):
                res.add('guest', 'case-a', 'pass')
            run.check_guest_cases('/x/build/base', res, 'guest', listed)
            self.assertEqual([i['status'] for i in res.items], ['pass'])
        finally:
            os.unlink(listed)

    def test_skip_gone_fails(self):
        # 233 skips for a reason that does not vary: running it fails;
        # 162 is marked "?" (a tool a machine may have): only reported
        res = self.results()
        res.add('iotests:raw', '233', 'pass')
        gone = {t: what for _, t, what in self.check(res)}
        by = {i['test']: i for i in res.items}
        self.assertEqual(by['233']['status'], 'fail')
        self.assertIn('ended as pass', by['233']['detail'])
        self.assertIn('not suitable for this image format', by['233']['detail'])
        self.assertNotIn('233', gone)
        self.assertIn('did not run', gone['162'])
        self.assertNotIn('162', by)
        self.assertNotIn('test-x', gone)                         # unit did not run
        self.assertTrue(run.summary_line(res).startswith('0 passed, 1 failed'))

    def test_skip_gone_did_not_run(self):
        res = self.results()
        res.add('iotests:raw', '162', 'skip', 'ssh not available')
        self.check(res)
        by = {i['test']: i for i in res.items}
        self.assertEqual(by['233']['status'], 'fail')
        self.assertIn('did not run', by['233']['detail'])

    def test_update_keeps_varies(self):
        res = self.results()
        res.add('iotests:raw', '233', 'skip', 'not suitable for this image format')
        res.add('iotests:raw', '162', 'skip', 'ssh not available')
        with redirect_stdout(io.StringIO()):
            run.ExpectedSkips(self.skips, 'fork').update(res)
        entries = run.ExpectedSkips(self.skips, 'fork').entries
        self.assertIn(['?*:iotests:raw', '162', 'ssh not available'], entries)
        self.assertIn(['*:iotests:raw', '233', 'not suitable for this image format'], entries)
        self.assertIn(['*:unit', 'test-x', 'a reason'], entries)

    def test_build_pattern(self):
        res = self.results('base')
        res.add('fuzz', 'fuzz.sh', 'skip', 'the fuzzing build is of the fork')
        self.check(res, 'base')
        self.assertEqual(res.items[0]['status'], 'skip')
        res = self.results('fork')
        res.add('fuzz', 'fuzz.sh', 'skip', 'the fuzzing build is of the fork')
        self.check(res, 'fork')
        self.assertEqual(res.items[0]['status'], 'fail')

    def test_skip_summary(self):
        res = self.results()
        res.add('iotests:raw', '233', 'skip', 'certtool not found')
        res.add('iotests:raw', '162', 'skip', 'ssh not available')
        res.add('iotests:raw', '163', 'skip', 'ssh not available')
        lines = run.skip_summary(res, 'iotests')
        self.assertEqual(lines[0], 'skipped in iotests:raw: 3')
        self.assertEqual(lines[1].split(), ['2', 'ssh', 'not', 'available:', '162', '163'])

    def test_reasons(self):
        with tempfile.TemporaryDirectory() as d:
            with open(f'{d}/045.notrun', 'w', encoding='utf-8') as f:
                f.write('not suitable for this\nimage format: raw\n')
            self.assertEqual(run.notrun_reason(d, '045'),
                             'not suitable for this image format: raw')
            self.assertEqual(run.notrun_reason(d, '046'), '(no .notrun file)')
        self.assertEqual(run.tap_skip_reason('1..0 # SKIP no socat\n'), 'no socat')
        self.assertEqual(run.tap_skip_reason('ok 1 /a\n'), '(no reason in its output)')


class StartedReported(unittest.TestCase):
    """run_reported with started=: a check started beside the suites
    (the suite "configure") is reported as if it had run there."""

    def report(self, script):
        res = run.Results(run.KnownFailures(os.devnull, 'fork'))
        with redirect_stdout(io.StringIO()):
            started = run.Started([sys.executable, '-c', script], 60)
            run.run_reported(['configure.py'], r'^(ok|FAIL) (\S+?)(?:: (.*))?$',
                             ['a', 'b'], 60, 'configure', res, started=started)
        return {(i['test'], i['status']) for i in res.items}

    def test_pass_and_fail(self):
        self.assertEqual(self.report('print("ok a: fine"); print("FAIL b: bad"); exit(1)'),
                         {('a', 'pass'), ('b', 'fail')})

    def test_not_reported(self):
        self.assertEqual(self.report('print("ok a: fine"); exit(2)'),
                         {('a', 'pass'), ('b', 'fail')})

    def test_unexplained_exit(self):
        self.assertEqual(self.report('print("ok a: fine"); print("ok b: fine"); exit(2)'),
                         {('a', 'pass'), ('b', 'pass'), ('configure.py', 'fail')})


class QtestsNotBuilt(unittest.TestCase):
    """A build without its test binaries fails each of them by name, with
    the path that is missing, instead of stopping the run."""

    def test_missing_binaries(self):
        res = run.Results(run.KnownFailures(os.devnull, 'fork'))
        with tempfile.TemporaryDirectory() as build, \
             redirect_stdout(io.StringIO()):
            run.run_qtests(build, res)
        failed = {i['test']: i['detail'] for i in res.items
                  if i['status'] == 'fail'}
        self.assertEqual(len(res.items), len(failed))
        self.assertEqual(set(failed), {f'qos-test:{d}' for d in run.QOS_DEVICES} |
                         set(run.QTESTS))
        for test, detail in failed.items():
            self.assertRegex(detail, r'^not built: .*/tests/qtest/\S+ is missing$',
                             test)


class PlantedMustFail(unittest.TestCase):
    """run_planted: a planted defect counts as seen only if its case
    FAILs with the words its pattern wants; a case that passes is a blind
    check, and one that fails some other way proves nothing."""

    # A stand-in for tests/guest/run.py: it prints its option --say, with
    # CASE replaced by the case's name.
    FAKE = ('import sys\n'
            'case = sys.argv[sys.argv.index("--case") + 1]\n'
            'line = sys.argv[sys.argv.index("--say") + 1]\n'
            'print("# guest ...")\n'
            'print(line.replace("CASE", case) + " (3s)")\n'
            'sys.exit(0 if line.startswith("ok") else 1)\n')

    def planted(self, *outputs):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, 'run.py')
            with open(fake, 'w', encoding='utf-8') as f:
                f.write(self.FAKE)
            res = run.Results(run.KnownFailures(os.devnull, 'fork'))
            planted = [(f'p{k}', f'c{k}', ['--drop-write', '7', '--say', out],
                        r'@@ERROR check-\S+: .*\[dropped write 7:')
                       for k, out in enumerate(outputs)]
            with redirect_stdout(io.StringIO()):
                run.run_planted(f'{run.TOP}/build/fork', res, planted, runner=fake)
        return [(i['test'], i['status'], i['detail']) for i in res.items]

    def test_seen(self):
        got = self.planted('FAIL CASE: guest error: @@ERROR check-boot1: 1 of 4352 blocks'
                           ' do not hold pass 1 [dropped write 7: offset 0, 4096 bytes]')
        self.assertEqual([g[:2] for g in got], [('p0', 'pass')])

    def test_blind(self):
        got = self.planted('ok CASE: dropped write 7: offset 0, 4096 bytes')
        self.assertEqual(got[0][:2], ('p0', 'fail'))
        self.assertIn('blind', got[0][2])

    def test_failed_otherwise(self):
        got = self.planted('FAIL CASE: QEMU exited (rc -11) before /@@BOOT/'
                           ' [dropped write 7: offset 0, 4096 bytes]',
                           'FAIL CASE: guest error: @@ERROR check-boot1: 1 of 4352 blocks'
                           ' [no write dropped: fewer than 7 writes]')
        self.assertEqual([g[:2] for g in got], [('p0', 'fail'), ('p1', 'fail')])
        self.assertIn('not as planted', got[0][2])

    def test_no_result(self):
        got = self.planted('# nothing')
        self.assertEqual(got[0][:2], ('p0', 'fail'))
        self.assertIn('0 results', got[0][2])


class IotestsAtATime(unittest.TestCase):
    """run_iotests: JOBS configurations at a time, never more, and the
    results added in the order of the configurations."""

    def test_two_at_a_time(self):
        lock = threading.Lock()
        state = {'now': 0, 'most': 0}
        orig = run.iotests_config

        def fake(build, res, config, timeout, tmp):
            with lock:
                state['now'] += 1
                state['most'] = max(state['most'], state['now'])
            # the first configuration ends last
            time.sleep(0.3 if config == 'qcow2-threads' else 0.1)
            with lock:
                state['now'] -= 1
            return [(f'iotests:{config}', '001', 'pass', '', None, None)]

        run.iotests_config = fake
        try:
            res = run.Results(run.KnownFailures(os.devnull, 'fork'))
            configs = ['qcow2-threads', 'qcow2-native', 'qcow2-io_uring',
                       'raw-threads']
            with redirect_stdout(io.StringIO()):
                run.run_iotests('build', res, configs, 60, 2)
        finally:
            run.iotests_config = orig
        self.assertEqual(state['most'], 2)
        self.assertEqual([i['suite'] for i in res.items],
                         [f'iotests:{c}' for c in configs])


class IotestsFailureOutput(unittest.TestCase):
    """A failed iotest's diff, which check prints after "not ok", is kept
    with the failure and repeated under the summary, where a CI log that
    keeps only its end still shows why the test failed."""

    CHECK = """#!/bin/sh
echo '# running qcow2 001'
echo 'ok qcow2 001'
echo '# running qcow2 281'
echo 'not ok qcow2 281'
echo '+ValueError: invalid literal' >&2
echo '# running qcow2 002'
echo 'ok qcow2 002'
"""

    def test_diff_kept(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(f'{d}/tests/qemu-iotests')
            check = f'{d}/tests/qemu-iotests/check'
            with open(check, 'w', encoding='utf-8') as f:
                f.write(self.CHECK)
            os.chmod(check, 0o755)
            res = run.Results(run.KnownFailures(os.devnull, 'fork'))
            with redirect_stdout(io.StringIO()):
                _, results, _, outputs = run.run_check(
                    d, 'qcow2-threads', ['001', '281', '002'], res, 60, d)
        self.assertEqual(results, {'001': 'pass', '281': 'fail',
                                   '002': 'pass'})
        self.assertEqual(outputs, {'281': ['+ValueError: invalid literal']})
        with redirect_stdout(io.StringIO()):
            res.add('iotests:qcow2-threads', '281', 'fail', output=outputs['281'])
            res.add('iotests:qcow2-threads', '002', 'pass', output=['ignored'])
        self.assertEqual(res.items[0]['output'],
                         ['+ValueError: invalid literal'])
        self.assertNotIn('output', res.items[1])


if __name__ == '__main__':
    unittest.main()
