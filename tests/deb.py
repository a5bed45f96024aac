#!/usr/bin/env python3
"""make test-deb: the fork's packages through the apt repository, on this host.

    [LINE=trixie] python3 tests/deb.py [--keep] [--guest-case NAME...] [--no-guest]

For the line LINE (scripts/line.sh; default bookworm) whose Debian release
this host runs, it REPLACES THIS HOST'S QEMU while it runs: for a build VM,
not a production host.  It puts back what was there at the end, also when
a check fails or it is stopped with SIGINT, SIGTERM or SIGHUP (not
SIGKILL).  For another line (trixie on a bookworm host) it leaves the host
alone: the same steps run in a clean root of the line's release that
mmdebstrap makes from Debian's archive (build/LINE/test-deb-root; its apt
downloads kept in DEB_CACHE/apt-LINE), with /proc, /sys, /dev, /tmp and
the checkout mounted at their own paths, every apt, dpkg and QEMU command
run in it (chroot), and the guest suite given wrappers that start the
root's binaries; the root goes at the end (what step 7 puts back is the
root's, which is new); the libvirt test runs in the root too, with the
line's own libvirt.  No directory is ever deleted while something is
mounted in it (rmtree_nomounts): a recursive delete through the root's
mounts would delete this host's /dev, /tmp and the checkout.

1. The packages of build/deb (make deb) carry the version that
   scripts/version.sh derives from git (base + "+iobatchN").  Debian's
   QEMU (the newest version below the fork's, installed now if the host has
   another or none) runs a VM (TCG, SeaBIOS, nothing to boot) through
   steps 2 and 3.
2. scripts/repo.sh adds them to a repository of its own
   (build/test-deb/repo, signed with a key of its own in
   build/test-deb/signing) and installs its qemu-iobatch-apt: this host's
   apt gets the sources file (Signed-By the test key), the pin, the apt
   hook and qemu-iobatch-check, all owned by that package.
3. 'apt-get update' runs the hook, which warns exactly when Debian's
   archive has a newer qemu than the fork's base; 'apt-get install
   qemu-system-x86 ...' (the names only) installs the fork from the
   repository.  The VM still runs Debian's binary (query-version; its
   /proc/PID/exe is deleted); migrated to a new process, it runs the fork.
4. The installed packages: --version names the package version and the
   series; dpkg -S says our packages own the files; modules (the TCG
   accelerator, a display device, a block driver) load; apt would not
   replace the fork with a higher Debian version, while it would without
   the pin; the guest end-to-end tests (tests/guest) and the libvirt test
   (tests/libvirt.py) pass against /usr/bin/qemu-system-x86_64.
5. A rebuild with a changed series: the same source built at N+1
   (IOBATCH_REV, into build/deb-next; reused while its source is the same,
   and built through ccache), added to the repository: 'apt-get -s upgrade'
   moves all five packages to it, and they are upgraded.
6. Going back to Debian's packages as docs/install.md says: apt-get purge
   qemu-iobatch-apt (its files go), apt-get update, Debian's version of
   each package installed with --allow-downgrades; --version then names
   Debian's.
7. What was there before is put back: Debian's versions of the five
   packages where they were installed, nothing where they were not, the
   qemu-iobatch-apt the host had (saved with 'apt-get download' before
   the test) or none, and the apt configuration files as they were.  --keep leaves the fork
   installed from the repository instead (see docs/install.md to go back).

Prints "ok NAME" / "FAIL NAME: why" per check, and "N passed, N failed".
"""

import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import lineinfo

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = os.environ.get('LINE', 'bookworm')


def line_var(expr):
    """The value of the shell expression EXPR after scripts/line.sh."""
    return lineinfo.line_var(LINE, expr)


def host_release():
    with open('/etc/os-release', encoding='utf-8') as f:
        m = re.search(r'^VERSION_CODENAME=(\S+)$', f.read(), re.M)
    return m and m.group(1).strip('"')


LINE_BUILD = line_var('$LINE_BUILD')
DEB = os.path.join(LINE_BUILD, 'deb')
PACKAGES = line_var('${LINE_DEB_PACKAGES[*]}').split()
# Another release than this host's: everything in a root of the line's.
# The root has this host's /dev, /tmp and the checkout mounted in it: it is
# a directory of its own, inside no directory that the test deletes.
IN_ROOT = host_release() != LINE
ROOT = os.path.join(LINE_BUILD, 'test-deb-root') if IN_ROOT else ''
EXEC = ['chroot', ROOT] if IN_ROOT else []
PREF = '/etc/apt/preferences.d/qemu-iobatch.pref'
APT_PKG = 'qemu-iobatch-apt'
CHECK = '/usr/sbin/qemu-iobatch-check'
# Every file qemu-iobatch-apt installs, and the check's state; test-deb puts
# each back as it was.
APT_FILES = ['/etc/apt/sources.list.d/qemu-iobatch.sources', PREF,
             '/etc/apt/apt.conf.d/80qemu-iobatch', CHECK,
             '/etc/update-motd.d/90-qemu-iobatch',
             '/usr/share/keyrings/qemu-iobatch-archive-keyring.gpg',
             '/var/lib/qemu-iobatch/held-back']
REPO = os.path.join(LINE_BUILD, 'test-deb', 'repo')
KEYDIR = os.path.join(LINE_BUILD, 'test-deb', 'signing')
SAVED = os.path.join(LINE_BUILD, 'test-deb-saved')
DEB_NEXT = os.path.join(LINE_BUILD, 'deb-next')
# The guest suite's qemu-system-x86_64 and qemu-img: the host's, or
# wrappers that start the root's.
BINDIR = os.path.join(LINE_BUILD, 'test-deb-bin') if IN_ROOT else '/usr/bin'
APT_GET = ['apt-get', '-q', '-o', 'DPkg::Lock::Timeout=600']
QEMU = '/usr/bin/qemu-system-x86_64'
MODDIR = '/usr/lib/x86_64-linux-gnu/qemu'
# Modules that deb-modules loads, with the devices that make QEMU load them,
# and a file of each package for deb-dpkg-owner.  10.0 builds TCG in; its
# SPICE and OpenGL modules are packages of their own.
MODULES = {'bookworm': (['qxl-vga'], ['accel-tcg-x86_64.so', 'hw-display-qxl.so']),
           'trixie': (['qxl-vga', 'virtio-gpu-pci'],
                      ['hw-display-qxl.so', 'hw-display-virtio-gpu-pci.so'])}[LINE]
OWNERS = {'qemu-system-x86': QEMU, 'qemu-utils': '/usr/bin/qemu-img',
          'qemu-system-common': f'{MODDIR}/hw-display-virtio-gpu-pci.so' if LINE == 'trixie'
                                else f'{MODDIR}/accel-tcg-x86_64.so',
          'qemu-system-gui': f'{MODDIR}/ui-gtk.so',
          'qemu-block-extra': f'{MODDIR}/block-curl.so',
          'qemu-system-modules-spice': f'{MODDIR}/hw-display-qxl.so',
          'qemu-system-modules-opengl': f'{MODDIR}/ui-opengl.so'}
# The VMs that run across the install: a machine type that Debian's QEMU and
# the fork of either line have, so that one can migrate to the other.
VM_MACHINE = 'pc-i440fx-7.2'
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


def tsh(*cmd, **kw):
    """sh() in the system under test: this host, or the root."""
    return sh(*EXEC, *cmd, **kw)


def tpath(path):
    """Where this host sees the path of the system under test."""
    return ROOT + path


def mounts_in(path):
    """The mount points at or under path."""
    path = os.path.realpath(path)
    with open('/proc/mounts', encoding='utf-8') as f:
        points = [l.split()[1].replace('\\040', ' ') for l in f]
    return [p for p in points if p == path or p.startswith(path + '/')]


def rmtree_nomounts(path):
    """shutil.rmtree(path), refused (Fail) while anything is mounted at or
    under it: it would delete through the mount (a root's bind mount of
    /dev, /tmp or the checkout) what is mounted there."""
    found = mounts_in(path)
    if found:
        raise Fail(f'not deleting {path}: {", ".join(found)} mounted in it')
    shutil.rmtree(path, ignore_errors=True)


def shared(path):
    """Whether the mount on top at path propagates (shared:N in mountinfo)."""
    with open('/proc/self/mountinfo', encoding='utf-8') as f:
        tags = [l.split(' - ')[0].split()[6:] for l in f if l.split()[4] == path]
    return bool(tags) and any(t.startswith('shared:') for t in tags[-1])


def status(pkg):
    """The installed version of pkg, or None."""
    r = tsh('dpkg-query', '-W', '-f=${Status}\t${Version}', pkg, check=False)
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


def debs_in(d):
    """{package: .deb} of the line's packages in d, one each."""
    debs = {}
    for p in PACKAGES:
        found = sorted(glob.glob(f'{d}/{p}_*.deb'))
        if len(found) != 1:
            raise Fail(f'{d} has {len(found)} {p} packages; run make deb')
        debs[p] = found[0]
    return debs


def apt_versions(pkg):
    """Every version of pkg that apt knows, with its pin priority."""
    out = tsh('apt-cache', 'policy', pkg).stdout
    return re.findall(r'^ (?:\*\*\*|   ) (\S+) (-?\d+)$', out, re.M)


def qmp(vm, cmd, **args):
    """What QMP command cmd returned on vm; an error reply is a Fail."""
    r = vm.qmp(cmd, args_dict=args)
    if 'error' in r:
        raise Fail(f'QMP {cmd}: {r["error"]}')
    return r['return']


def version_gt(a, b):
    return sh('dpkg', '--compare-versions', a, 'gt', b, check=False).returncode == 0


def newest_debian(pkg, below=None):
    """The newest version of pkg that apt would install from Debian
    (priority 500 or more, not the fork's), lower than below if given;
    None if there is none."""
    best = None
    for v, prio in apt_versions(pkg):
        if '+iobatch' in v or int(prio) < 500 or (below and not version_gt(below, v)):
            continue
        if best is None or version_gt(v, best):
            best = v
    return best


class Root:
    """A clean root of the line's Debian release, made by mmdebstrap from
    Debian's archive (variant apt), with this host's /proc, /sys, /dev,
    /tmp and the checkout mounted at their own paths."""
    MOUNTS = ['/proc', '/sys', '/dev', '/tmp', TOP]

    def __init__(self):
        self.dir = ROOT
        self.shm_made_shared = False

    def make(self):
        self.remove()
        cache = os.path.join(os.environ.get('DEB_CACHE', '/var/cache/qemu-iobatch'), f'apt-{LINE}')
        os.makedirs(cache, exist_ok=True)
        os.makedirs(os.path.dirname(self.dir), exist_ok=True)
        suites = line_var('${LINE_SUITES[*]}')
        mirror = os.environ.get('DEB_MIRROR', 'http://deb.debian.org/debian')
        secmirror = os.environ.get('DEB_SECURITY_MIRROR', 'http://deb.debian.org/debian-security')
        print(f'# test-deb: a clean {LINE} root in {self.dir} (mmdebstrap, variant apt)', flush=True)
        sh('mmdebstrap', '--mode=root', '--variant=apt',
           '--aptopt=APT::Install-Recommends "false"',
           '--setup-hook=mkdir -p "$1/var/cache/apt/archives"',
           f'--setup-hook=sync-in {cache} /var/cache/apt/archives',
           f'--customize-hook=sync-out /var/cache/apt/archives {cache}',
           # apt in the root keeps what it downloads too.
           '--customize-hook=rm -f "$1/etc/apt/apt.conf.d/docker-clean"',
           LINE, self.dir, f'deb {mirror} {suites} main',
           f'deb {secmirror} {line_var("$LINE_SECURITY_SUITE")} main', timeout=1800)
        # DNS for apt in the root; no service starts there (policy-rc.d).
        shutil.copy('/etc/resolv.conf', f'{self.dir}/etc/resolv.conf')
        with open(f'{self.dir}/usr/sbin/policy-rc.d', 'w', encoding='utf-8') as f:
            f.write('#!/bin/sh\nexit 101\n')
        os.chmod(f'{self.dir}/usr/sbin/policy-rc.d', 0o755)
        # The root a mount point of its own (private): tests/libvirt.py's
        # unshare --propagation private, in the chroot, needs / to be one.
        sh('mount', '--bind', self.dir, self.dir)
        sh('mount', '--make-private', self.dir)
        # What the guest suite mounts on this host while the root is up
        # (the enospc case's small tmpfs in its directory in /dev/shm) must
        # be in the root too, where QEMU runs: this host's /dev/shm is
        # shared while the root exists, the root's copy its slave.
        if not shared('/dev/shm'):
            sh('mount', '--make-shared', '/dev/shm')
            self.shm_made_shared = True
        for m in self.MOUNTS:
            os.makedirs(self.dir + m, exist_ok=True)
            sh('mount', '--rbind', m, self.dir + m)
            sh('mount', '--make-rslave', self.dir + m)
        # The guest suite's binaries: the root's, started in the root in
        # the caller's directory (the checkout or /tmp, both mounted).
        rmtree_nomounts(BINDIR)
        os.makedirs(BINDIR)
        for name in ('qemu-system-x86_64', 'qemu-img', 'qemu-io', 'qemu-nbd',
                     'qemu-storage-daemon'):
            with open(f'{BINDIR}/{name}', 'w', encoding='utf-8') as f:
                f.write('#!/bin/sh\n# tests/deb.py: the root\'s %s, in the caller\'s directory\n'
                        'exec chroot %s /bin/sh -c \'cd "$0" && exec /usr/bin/%s "$@"\' '
                        '"$PWD" "$@"\n' % (name, self.dir, name))
            os.chmod(f'{BINDIR}/{name}', 0o755)
        return f'{LINE} root in {self.dir}, {" ".join(self.MOUNTS)} mounted'

    def remove(self):
        for m in sorted(mounts_in(self.dir), reverse=True):
            subprocess.run(['umount', '-l', m], capture_output=True, check=False)
        if self.shm_made_shared:
            sh('mount', '--make-private', '/dev/shm')
            self.shm_made_shared = False
        rmtree_nomounts(self.dir)
        if os.path.exists(self.dir):
            raise Fail(f'{self.dir} could not be removed')
        return f'{self.dir} unmounted and removed'


class DebTest:
    def __init__(self):
        try:
            self.debs = debs_in(DEB)
        except Fail as e:
            raise SystemExit(f'test-deb: {e}') from e
        self.version = sh('dpkg-deb', '-f', self.debs['qemu-system-x86'], 'Version').stdout.strip()
        self.series = sh(f'{TOP}/scripts/version.sh', 'series').stdout.strip()
        self.base = self.version.rsplit('+iobatch', 1)[0]
        self.before = {p: status(p) for p in PACKAGES}
        # A host that uses a qemu-iobatch repository already: its
        # qemu-iobatch-apt is put back at the end, from a copy saved now.
        self.apt_pkg_before = status(APT_PKG)
        self.apt_pkg_saved = None
        if self.apt_pkg_before and not IN_ROOT:
            rmtree_nomounts(SAVED)
            os.makedirs(SAVED)
            r = sh('apt-get', 'download', f'{APT_PKG}={self.apt_pkg_before}', cwd=SAVED,
                   check=False)
            found = glob.glob(f'{SAVED}/{APT_PKG}_*.deb')
            if r.returncode != 0 or len(found) != 1:
                raise SystemExit(f'test-deb: {APT_PKG} {self.apt_pkg_before} is installed and '
                                 f'could not be saved to put it back ({r.stderr.strip()}); '
                                 f'apt-get purge {APT_PKG} first, or run on a build VM')
            self.apt_pkg_saved = found[0]
        self.saved = {}
        for f in APT_FILES:
            if os.path.exists(tpath(f)):
                with open(f, 'rb') as fh:
                    self.saved[f] = (fh.read(), os.stat(f).st_mode & 0o7777)
        self.next_version = None
        self.tmp = tempfile.mkdtemp(prefix='iobatch-test-deb-')
        self.vms = []
        self.old_vm = self.old_info = None

    # -- the version, the repository, install ----------------------------------
    def derived_version(self):
        """build/deb's version is what version.sh derives from git now."""
        env = {k: v for k, v in ENV.items() if k != 'IOBATCH_REV'}
        want = subprocess.run([f'{TOP}/scripts/version.sh', 'deb'], capture_output=True,
                              text=True, env=env, check=False)
        if want.returncode != 0:
            raise Fail(f'scripts/version.sh deb: {want.stderr.strip()}')
        # N as version.sh rev counts it (tests/packaging.py, version-rev,
        # checks that count against git).
        n = subprocess.run([f'{TOP}/scripts/version.sh', 'rev'], capture_output=True,
                           text=True, env=env, check=False).stdout.strip()
        if self.version != want.stdout.strip() or not self.version.endswith(f'+iobatch{n}'):
            raise Fail(f'build/deb is {self.version}; version.sh says {want.stdout.strip()}, '
                       f'N={n}: run make deb')
        return (f'{self.version}: N={n}, the commits that changed lines/{LINE}/patches/ '
                f'or {line_var("${LINE_PACKAGING#$top/}")}'
                + (' (or patches/, before lines/)' if LINE == 'bookworm' else ''))

    def repo(self):
        rmtree_nomounts(os.path.dirname(REPO))
        out = sh(f'{TOP}/scripts/repo.sh', '--from', DEB, '--repo', REPO, '--key-dir', KEYDIR,
                 *(['--no-setup'] if IN_ROOT else []), timeout=900).stdout
        if IN_ROOT:
            apt_debs = glob.glob(f'{REPO}/{APT_PKG}_*.deb')
            if len(apt_debs) != 1:
                raise Fail(f'{REPO} has {len(apt_debs)} {APT_PKG} packages')
            tsh('dpkg', '-i', apt_debs[0])
        for f in APT_FILES[:-1]:
            got = tsh('dpkg', '-S', f, check=False).stdout.strip()
            if got != f'{APT_PKG}: {f}':
                raise Fail(f'after make repo, dpkg -S {f}: {got!r}, want {APT_PKG}: '
                           f'{out.strip()[-300:]}')
        with open(tpath(APT_FILES[0]), encoding='utf-8') as f:
            src = f.read()
        if f'URIs: file:{REPO}' not in src or 'Signed-By: ' not in src or 'Trusted' in src:
            raise Fail(f'{APT_FILES[0]}: {src!r}')
        return out.strip().splitlines()[0] + f'; {APT_PKG} {status(APT_PKG)} installed: ' + \
            ', '.join(os.path.basename(f) for f in APT_FILES[:-1])

    def debian_newest(self):
        """The newest version of Debian's qemu-system-x86 that apt would
        install without the pin (priority 500 or more), without +bN."""
        best = newest_debian('qemu-system-x86')
        return best and re.sub(r'\+b\d+$', '', best)

    def update_hook(self):
        """apt-get update runs qemu-iobatch-check: it warns if and only if
        Debian's archive is ahead of the fork's base."""
        out = tsh(*APT_GET, 'update', timeout=900).stdout
        newest = self.debian_newest()
        if not newest:
            raise Fail("apt knows no Debian qemu-system-x86: is Debian's archive in the sources?")
        ahead = version_gt(newest, self.base)
        warned = [l for l in out.splitlines() if 'qemu-iobatch-check' in l]
        # Before the fork is installed the check has nothing to compare.
        if warned:
            raise Fail(f'apt-get update, fork not installed yet: {warned}')
        self.ahead = ahead
        return f"apt-get update ran; Debian's newest qemu-system-x86 source version {newest}" \
               f"{' is AHEAD of' if ahead else ' is not newer than'} the fork's base {self.base}"

    def install(self):
        # What docs/install.md tells: 'apt install qemu-system-x86' brings
        # the other four along (Depends and Recommends), all the fork's.
        sim = tsh(*APT_GET, '-s', 'install', 'qemu-system-x86').stdout
        inst = {m.group(1): m.group(2) for m in
                re.finditer(r'^Inst (\S+) (?:\[\S+\] )?\((\S+) ', sim, re.M)
                if m.group(1) in PACKAGES}
        if inst != {p: self.version for p in PACKAGES if self.before[p] != self.version}:
            raise Fail(f'apt-get -s install qemu-system-x86 would install {inst}, '
                       f'want {self.version} of all {len(PACKAGES)}')
        tsh(*APT_GET, 'install', '-y', '--no-install-recommends', *PACKAGES, timeout=900)
        for p in PACKAGES:
            if status(p) != self.version:
                raise Fail(f'apt-get install {p} installed {status(p)}, want {self.version} '
                           'from the repository')
        was = ', '.join(f'{p} {v or "absent"}' for p, v in self.before.items())
        return (f'apt-get -s install qemu-system-x86: the {len(PACKAGES)} at {self.version}; '
                f'installed them from the repository; before: {was}')

    def check_after_install(self):
        """qemu-iobatch-check, run by hand and by apt-get update, agrees with
        the archive now that the fork is installed."""
        r = tsh(CHECK, check=False)
        upd = tsh(*APT_GET, 'update', timeout=900).stdout
        hook = [l for l in upd.splitlines() if 'qemu-iobatch-check' in l]
        if self.ahead:
            if r.returncode != 1 or 'WARNING' not in r.stdout or not hook or \
                    not os.path.exists(tpath('/var/lib/qemu-iobatch/held-back')):
                raise Fail(f'Debian is ahead, but: exit {r.returncode} {r.stdout.strip()!r}, '
                           f'hook {hook}')
        elif r.returncode != 0 or 'ok:' not in r.stdout or hook:
            raise Fail(f'nothing newer in Debian, but: exit {r.returncode} {r.stdout.strip()!r}, '
                       f'hook printed {hook}')
        return r.stdout.strip()

    def restore(self):
        # An install that a signal interrupted leaves dpkg half done.
        subprocess.run(['dpkg', '--configure', '-a'], capture_output=True, check=False,
                       env=ENV)
        r = subprocess.run(['dpkg', '--purge', APT_PKG], capture_output=True, text=True,
                           check=False, env=ENV) if status(APT_PKG) else None
        for f in APT_FILES:
            if os.path.exists(f):
                os.remove(f)
        if self.apt_pkg_saved:
            sh('dpkg', '-i', self.apt_pkg_saved, timeout=300)
        for f, (data, mode) in self.saved.items():
            os.makedirs(os.path.dirname(f), exist_ok=True)
            with open(f, 'wb') as fh:
                fh.write(data)
            os.chmod(f, mode)
        tsh(*APT_GET, 'update', timeout=900)
        back = [f'{p}={v}' for p, v in self.before.items() if v]
        gone = [p for p, v in self.before.items() if not v]
        gone = [p for p in gone if status(p)]
        if gone:
            tsh(*APT_GET, 'purge', '-y', *gone, timeout=900)
        if back:
            tsh(*APT_GET, 'install', '-y', '--allow-downgrades',
               '--no-install-recommends', *back, timeout=900)
        now = {p: status(p) for p in PACKAGES}
        if now != self.before:
            raise Fail(f'after restoring: {now}, before: {self.before}')
        if r is not None and r.returncode != 0:
            raise Fail(f'dpkg --purge {APT_PKG}: {r.stderr.strip()}')
        if status(APT_PKG) != self.apt_pkg_before:
            raise Fail(f'{APT_PKG} is {status(APT_PKG)} after restoring, was {self.apt_pkg_before}')
        return 'the packages are as before: ' + ', '.join(
            f'{p} {v or "absent"}' for p, v in now.items()) + \
            f'; apt files as before ({len(self.saved)} existed)'

    # -- a VM that runs while the fork is installed over Debian's ---------------
    def debian_vm(self):
        """Debian's QEMU (installed now if the host has another or none) runs
        a VM that keeps running while the fork is installed over it."""
        tsh(*APT_GET, 'update', timeout=900)
        want = {}
        for p in PACKAGES:
            # The newest Debian version below the fork's: what a host has
            # before it installs the fork (apt does not downgrade to it).
            best = newest_debian(p, below=self.version)
            if not best:
                raise Fail(f'apt knows no Debian version of {p} below {self.version}')
            want[p] = best
        if {p: status(p) for p in PACKAGES} != want:
            tsh(*APT_GET, 'install', '-y', '--allow-downgrades', '--no-install-recommends',
               *[f'{p}={v}' for p, v in want.items()], timeout=900)
        self.old_vm = self.vm(f'{BINDIR}/qemu-system-x86_64')
        info = self.vm_info(self.old_vm)
        if 'iobatch' in info['package'] or info['status'] != 'running':
            raise Fail(f'the VM on Debian\'s {want["qemu-system-x86"]}: {info}')
        self.old_info = info
        return (f'Debian\'s {want["qemu-system-x86"]} installed; a VM runs on it (pid '
                f'{self.old_vm.get_pid()}): query-version {info["package"]!r}')

    def vm(self, binary, *extra):
        """A VM on binary: SeaBIOS with nothing to boot, TCG, QMP."""
        # QEMU's python/qemu from any source tree of the base: make fetch's,
        # or the one make deb unpacked.
        trees = [os.path.join(LINE_BUILD, 'src', n, 'python') for n in ('fork', 'base')] + \
            sorted(glob.glob(os.path.join(LINE_BUILD, 'deb-work', '*', 'python')))
        trees = [t for t in trees if os.path.isdir(os.path.join(t, 'qemu', 'machine'))]
        if not trees:
            raise Fail('no python/qemu in build/src or build/deb-work: run make fetch')
        sys.path.insert(0, trees[0])
        from qemu.machine import QEMUMachine  # pylint: disable=import-outside-toplevel
        vm = QEMUMachine(binary, args=['-M', VM_MACHINE, '-accel', 'tcg', '-m', '128',
                                       '-nodefaults', '-display', 'none', *extra],
                         base_temp_dir=self.tmp)
        self.vms.append(vm)
        try:
            vm.launch()
        except Exception as e:  # pylint: disable=broad-except
            raise Fail(f'{binary} did not start: {(vm.get_log() or str(e)).strip()[-300:]}') \
                from e
        return vm

    @staticmethod
    def vm_info(vm):
        return {'package': qmp(vm, 'query-version')['package'].strip(),
                'status': qmp(vm, 'query-status')['status'],
                'exe': os.readlink(f'/proc/{vm.get_pid()}/exe')}

    def running_vm(self):
        """The VM started on Debian's QEMU before the install still runs
        Debian's binary (dpkg replaced the file, not the process); migrated to
        a new process it runs the fork, without a restart of the guest."""
        old = self.old_vm
        if not old.is_running():
            raise Fail(f'the VM started before the install exited: {old.get_log()}')
        info = self.vm_info(old)
        if info['package'] != self.old_info['package'] or info['status'] != 'running' or \
                not info['exe'].endswith(' (deleted)'):
            raise Fail(f'after the install the old VM says {info}, before {self.old_info}')
        sock = os.path.join(self.tmp, 'migrate.sock')
        new = self.vm(f'{BINDIR}/qemu-system-x86_64', '-incoming', 'defer')
        qmp(new, 'migrate-incoming', uri=f'unix:{sock}')
        qmp(old, 'migrate', uri=f'unix:{sock}')
        deadline = time.time() + 120
        while True:
            mig = qmp(old, 'query-migrate')
            if mig.get('status') == 'completed':
                break
            if mig.get('status') in ('failed', 'cancelled') or time.time() > deadline:
                raise Fail(f'migration to the fork: {mig}')
            time.sleep(0.2)
        deadline = time.time() + 30
        while (info2 := self.vm_info(new))['status'] != 'running' and time.time() < deadline:
            time.sleep(0.2)
        want = f'Debian {self.version}, {self.series}'
        if info2['status'] != 'running' or want not in info2['package']:
            raise Fail(f'after the migration the new process says {info2}, want running and '
                       f'{want!r}')
        old.shutdown()
        new.shutdown()
        return (f'after the install the old process still ran {info["package"]!r} '
                f'({info["exe"]}); migrated to a new one: {info2["status"]}, '
                f'{info2["package"]!r}')

    def stop_vms(self):
        for vm in self.vms:
            try:
                vm.shutdown()
            except Exception:  # pylint: disable=broad-except
                pass
        rmtree_nomounts(self.tmp)

    # -- checks ---------------------------------------------------------------
    def version_check(self, version=None):
        version = version or self.version
        first = tsh(QEMU, '--version').stdout.splitlines()[0]
        want = f'(Debian {version}, {self.series})'
        if not first.endswith(want):
            raise Fail(f'{QEMU} --version: {first!r}, want it to end in {want}')
        for p in PACKAGES:
            if status(p) != version:
                raise Fail(f'{p} is {status(p)}, want {version}')
        return first

    # -- a changed series: apt upgrade ------------------------------------------
    def upgrade(self):
        """Build the same source at N+1 (a changed series as apt sees it),
        add it to the repository, and let apt upgrade to it."""
        n = int(self.version.rsplit('+iobatch', 1)[1])
        env = dict(ENV, IOBATCH_REV=str(n + 1), DEB_OUT=DEB_NEXT)
        t0 = time.time()
        print(f'# building the packages at +iobatch{n + 1} into {DEB_NEXT} '
              f'(log: {DEB_NEXT}/build.log)', flush=True)
        r = subprocess.run(['nice', '-n', '10', f'{TOP}/scripts/deb.sh'], capture_output=True,
                           text=True, env=env, timeout=4 * 3600, check=False)
        if r.returncode != 0:
            raise Fail(f'deb.sh at N={n + 1}: {(r.stdout + r.stderr).strip()[-400:]}')
        built = ' '.join(l for l in r.stdout.splitlines() if 'built in' in l or 'up to date' in l)
        debs = debs_in(DEB_NEXT)
        self.next_version = sh('dpkg-deb', '-f', debs['qemu-system-x86'], 'Version').stdout.strip()
        if self.next_version != f'{self.base}+iobatch{n + 1}':
            raise Fail(f'{DEB_NEXT} is {self.next_version}, want {self.base}+iobatch{n + 1}')
        sh(f'{TOP}/scripts/repo.sh', '--from', DEB_NEXT, '--repo', REPO, '--key-dir', KEYDIR,
           *(['--no-setup'] if IN_ROOT else []), timeout=900)
        tsh(*APT_GET, 'update', timeout=900)
        sim = tsh(*APT_GET, '-s', 'upgrade').stdout
        inst = {m.group(1): m.group(2) for m in
                re.finditer(r'^Inst (\S+) \[\S+\] \((\S+) ', sim, re.M) if m.group(1) in PACKAGES}
        if inst != {p: self.next_version for p in PACKAGES}:
            raise Fail(f'apt-get -s upgrade would install {inst}, want {self.next_version} of '
                       f'all {len(PACKAGES)}')
        # Only ours: a real 'apt-get upgrade' would upgrade the whole host.
        tsh(*APT_GET, 'install', '-y', '--only-upgrade', *PACKAGES, timeout=900)
        first = self.version_check(self.next_version)
        return (f'{built} ({(time.time() - t0) / 60:.1f} min); apt-get -s upgrade: all '
                f'{len(PACKAGES)} {self.version} -> {self.next_version}; upgraded: {first}')

    # -- going back to Debian's ---------------------------------------------------
    def rollback(self):
        """docs/install.md, 'Going back to Debian's packages'."""
        tsh(*APT_GET, 'purge', '-y', APT_PKG, timeout=900)
        left = [f for f in APT_FILES if os.path.exists(tpath(f))]
        if left or status(APT_PKG):
            raise Fail(f'apt-get purge {APT_PKG} left {left} ({status(APT_PKG)})')
        tsh(*APT_GET, 'update', timeout=900)
        # The candidate is still the installed fork (apt does not downgrade
        # by itself): Debian's version is the newest of the version table
        # that is not ours, as docs/install.md has the admin read it.
        want = {}
        for p in PACKAGES:
            best = newest_debian(p)
            if not best:
                raise Fail(f'without the repository apt knows no Debian version of {p}')
            want[p] = best
        tsh(*APT_GET, 'install', '-y', '--allow-downgrades', '--no-install-recommends',
           *[f'{p}={v}' for p, v in want.items()], timeout=900)
        now = {p: status(p) for p in PACKAGES}
        if now != want:
            raise Fail(f'after going back: {now}, want {want}')
        first = tsh(QEMU, '--version').stdout.splitlines()[0]
        if 'iobatch' in first or f'(Debian {want["qemu-system-x86"]})' not in first:
            raise Fail(f'{QEMU} --version after going back: {first!r}')
        return f'Debian\'s {want["qemu-system-x86"]} installed: {first}'

    def owner(self):
        out = []
        for pkg in PACKAGES:
            path = OWNERS[pkg]
            got = tsh('dpkg', '-S', path).stdout.strip()
            if got != f'{pkg}: {path}':
                raise Fail(f'dpkg -S {path}: {got!r}, want {pkg}')
            out.append(f'{os.path.basename(path)}: {pkg}')
        return '; '.join(out) + f' (all {self.version})'

    def modules(self):
        """Start a machine whose accelerator and display device are modules
        and look at what it mapped; a module of another build would be
        refused (QEMU checks the build id)."""
        devices, modules = MODULES
        p = subprocess.Popen([*EXEC, QEMU, '-M', 'q35', '-accel', 'tcg', '-nodefaults', '-display',
                              'none', *[a for d in devices for a in ('-device', d)], '-S',
                              '-monitor', 'stdio'],
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
        for mod in modules:
            if f'{tpath(MODDIR)}/{mod}' not in maps:
                raise Fail(f'{mod} not mapped by QEMU; output: {out.strip()[-300:]}')
        for d in devices:
            if f'dev: {d}' not in out:
                raise Fail(f'no {d} in info qtree: {out.strip()[-300:]}')
        if re.search(r'(?i)error|warning|failed', out):
            raise Fail(f'QEMU complained: {out.strip()[-300:]}')
        # qemu-img (qemu-utils) loads the curl driver from qemu-block-extra: a
        # refused connection, not an unknown driver, proves it loaded.
        r = tsh('/usr/bin/qemu-img', 'info', 'json:{"file":{"driver":"http","url":"http://127.0.0.1:9/x"}}',
               check=False)
        msg = (r.stdout + r.stderr).strip()
        if r.returncode == 0 or 'unknown' in msg.lower() or 'connect' not in msg.lower():
            raise Fail(f'qemu-img with the http driver (block-curl.so): {msg}')
        return f'{" and ".join(modules)} loaded, {" and ".join(devices)} realized; ' \
               f'block-curl.so loaded by qemu-img ({msg.splitlines()[-1][:60]}...)'

    def apt_keeps(self):
        """apt-get -s upgrade keeps the fork: with the archive as configured,
        and against a repository that has Debian's next version (+1 on
        deb12uN) of the five packages, which apt would install without the
        preferences file."""
        r = tsh('apt-get', '-s', 'upgrade')
        inst = [l for l in r.stdout.splitlines() if l.startswith('Inst ') and
                l.split()[1] in PACKAGES]
        if inst:
            raise Fail(f'apt-get -s upgrade would replace the fork: {inst}')
        m = re.match(r'(.*\+deb\d+u)(\d+)\+iobatch\d+$', self.version)
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
            tsh('apt-get', *base, 'update')
            got = {}
            for which in ('with', 'without'):
                out = tsh('apt-get', *base, '-o', f'Dir::Etc::PreferencesParts={tmp}/prefs-{which}',
                         '-s', 'upgrade').stdout
                got[which] = sorted(l.split()[1] for l in out.splitlines()
                                    if l.startswith('Inst ') and l.split()[1] in PACKAGES)
        if got['with']:
            raise Fail(f'with qemu-iobatch.pref, apt would install {nextver} of {got["with"]}')
        if got['without'] != sorted(PACKAGES):
            raise Fail(f'the check proves nothing: without the pref apt would replace '
                       f'{got["without"]}, want all {len(PACKAGES)}')
        return (f'apt-get -s upgrade replaces nothing; against a repository with {nextver}: '
                f'nothing with qemu-iobatch.pref, all {len(PACKAGES)} without it')

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
                # tests/guest/run.py says "skip NAME: why", libvirt.py "SKIP".
                m = re.match(r'^(ok|FAIL|SKIP|skip) ', line)
                if m:
                    counts[m.group(1).replace('skip', 'SKIP')] += 1
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


class Stopped(Exception):
    pass


def stop(signum, _frame):
    raise Stopped(f'stopped by signal {signum}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--keep', action='store_true',
                    help='leave the fork installed (no going back, no restore)')
    ap.add_argument('--guest-case', nargs='+', default=[], metavar='NAME',
                    help='run only these guest cases (default: all)')
    ap.add_argument('--no-guest', action='store_true',
                    help='skip the guest and libvirt suites (reported as skipped)')
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit('test-deb: installs packages: run as root')
    if IN_ROOT and a.keep:
        sys.exit(f'test-deb: --keep keeps the fork on this host, which does not run {LINE}')
    res = Results()
    t0 = time.time()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    root = Root() if IN_ROOT else None
    t = None
    try:
        if root and not res.check('deb-root', root.make):
            raise Stopped(f'no {LINE} root')
        t = DebTest()
        if IN_ROOT:
            print(f'# test-deb: {t.version} in the {LINE} root {ROOT}', flush=True)
        else:
            print(f'# test-deb: {t.version}; REPLACES THIS HOST\'S QEMU until it ends', flush=True)
        res.check('deb-version-derived', t.derived_version)
        vm_ok = res.check('deb-debian-vm', t.debian_vm)
        if res.check('deb-repo', t.repo) and res.check('deb-apt-update', t.update_hook) and \
                res.check('deb-install', t.install):
            if vm_ok:
                res.check('deb-running-vm', t.running_vm)
            res.check('deb-version', t.version_check)
            res.check('deb-held-back-check', t.check_after_install)
            res.check('deb-dpkg-owner', t.owner)
            res.check('deb-modules', t.modules)
            res.check('deb-apt-keeps-fork', t.apt_keeps)
            if a.no_guest:
                for name in ('guest', 'libvirt'):
                    res.skipped += 1
                    print(f'SKIP {name}: --no-guest', flush=True)
            else:
                # --build names the line (trixie/fork): its cases and
                # what the fork of that line has.
                guest = [sys.executable, f'{TOP}/tests/guest/run.py', '--build',
                         'fork' if LINE == 'bookworm' else f'{LINE}/fork', '--bindir', BINDIR]
                if a.guest_case:
                    guest += ['--case'] + a.guest_case
                t.run_suite(res, 'guest', guest, 3600)
                libvirt = [sys.executable, f'{TOP}/tests/libvirt.py', '--emulator', QEMU]
                if IN_ROOT:
                    # The line's own libvirt, in the root: tests/libvirt.py
                    # installs it there, and builds the guest there.
                    tsh(*APT_GET, 'install', '-y', '--no-install-recommends', 'python3',
                        timeout=900)
                    # Its guest is built of the root's packages (a
                    # trixie kernel), in a cache apart from the host's.
                    libvirt = [*EXEC, '/bin/sh', '-c', f'cd {TOP} && GUEST_CACHE='
                               f'{TOP}/.cache/guest-{LINE} exec python3 '
                               f'tests/libvirt.py --emulator {QEMU}']
                t.run_suite(res, 'libvirt', libvirt, 1800)
            if res.check('deb-upgrade', t.upgrade):
                res.check('deb-upgraded-modules', t.modules)
            if not a.keep:
                res.check('deb-back-to-debian', t.rollback)
    except (Stopped, KeyboardInterrupt) as e:
        res.fail('test-deb', f'{e or "interrupted"}; restoring')
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if t:
            t.stop_vms()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        if root:
            res.check('deb-root-removed', root.remove)
        elif a.keep:
            print('# --keep: the fork stays installed from build/test-deb/repo; '
                  'see docs/install.md to go back', flush=True)
        elif t:
            res.check('deb-restore', t.restore)
    print(f'# test-deb took {(time.time() - t0) / 60:.1f} min')
    print(f'{res.passed} passed, {res.failed} failed, {res.skipped} skipped')
    return 1 if res.failed else 0


if __name__ == '__main__':
    sys.exit(main())
