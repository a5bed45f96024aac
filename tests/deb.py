#!/usr/bin/env python3
"""make test-deb: install the fork's packages from build/deb and test them.

    python3 tests/deb.py [--keep] [--guest-case NAME...]

Installs qemu-system-x86, qemu-system-common, qemu-system-gui,
qemu-block-extra and qemu-utils from build/deb with apt-get, and the apt
preferences file beside them, then checks: the installed binary names the
fork's version; dpkg -S says our package owns it; modules (the TCG
accelerator, a display device, a block driver) load; apt would not replace
the fork with a higher Debian version, while it would without the
preferences file; the guest end-to-end tests (tests/guest) and the libvirt
test (tests/libvirt.py) pass against /usr/bin/qemu-system-x86_64.

At the end it puts back what was there before: Debian's versions of the
five packages where they were installed, nothing where they were not, and
/etc/apt/preferences.d as it was.  --keep leaves the fork installed.

Prints "ok NAME" / "FAIL NAME: why" per check, and "N passed, N failed".
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEB = os.path.join(TOP, 'build', 'deb')
PACKAGES = ['qemu-system-x86', 'qemu-system-common', 'qemu-system-gui',
            'qemu-block-extra', 'qemu-utils']
PREF = '/etc/apt/preferences.d/qemu-iobatch.pref'
QEMU = '/usr/bin/qemu-system-x86_64'
MODDIR = '/usr/lib/x86_64-linux-gnu/qemu'
ENV = dict(os.environ, DEBIAN_FRONTEND='noninteractive', LC_ALL='C')


class Fail(Exception):
    pass


def sh(*cmd, check=True, timeout=600, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, env=ENV,
                       timeout=timeout, check=False, **kw)
    if check and r.returncode != 0:
        out = (r.stdout + r.stderr).strip().splitlines()
        raise Fail(f'{" ".join(cmd[:4])}... exited {r.returncode}: {" | ".join(out[-5:])}')
    return r


def status(pkg):
    """The installed version of pkg, or None."""
    r = sh('dpkg-query', '-W', '-f=${Status}\t${Version}', pkg, check=False)
    st, _, ver = r.stdout.partition('\t')
    return ver if r.returncode == 0 and st.endswith('ok installed') else None


class Results:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def ok(self, name, what):
        self.passed += 1
        print(f'ok {name}: {what}', flush=True)

    def fail(self, name, why):
        self.failed += 1
        print(f'FAIL {name}: {why}', flush=True)

    def check(self, name, fn):
        try:
            self.ok(name, fn())
            return True
        except (Fail, OSError, subprocess.TimeoutExpired) as e:
            self.fail(name, str(e))
            return False


class DebTest:
    def __init__(self):
        self.debs = {}
        for p in PACKAGES:
            found = sorted(glob.glob(f'{DEB}/{p}_*.deb'))
            if len(found) != 1:
                raise SystemExit(f'test-deb: build/deb has {len(found)} {p} packages; run make deb')
            self.debs[p] = found[0]
        self.version = sh('dpkg-deb', '-f', self.debs['qemu-system-x86'], 'Version').stdout.strip()
        self.before = {p: status(p) for p in PACKAGES}
        self.pref_backup = None

    # -- install and restore ------------------------------------------------
    def install(self):
        sh('apt-get', 'install', '-y', '-q', '--no-install-recommends',
           *self.debs.values(), timeout=900)
        if os.path.exists(PREF):
            with open(PREF, encoding='utf-8') as f:
                self.pref_backup = f.read()
        shutil.copy(os.path.join(DEB, 'qemu-iobatch.pref'), PREF)
        was = ', '.join(f'{p} {v or "absent"}' for p, v in self.before.items())
        return f'{len(self.debs)} packages {self.version}; before: {was}'

    def restore(self):
        if self.pref_backup is not None:
            with open(PREF, 'w', encoding='utf-8') as f:
                f.write(self.pref_backup)
        elif os.path.exists(PREF):
            os.remove(PREF)
        back = [f'{p}={v}' for p, v in self.before.items() if v]
        gone = [p for p, v in self.before.items() if not v]
        gone = [p for p in gone if status(p)]
        if gone:
            sh('apt-get', 'purge', '-y', '-q', *gone, timeout=900)
        if back:
            sh('apt-get', 'install', '-y', '-q', '--allow-downgrades',
               '--no-install-recommends', *back, timeout=900)
        now = {p: status(p) for p in PACKAGES}
        if now != self.before:
            raise Fail(f'after restoring: {now}, before: {self.before}')
        return 'the packages are as before: ' + ', '.join(
            f'{p} {v or "absent"}' for p, v in now.items())

    # -- checks ---------------------------------------------------------------
    def version_check(self):
        first = sh(QEMU, '--version').stdout.splitlines()[0]
        if f'(Debian {self.version})' not in first:
            raise Fail(f'{QEMU} --version: {first!r}, want (Debian {self.version})')
        for p in PACKAGES:
            if status(p) != self.version:
                raise Fail(f'{p} is {status(p)}, want {self.version}')
        return first

    def owner(self):
        out = []
        for path, pkg in ((QEMU, 'qemu-system-x86'), ('/usr/bin/qemu-img', 'qemu-utils'),
                          (f'{MODDIR}/accel-tcg-x86_64.so', 'qemu-system-common'),
                          (f'{MODDIR}/ui-gtk.so', 'qemu-system-gui'),
                          (f'{MODDIR}/block-curl.so', 'qemu-block-extra')):
            got = sh('dpkg', '-S', path).stdout.strip()
            if got != f'{pkg}: {path}':
                raise Fail(f'dpkg -S {path}: {got!r}, want {pkg}')
            out.append(f'{os.path.basename(path)}: {pkg}')
        return '; '.join(out) + f' (all {self.version})'

    def modules(self):
        """Start a machine whose accelerator and display device are modules
        and look at what it mapped; a module of another build would be
        refused (QEMU checks the build id)."""
        p = subprocess.Popen([QEMU, '-M', 'q35', '-accel', 'tcg', '-nodefaults', '-display',
                              'none', '-device', 'qxl-vga', '-S', '-monitor', 'stdio'],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=ENV)
        try:
            time.sleep(3)
            if p.poll() is not None:
                raise Fail(f'QEMU exited {p.returncode}: {p.stdout.read().strip()}')
            with open(f'/proc/{p.pid}/maps', encoding='utf-8') as f:
                maps = f.read()
            out, _ = p.communicate('info qtree\nquit\n', timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        for mod in ('accel-tcg-x86_64.so', 'hw-display-qxl.so'):
            if f'{MODDIR}/{mod}' not in maps:
                raise Fail(f'{mod} not mapped by QEMU; output: {out.strip()[-300:]}')
        if 'dev: qxl-vga' not in out:
            raise Fail(f'no qxl-vga in info qtree: {out.strip()[-300:]}')
        if re.search(r'(?i)error|warning|failed', out):
            raise Fail(f'QEMU complained: {out.strip()[-300:]}')
        # qemu-img (qemu-utils) loads the curl driver from qemu-block-extra: a
        # refused connection, not an unknown driver, proves it loaded.
        r = sh('/usr/bin/qemu-img', 'info', 'json:{"file":{"driver":"http","url":"http://127.0.0.1:9/x"}}',
               check=False)
        msg = (r.stdout + r.stderr).strip()
        if r.returncode == 0 or 'unknown' in msg.lower() or 'connect' not in msg.lower():
            raise Fail(f'qemu-img with the http driver (block-curl.so): {msg}')
        return 'accel-tcg-x86_64.so and hw-display-qxl.so loaded, qxl-vga realized; ' \
               f'block-curl.so loaded by qemu-img ({msg.splitlines()[-1][:60]}...)'

    def apt_keeps(self):
        """apt-get -s upgrade keeps the fork: with the archive as configured,
        and against a repository that has Debian's next version (+1 on
        deb12uN) of the five packages, which apt would install without the
        preferences file."""
        r = sh('apt-get', '-s', 'upgrade')
        inst = [l for l in r.stdout.splitlines() if l.startswith('Inst ') and
                l.split()[1] in PACKAGES]
        if inst:
            raise Fail(f'apt-get -s upgrade would replace the fork: {inst}')
        m = re.match(r'(.*\+deb12u)(\d+)\+iobatch\d+$', self.version)
        if not m:
            raise Fail(f'cannot derive the next Debian version from {self.version}')
        nextver = f'{m.group(1)}{int(m.group(2)) + 1}'
        with tempfile.TemporaryDirectory(prefix='iobatch-apt-') as tmp:
            os.chmod(tmp, 0o755)
            repo = os.path.join(tmp, 'repo')
            os.makedirs(repo)
            for p in PACKAGES:
                d = os.path.join(tmp, 'pkg', p)
                os.makedirs(f'{d}/DEBIAN')
                with open(f'{d}/DEBIAN/control', 'w', encoding='utf-8') as f:
                    f.write(f'Package: {p}\nVersion: {nextver}\nArchitecture: amd64\n'
                            'Maintainer: test <test@localhost>\n'
                            "Description: stand-in for Debian's next update\n")
                sh('dpkg-deb', '-Zgzip', '--build', d, f'{repo}/{p}_{nextver}_amd64.deb')
            pk = sh('dpkg-scanpackages', '-m', '.', '/dev/null', cwd=repo).stdout
            with open(f'{repo}/Packages', 'w', encoding='utf-8') as f:
                f.write(pk)
            os.makedirs(f'{tmp}/lists/partial')
            os.makedirs(f'{tmp}/prefs-with')
            os.makedirs(f'{tmp}/prefs-without')
            shutil.copy(os.path.join(DEB, 'qemu-iobatch.pref'), f'{tmp}/prefs-with/')
            with open(f'{tmp}/sources.list', 'w', encoding='utf-8') as f:
                f.write(f'deb [trusted=yes] file:{repo} ./\n')
            base = ['-o', f'Dir::Etc::SourceList={tmp}/sources.list',
                    '-o', 'Dir::Etc::SourceParts=/dev/null',
                    '-o', f'Dir::State::Lists={tmp}/lists',
                    '-o', 'Dir::Etc::Preferences=/dev/null',
                    '-o', 'APT::Sandbox::User=root']
            sh('apt-get', *base, 'update')
            got = {}
            for which in ('with', 'without'):
                out = sh('apt-get', *base, '-o', f'Dir::Etc::PreferencesParts={tmp}/prefs-{which}',
                         '-s', 'upgrade').stdout
                got[which] = sorted(l.split()[1] for l in out.splitlines()
                                    if l.startswith('Inst ') and l.split()[1] in PACKAGES)
        if got['with']:
            raise Fail(f'with qemu-iobatch.pref, apt would install {nextver} of {got["with"]}')
        if got['without'] != sorted(PACKAGES):
            raise Fail(f'the check proves nothing: without the pref apt would replace '
                       f'{got["without"]}, want all five')
        return (f'apt-get -s upgrade replaces nothing; against a repository with {nextver}: '
                'nothing with qemu-iobatch.pref, all five without it')

    def run_suite(self, res, name, cmd, timeout):
        """Run a test script that prints ok/FAIL/SKIP lines; count them."""
        print(f'== {name}: {" ".join(cmd)}', flush=True)
        counts = {'ok': 0, 'FAIL': 0, 'SKIP': 0}
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=ENV)
            t0 = time.time()
            for line in p.stdout:
                print('   ', line, end='', flush=True)
                m = re.match(r'^(ok|FAIL|SKIP) ', line)
                if m:
                    counts[m.group(1)] += 1
                if time.time() - t0 > timeout:
                    p.kill()
                    break
            p.wait()
        except OSError as e:
            res.fail(name, str(e))
            return
        res.passed += counts['ok']
        res.failed += counts['FAIL']
        res.skipped += counts['SKIP']
        if p.returncode != 0 and not counts['FAIL']:
            res.fail(name, f'exit status {p.returncode}')
        elif counts['ok'] + counts['FAIL'] + counts['SKIP'] == 0:
            res.fail(name, 'no test reported')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--keep', action='store_true', help='leave the fork installed')
    ap.add_argument('--guest-case', nargs='+', default=[], metavar='NAME',
                    help='run only these guest cases (default: all)')
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit('test-deb: installs packages: run as root')
    t = DebTest()
    res = Results()
    t0 = time.time()
    print(f'# test-deb: {t.version}', flush=True)
    try:
        if res.check('deb-install', t.install):
            res.check('deb-version', t.version_check)
            res.check('deb-dpkg-owner', t.owner)
            res.check('deb-modules', t.modules)
            res.check('deb-apt-keeps-fork', t.apt_keeps)
            guest = [sys.executable, f'{TOP}/tests/guest/run.py', '--build', 'fork',
                     '--bindir', '/usr/bin']
            if a.guest_case:
                guest += ['--case'] + a.guest_case
            t.run_suite(res, 'guest', guest, 3600)
            t.run_suite(res, 'libvirt', [sys.executable, f'{TOP}/tests/libvirt.py',
                                         '--emulator', QEMU], 1800)
    finally:
        if a.keep:
            print('# --keep: the fork stays installed; see docs/install.md to go back')
        else:
            res.check('deb-restore', t.restore)
    print(f'# test-deb took {(time.time() - t0) / 60:.1f} min')
    print(f'{res.passed} passed, {res.failed} failed, {res.skipped} skipped')
    return 1 if res.failed else 0


if __name__ == '__main__':
    sys.exit(main())
