#!/usr/bin/env python3
"""tests/packaging.py: versions, package metadata, the signed apt repository,
qemu-iobatch-apt and the held-back check.

    python3 tests/packaging.py [--build DIR]

Runs in about a minute and leaves the host alone: apt runs with a private
configuration (APT_CONFIG: its own sources, preferences, apt.conf.d, lists
and dpkg status file) in a temporary directory, into which qemu-iobatch-apt
is unpacked; the repository and its signing key are made there too.  One
line per check, "ok NAME: what" or "FAIL NAME: why":

- version-*: scripts/version.sh, on the bookworm line (the one with
  packages).  The series id counts and hashes lines/bookworm/patches/series;
  the package revision N is the number of commits that changed
  lines/bookworm/patches/ (patches/ before lines/) or packaging/x86only.patch,
  less the commits that only moved the series there, every file unchanged
  (in a temporary clone: a commit elsewhere keeps N, one to the series adds
  1 and its version sorts above);
  uncommitted changes, a shallow clone and a tarball fail with a message that
  says what to do; IOBATCH_REV overrides N.
- build-version (with --build): qemu-system-x86_64 --version of that build
  names it: the series id for build/fork, "unpatched" for build/base and
  for build/upstream (with the trixie line's pinned version).
- install-*: make install and make uninstall (scripts/install.sh) on a
  stand-in build, into a DESTDIR: the default prefix is /opt/qemu-iobatch;
  install copies the five programs and the data (linked firmware as files,
  not trace-events-all) and lists them and the directories it made in a
  manifest; installing again is fine; uninstall leaves nothing; without a
  manifest it refuses; install overwrites no file it did not install, and
  uninstall keeps a file of the user's in the prefix.
- deb-src-metadata, deb-src-metadata-trixie: scripts/deb-src.sh of each
  line (into a temporary DEB_WORK and DEB_OUT, from the fetched base
  source): the .dsc and debian/control name the project
  (packaging/maintainer) as Maintainer and Debian's team as
  (XSBC-)Original-Maintainer, debian/control-in gives the same control
  when debian/rules remakes it (trixie: by the rule of its
  debian/control.mk); debian/changelog is the release entries of the line's
  changelog (packaging/changelog, changelog-trixie: none yet) under a
  generated entry for a build that is no release, on top of Debian's whole
  changelog, unchanged.
  deb-profile-packages-bookworm, -trixie: in that source, the binary
  packages an arch-only amd64 build with the profile pkg.qemu.x86only makes
  (debian/control evaluated by dpkg's own Dpkg::BuildProfiles, as
  dh_listpackages does) are exactly the line's LINE_DEB_PACKAGES
  (scripts/line.sh), which make deb requires.
  deb-changelog-merge: scripts/deb-changelog.py puts a release on an
  older base below Debian's later entries, a generated entry on top, and
  refuses a release above the version built, a version Debian has, and
  entries out of order.
- repo-*: scripts/repo.sh on stand-in packages of the five names (dpkg-deb)
  at the version version.sh gives, in a temporary repository signed with a
  key made in a temporary key directory; qemu-iobatch-apt from it unpacked
  into the stand-in host: apt accepts the repository through Signed-By and
  installs the fork although the archive has a higher Debian version
  (which it installs without the pin); the InRelease verifies with the
  shipped key, the key is made once and kept, outside the repository, and
  no secret key is in it; apt REJECTS the repository when its Release is
  signed with another key, when the signed InRelease is modified, and when
  Packages is modified after signing; qemu-iobatch-apt holds exactly its
  files (conffiles in /etc, the key in /usr/share/keyrings) and apt can
  purge it; a second build at N+1 added to the repository is what 'apt
  upgrade' moves to; a different build of a version already in the
  repository is refused, and so is a key directory inside it; without gpg
  repo.sh says to run make deps; the package's postrm (DPKG_ROOT) keeps
  the check's state on remove and takes it on purge; on a host that the
  old setup-apt (from git history) set up, its preinst removes setup-apt's
  files, so that nothing is left that trusts the repository unsigned;
  repo-one-line: the trixie line's seven stand-ins (LINE=trixie) are
  refused by the bookworm repository and go into one of their own, each
  Release naming its line as Codename, and the trixie line refuses a build
  without its module packages.
- held-back-*: packaging/qemu-iobatch-check, as qemu-iobatch-apt installs it,
  against stand-in archives: quiet when Debian has nothing newer than the
  fork's base; a warning (exit 1, state file, login message) when it has,
  that says the pin holds Debian's update back, the fork's base is older,
  and gives the admin's choices: wait for the next release, or go back to
  Debian's packages with one apt-get command, which apt (simulated, the pin
  in place) carries out, and after which the pin keeps Debian's packages
  until the next release;
  nothing for a version apt would not install by default (backports);
  "apt upgrade installs it" when a fork build on the new version is in the
  repository; nothing when the fork is not installed; and run by apt itself
  after 'apt-get update' through the shipped apt.conf.d hook.
"""

import argparse
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

from lineinfo import line_var

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ['qemu-system-x86', 'qemu-system-common', 'qemu-system-gui',
            'qemu-block-extra', 'qemu-utils']
failed = 0


class Fail(Exception):
    pass


def report(name, fn):
    global failed
    try:
        print(f'ok {name}: {fn()}', flush=True)
    except (Fail, OSError, subprocess.SubprocessError) as e:
        failed += 1
        print(f'FAIL {name}: {e}', flush=True)


def run(cmd, cwd=None, env=None, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    if check and r.returncode != 0:
        out = (r.stdout + r.stderr).strip().splitlines()
        raise Fail(f'{" ".join(cmd)} exited {r.returncode}: {" | ".join(out[-4:])}')
    return r


# The line with packages, its pin and its series; the series was in
# patches/ before lines/ (FORMER_PATCHES).
LINE = 'lines/bookworm'
PATCHES = f'{LINE}/patches'
FORMER_PATCHES = 'patches'


def pinned(line=LINE):
    with open(os.path.join(TOP, line, 'base.pin'), encoding='utf-8') as f:
        return re.search(r'^VERSION=(\S+)$', f.read(), re.M).group(1)


def series_files(top):
    with open(os.path.join(top, PATCHES, 'series'), encoding='utf-8') as f:
        return [l.strip() for l in f if l.strip() and not l.startswith('#')]


def version_sh(top, what, env=None, check=True):
    return run([os.path.join(top, 'scripts', 'version.sh'), what],
               env=dict(os.environ, **(env or {})), check=check)


def git(top, *args):
    return run(['git', '-C', top, *args]).stdout.strip()


def deb_gt(a, b):
    return run(['dpkg', '--compare-versions', a, 'gt', b], check=False).returncode == 0


# -- versions ---------------------------------------------------------------

def t_series():
    got = version_sh(TOP, 'series').stdout.strip()
    files = series_files(TOP)
    h = hashlib.sha256()
    for f in ['series'] + files:
        with open(os.path.join(TOP, PATCHES, f), 'rb') as fh:
            h.update(fh.read())
    want = f'qemu-iobatch, {len(files)} patches, {h.hexdigest()[:12]}'
    if got != want:
        raise Fail(f'version.sh series: {got!r}, want {want!r}')
    return got


def moves_only(top, c):
    """Commit C of TOP changed the paths of the package revision only by
    moving the series from patches/ to lines/bookworm/patches/ (git's
    rename detection: every change an exact rename, R100)."""
    out = git(top, 'diff', '--name-status', '-M', f'{c}^', c, '--',
              FORMER_PATCHES, PATCHES, 'packaging/x86only.patch').splitlines()
    return bool(out) and all(
        len(f) == 3 and f[0] == 'R100' and f[1].startswith(f'{FORMER_PATCHES}/')
        and f[2] == f'{PATCHES}/{f[1][len(FORMER_PATCHES) + 1:]}'
        for f in (line.split('\t') for line in out))


def t_rev(clone):
    n = version_sh(clone, 'rev').stdout.strip()
    paths = [FORMER_PATCHES, PATCHES, 'packaging/x86only.patch']
    listed = git(clone, 'rev-list', 'HEAD', '--', *paths).split()
    # Only a commit that touched both places can be a move.
    both = set(git(clone, 'rev-list', 'HEAD', '--', FORMER_PATCHES).split()) & \
        set(git(clone, 'rev-list', 'HEAD', '--', PATCHES).split())
    moves = [c for c in both if moves_only(clone, c)]
    if not moves:
        raise Fail(f'no commit moved {FORMER_PATCHES}/ to {PATCHES}/ in the history')
    want = str(len(listed) - len(moves))
    if n != want:
        raise Fail(f'version.sh rev: {n}, want {want} (git rev-list --count of {" ".join(paths)}: '
                   f'{len(listed)}, less {len(moves)} commit(s) that only moved the series)')
    deb = version_sh(clone, 'deb').stdout.strip()
    if deb != f'{pinned()}+iobatch{n}':
        raise Fail(f'version.sh deb: {deb}, want {pinned()}+iobatch{n}')
    if not deb_gt(deb, f'{pinned()}+b9') or not deb_gt(deb, f'{pinned()}+iobatch1'):
        raise Fail(f'{deb} does not sort above Debian\'s binNMU +b9 and the first package +iobatch1')
    return (f'N={n} (commits that changed {PATCHES}/, {FORMER_PATCHES}/ before, or '
            f'packaging/x86only.patch; {len(moves)} move(s) {moves[0][:7]} not counted), version {deb}')


def commit(clone, path, text, msg):
    with open(os.path.join(clone, path), 'a', encoding='utf-8') as f:
        f.write(text)
    git(clone, '-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '-qam', msg)


def t_rev_grows(clone):
    n0 = int(version_sh(clone, 'rev').stdout)
    s0 = version_sh(clone, 'series').stdout.strip()
    v0 = version_sh(clone, 'deb').stdout.strip()
    commit(clone, 'README.md', '\nnot the series\n', 'docs only')
    if int(version_sh(clone, 'rev').stdout) != n0:
        raise Fail('a commit that changed only README.md changed N')
    commit(clone, f'{PATCHES}/series', '# a changed series\n', 'series')
    n1 = int(version_sh(clone, 'rev').stdout)
    v1 = version_sh(clone, 'deb').stdout.strip()
    s1 = version_sh(clone, 'series').stdout.strip()
    if n1 != n0 + 1:
        raise Fail(f'after a commit to {PATCHES}/series N is {n1}, want {n0 + 1}')
    if not deb_gt(v1, v0):
        raise Fail(f'{v1} does not sort above {v0}: apt would not upgrade')
    if s1 == s0:
        raise Fail(f'the series id did not change with {PATCHES}/series: {s1}')
    return (f'README.md commit: N stays {n0}; {PATCHES}/ commit: N {n1}, {v1} > {v0}; '
            f'series id {s1[-12:]}')


def t_rev_uncommitted(clone):
    with open(os.path.join(clone, PATCHES, 'series'), 'a', encoding='utf-8') as f:
        f.write('# uncommitted\n')
    try:
        r = version_sh(clone, 'rev', check=False)
        if r.returncode == 0 or 'uncommitted' not in r.stderr or 'commit' not in r.stderr:
            raise Fail(f'with {PATCHES}/series changed, version.sh rev exited {r.returncode}: '
                       f'{(r.stdout + r.stderr).strip()!r}')
        o = version_sh(clone, 'rev', env={'IOBATCH_REV': '9'}).stdout.strip()
        if o != '9':
            raise Fail(f'IOBATCH_REV=9: {o!r}')
        bad = version_sh(clone, 'rev', env={'IOBATCH_REV': '0'}, check=False)
        if bad.returncode == 0:
            raise Fail('IOBATCH_REV=0 accepted')
    finally:
        git(clone, 'checkout', '-q', '--', f'{PATCHES}/series')
    return f'refused: {r.stderr.strip()[:90]}...; IOBATCH_REV=9 gives 9, 0 refused'


def t_rev_shallow(tmp):
    d = os.path.join(tmp, 'shallow')
    run(['git', 'clone', '-q', '--depth', '1', f'file://{TOP}', d])
    r = version_sh(d, 'rev', check=False)
    if r.returncode == 0 or 'shallow' not in r.stderr or '--unshallow' not in r.stderr:
        raise Fail(f'in a shallow clone version.sh rev exited {r.returncode}: '
                   f'{(r.stdout + r.stderr).strip()!r}')
    s = run([f'{d}/scripts/deb-src.sh', '--check'], check=False)
    if s.returncode == 0 or 'shallow' not in s.stderr:
        raise Fail(f'in a shallow clone deb-src.sh exited {s.returncode}: {s.stderr.strip()!r}')
    return r.stderr.strip()[:110] + '...'


def t_rev_tarball(tmp):
    d = os.path.join(tmp, 'tarball')
    os.makedirs(d)
    arch = subprocess.run(['git', '-C', TOP, 'archive', 'HEAD'], capture_output=True, check=True)
    subprocess.run(['tar', '-x', '-C', d], input=arch.stdout, check=True)
    r = version_sh(d, 'rev', check=False)
    if r.returncode == 0 or 'not a git clone' not in r.stderr or 'IOBATCH_REV' not in r.stderr:
        raise Fail(f'in a tarball version.sh rev exited {r.returncode}: '
                   f'{(r.stdout + r.stderr).strip()!r}')
    o = version_sh(d, 'deb', env={'IOBATCH_REV': '3'}).stdout.strip()
    if o != f'{pinned()}+iobatch3':
        raise Fail(f'IOBATCH_REV=3 in a tarball: {o!r}')
    return f'{r.stderr.strip()[:90]}...; with IOBATCH_REV=3: {o}'


def t_build_version(build):
    out = run([os.path.join(build, 'qemu-system-x86_64'), '--version']).stdout.splitlines()[0]
    name = os.path.basename(os.path.normpath(build))
    if name == 'fork':
        want = f'({version_sh(TOP, "series").stdout.strip()} on Debian {pinned()})'
    elif name == 'base':
        want = f'(Debian {pinned()}, unpatched)'
    elif name == 'upstream':
        want = f'(Debian {pinned("lines/trixie")}, unpatched)'
    elif name == 'tree':
        want = f'(qemu-iobatch development tree on Debian {pinned()})'
    else:
        raise Fail(f'no package version is set for a build named {name}')
    if not out.endswith(want):
        raise Fail(f'{build}/qemu-system-x86_64 --version: {out!r}, want it to end in {want!r}')
    return out


# -- package metadata (scripts/deb-src.sh) ------------------------------------

CL_HEADER = re.compile(r'^(\S+) \(([^() ]+)\) ', re.M)


def cl_entries(text):
    """[(version, entry text without trailing blank lines)] of a changelog."""
    starts = [m.start() for m in CL_HEADER.finditer(text)] + [len(text)]
    return [(CL_HEADER.match(text, a).group(2), text[a:b].rstrip('\n'))
            for a, b in zip(starts, starts[1:])]


def control_field(text, field):
    m = re.search(rf'^{re.escape(field)}: (.*)$', text, re.M)
    return m and m.group(1)


def t_deb_src_metadata(tmp, line, sources):
    """deb-src.sh of LINE at N+1 (a build between releases), into a
    temporary DEB_WORK and DEB_OUT: Maintainer, Original-Maintainer,
    changelog.  Puts the unpacked source into sources[line]."""
    lenv = {'LINE': line}
    n = int(version_sh(TOP, 'rev', env=lenv).stdout)
    env = dict(os.environ, DEB_WORK=f'{tmp}/debwork-{line}', DEB_OUT=f'{tmp}/debout-{line}',
               IOBATCH_REV=str(n + 1), LINE=line)
    src = run([os.path.join(TOP, 'scripts', 'deb-src.sh')], env=env).stdout.strip().splitlines()[-1]
    sources[line] = src
    debver = version_sh(TOP, 'deb', env={'IOBATCH_REV': str(n + 1), **lenv}).stdout.strip()
    with open(os.path.join(TOP, 'packaging/maintainer'), encoding='utf-8') as f:
        maint = f.read().strip()
    with open(os.path.join(TOP, f'lines/{line}/base.pin'), encoding='utf-8') as f:
        pin = dict(re.findall(r'^(\w+)=(\S+)$', f.read(), re.M))
    dl = os.path.join(TOP, '.cache', 'download')
    with open(f'{dl}/{pin["DSC"]}', encoding='utf-8') as f:
        debian_maint = control_field(f.read(), 'Maintainer')
    if not debian_maint or 'qemu-iobatch' in debian_maint:
        raise Fail(f'the pinned {pin["DSC"]} has Maintainer {debian_maint!r}')
    with open(f'{tmp}/debout-{line}/qemu_{debver.split(":", 1)[1]}.dsc', encoding='utf-8') as f:
        dsc = f.read()
    with open(f'{src}/debian/control', encoding='utf-8') as f:
        control = f.read()
    with open(f'{src}/debian/control-in', encoding='utf-8') as f:
        control_in = f.read()
    got = {'.dsc Maintainer': control_field(dsc, 'Maintainer'),
           '.dsc Original-Maintainer': control_field(dsc, 'Original-Maintainer'),
           'control Maintainer': control_field(control, 'Maintainer'),
           'control XSBC-Original-Maintainer': control_field(control, 'XSBC-Original-Maintainer')}
    want = {'.dsc Maintainer': maint, '.dsc Original-Maintainer': debian_maint,
            'control Maintainer': maint, 'control XSBC-Original-Maintainer': debian_maint}
    if got != want:
        raise Fail(f'maintainers {got}, want {want}')
    # debian/rules remakes debian/control from control-in (VENDOR debian):
    # it must come out the same.  Trixie's packaging has the rule in
    # debian/control.mk: run it on a copy.
    if os.path.exists(f'{src}/debian/control.mk'):
        copy = f'{tmp}/remade-{line}'
        os.makedirs(f'{copy}/debian')
        for f in ('control-in', 'control.mk', 'changelog'):
            shutil.copy(f'{src}/debian/{f}', f'{copy}/debian/{f}')
        run(['make', '-s', '-C', copy, '-f', 'debian/control.mk', 'debian/control'])
        with open(f'{copy}/debian/control', encoding='utf-8') as f:
            remade = f.read()
    else:
        remade = '# autogenerated file, please edit debian/control-in\n' + ''.join(
            l[len(':debian:'):] if l.startswith(':debian:') else l
            for l in control_in.splitlines(keepends=True)
            if not re.match(r'^:(?!debian:)[a-z]*:', l))
    if remade != control:
        raise Fail('debian/control made again from debian/control-in differs from debian/control')
    # The changelog: a generated entry, then ours and Debian's whole history.
    with open(f'{src}/debian/changelog', encoding='utf-8') as f:
        changelog = cl_entries(f.read())
    changelog_path = line_var(line, '$LINE_CHANGELOG')
    with open(changelog_path, encoding='utf-8') as f:
        ours = cl_entries(f.read())
    debian = cl_entries(run(['tar', '-xOJf', f'{dl}/{pin["DEBIAN"]}', 'debian/changelog']).stdout)
    top = changelog[0]
    if top[0] != debver or 'between releases' not in top[1] or \
            f') {line}; ' not in top[1].splitlines()[0] or \
            version_sh(TOP, 'series', env=lenv).stdout.strip() not in top[1] or \
            f' -- {maint}  ' not in top[1]:
        raise Fail(f'the first entry is not one generated for {debver} by {maint}: {top[1][:300]!r}')
    if changelog[1:] != ours + debian:
        vs = [v for v, _ in changelog[:6]]
        raise Fail(f'after the generated entry, want {os.path.relpath(changelog_path, TOP)}\'s {len(ours)} and '
                   f'Debian\'s {len(debian)} entries unchanged; got {len(changelog) - 1}, '
                   f'starting {vs}')
    parsed = run(['dpkg-parsechangelog', '-l', f'{src}/debian/changelog', '-S', 'Version']).stdout.strip()
    if parsed != debver:
        raise Fail(f'dpkg-parsechangelog: {parsed}, want {debver}')
    releases = f' ({ours[0][0]})' if ours else ''
    return (f'.dsc Maintainer: {maint}, Original-Maintainer: {debian_maint}; control-in remakes '
            f'control; changelog: a generated {debver}, then {len(ours)} release(s) of '
            f'{os.path.relpath(changelog_path, TOP)}{releases}, then Debian\'s {len(debian)} '
            'entries unchanged')


# The binary packages of debian/control that an arch-only build for amd64
# makes with the build profiles PROFILES (a space-separated list), as
# dh_listpackages finds them: dpkg's own parsers of Architecture and
# Build-Profiles.
LIST_PACKAGES = r'''
use strict;
use Dpkg::Control::Info;
use Dpkg::BuildProfiles qw(parse_build_profiles evaluate_restriction_formula);
use Dpkg::Arch qw(debarch_is);
my @profiles = split ' ', $ENV{PROFILES};
for my $p (Dpkg::Control::Info->new($ARGV[0])->get_packages()) {
    next unless grep { $_ ne 'all' && debarch_is('amd64', $_) } split ' ', $p->{Architecture};
    my $bp = $p->{'Build-Profiles'};
    next if $bp && !evaluate_restriction_formula([parse_build_profiles($bp)], \@profiles);
    print "$p->{Package}\n";
}
'''


def t_deb_profile_packages(line, sources):
    """The profile pkg.qemu.x86only builds exactly LINE_DEB_PACKAGES."""
    if line not in sources:
        raise Fail(f'no source of the {line} line (deb-src-metadata-{line} failed)')
    control = f'{sources[line]}/debian/control'

    def packages(profiles):
        return run(['perl', '-e', LIST_PACKAGES, control],
                   env=dict(os.environ, PROFILES=profiles)).stdout.split()
    want = line_var(line, '${LINE_DEB_PACKAGES[*]}').split()
    got, everything = packages('pkg.qemu.x86only'), packages('')
    if sorted(got) != sorted(want):
        raise Fail(f'with pkg.qemu.x86only debian/control builds {got}; scripts/line.sh '
                   f'says {want}')
    if len(everything) <= len(got) or not set(got) <= set(everything):
        raise Fail(f'without the profile {everything}, not more than with it ({got})')
    return (f'{len(got)} of the {len(everything)} amd64 packages with pkg.qemu.x86only: '
            f'{" ".join(got)}')


def t_changelog_merge(tmp):
    """scripts/deb-changelog.py on small changelogs."""
    def entry(v):
        return (f'qemu ({v}) bookworm; urgency=medium\n\n  * {v}\n\n'
                f' -- X <x@localhost>  Mon, 01 Jan 2024 00:00:00 +0000\n\n')

    def write(name, versions):
        path = os.path.join(tmp, name)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(''.join(entry(v) for v in versions))
        return path

    b = '1:7.2+dfsg-7+deb12u'
    debian = write('cl-debian', [f'{b}18', f'{b}17', f'{b}16'])
    ours = write('cl-ours', [f'{b}18+iobatch3', f'{b}17+iobatch2'])
    top = write('cl-top', [f'{b}18+iobatch4'])
    script = os.path.join(TOP, 'scripts', 'deb-changelog.py')

    def merge(version, ours_path, *extra, ok=True):
        r = run([sys.executable, script, version, ours_path, debian, *extra], check=ok)
        return [v for v, _ in cl_entries(r.stdout)] if ok else r
    got = merge(f'{b}18+iobatch3', ours)
    want = [f'{b}18+iobatch3', f'{b}18', f'{b}17+iobatch2', f'{b}17', f'{b}16']
    if got != want:
        raise Fail(f'a release: {got}, want {want}')
    got = merge(f'{b}18+iobatch4', ours, top)
    if got != [f'{b}18+iobatch4'] + want:
        raise Fail(f'a build between releases: {got}')
    bad = {'a release above the build': (f'{b}18+iobatch2', ours, 'above the version being built'),
           'a version Debian has': (f'{b}18', write('cl-dup', [f'{b}18']), 'in Debian'),
           'out of order': (f'{b}18+iobatch3', write('cl-order', [f'{b}17+iobatch2',
                                                                   f'{b}18+iobatch3']),
                            'newest first'),
           'no entry for the build': (f'{b}18+iobatch4', ours, 'no entry for')}
    for what, (v, o, msg) in bad.items():
        r = merge(v, o, ok=False)
        if r.returncode == 0 or msg not in r.stderr:
            raise Fail(f'{what}: exit {r.returncode}, {r.stderr.strip()!r}')
    return ('a release on an older base goes below Debian\'s later entry, a generated entry '
            'on top; refused: ' + ', '.join(bad))


# -- make install / make uninstall ----------------------------------------------

INSTALL_PREFIX = '/opt/qemu-iobatch'
FAKE_BINS = ['qemu-system-x86_64', 'qemu-img', 'qemu-io', 'qemu-nbd',
             'storage-daemon/qemu-storage-daemon']


def fake_build(d):
    """A stand-in for build/fork, with what scripts/install.sh copies: the
    five programs, and a data directory with a subdirectory, a firmware file
    linked from elsewhere (as the build links Debian's) and trace-events-all
    (not installed).  Returns the files install must put under the prefix."""
    data = os.path.join(d, 'qemu-bundle/usr/local/share/qemu')
    os.makedirs(os.path.join(d, 'storage-daemon'))
    os.makedirs(os.path.join(data, 'keymaps'))
    for b in FAKE_BINS:
        with open(os.path.join(d, b), 'w', encoding='utf-8') as f:
            f.write(f'#!/bin/sh\necho {os.path.basename(b)} stand-in\n')
        os.chmod(os.path.join(d, b), 0o755)
    firmware = os.path.join(d, 'debian-bios.bin')
    for path, text in ((firmware, 'bios'), (f'{data}/keymaps/en-us', 'keymap'),
                       (f'{data}/trace-events-all', 'trace')):
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
    os.symlink(firmware, f'{data}/bios-256k.bin')
    return sorted([f'bin/{os.path.basename(b)}' for b in FAKE_BINS] +
                  ['share/qemu/bios-256k.bin', 'share/qemu/keymaps/en-us',
                   'share/qemu-iobatch/manifest'])


def tree(d):
    """Every file and directory under d, relative to it."""
    out = []
    for dp, dns, fns in os.walk(d):
        out += [os.path.relpath(os.path.join(dp, n), d) for n in dns + fns]
    return sorted(out)


def install_sh(*args, destdir, check=True):
    return run([os.path.join(TOP, 'scripts', 'install.sh'), *args],
               env=dict(os.environ, DESTDIR=destdir), check=check)


def make(*args, check=True):
    return run(['make', '-s', '--no-print-directory', '-C', TOP, *args], check=check)


def t_install_uninstall(tmp):
    """make install's default prefix is its own; install.sh into a DESTDIR
    from a stand-in build, twice, then make uninstall: nothing is left."""
    dry = make('-n', '-o', 'fork', 'install').stdout
    if f"'{INSTALL_PREFIX}'" not in dry or '/usr/local' in dry:
        raise Fail(f'make -n install does not install into {INSTALL_PREFIX}: {dry.strip()!r}')
    build, dest = os.path.join(tmp, 'ibuild'), os.path.join(tmp, 'idest')
    want = fake_build(build)
    out = install_sh(build, INSTALL_PREFIX, destdir=dest).stdout
    root = dest + INSTALL_PREFIX
    got = sorted(p for p in tree(root) if os.path.isfile(os.path.join(root, p)))
    if got != want:
        raise Fail(f'install put {got} under the prefix, want {want}')
    if os.path.islink(f'{root}/share/qemu/bios-256k.bin') or \
            open(f'{root}/share/qemu/bios-256k.bin', encoding='utf-8').read() != 'bios':
        raise Fail('the linked firmware was not copied as a file')
    if not os.access(f'{root}/bin/qemu-storage-daemon', os.X_OK):
        raise Fail('bin/qemu-storage-daemon is not executable')
    with open(f'{root}/share/qemu-iobatch/manifest', encoding='utf-8') as f:
        manifest = f.read()
    for p in (p for p in want if not p.endswith('/manifest')):
        if f'file {INSTALL_PREFIX}/{p}\n' not in manifest:
            raise Fail(f'the manifest does not list {p}: {manifest!r}')
    if 'dir /opt\n' not in manifest or f'dir {INSTALL_PREFIX}\n' not in manifest:
        raise Fail(f'the manifest does not list the directories install made: {manifest!r}')
    again = install_sh(build, INSTALL_PREFIX, destdir=dest).stdout
    if sorted(p for p in tree(root) if os.path.isfile(os.path.join(root, p))) != want:
        raise Fail(f'a second install left {tree(root)}')
    un = make('uninstall', f'DESTDIR={dest}').stdout
    left = tree(dest) if os.path.exists(dest) else []
    if left:
        raise Fail(f'make uninstall left {left} in DESTDIR')
    if not again.startswith('install: installed'):
        raise Fail(f'a second install said {again.strip()!r}')
    return (f'make -n install: {dry.strip()}; {len(want)} files (manifest included) and '
            f'{manifest.count("dir ")} directories into DESTDIR{INSTALL_PREFIX}, again over '
            f'them; then {un.strip().splitlines()[0][len("uninstall: "):]}: DESTDIR empty')


def bin_without(tmp, tool):
    """A directory to be PATH: every command of the usual ones but tool."""
    bindir = os.path.join(tmp, f'bin-without-{tool}')
    os.makedirs(bindir)
    for d in ('/usr/local/bin', '/usr/bin', '/usr/sbin', '/bin', '/sbin'):
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if f != tool and not os.path.exists(f'{bindir}/{f}'):
                os.symlink(os.path.join(d, f), f'{bindir}/{f}')
    return bindir


def t_deb_root_refuses(tmp):
    """make deb's clean-root build stops with what to do, before it makes a
    root: an unknown DEB_BUILDER, no mmdebstrap, a .dsc whose files are
    not beside it."""
    out, work = os.path.join(tmp, 'rootdeb'), os.path.join(tmp, 'rootdeb-work')
    os.makedirs(out)
    env = dict(os.environ, DEB_OUT=out, DEB_WORK=work, DEB_BUILDER='chroot')
    r = run([os.path.join(TOP, 'scripts', 'deb.sh')], env=env, check=False)
    if r.returncode == 0 or 'DEB_BUILDER=chroot' not in r.stderr or 'root' not in r.stderr \
            or os.path.exists(work):
        raise Fail(f'deb.sh DEB_BUILDER=chroot: exit {r.returncode}, {r.stderr.strip()!r}, '
                   f'{work} made: {os.path.exists(work)}')
    said = [r.stderr.strip()]
    dsc = os.path.join(out, 'q_1.0-1.dsc')
    with open(dsc, 'w', encoding='utf-8') as f:
        f.write('Format: 3.0 (quilt)\nSource: q\nFiles:\n'
                ' 0123456789abcdef0123456789abcdef 10 q_1.0.orig.tar.xz\n')
    deb_root = os.path.join(TOP, 'scripts', 'deb-root.sh')
    r = run([deb_root, dsc, out], check=False)
    if r.returncode == 0 or 'q_1.0.orig.tar.xz is not beside it' not in r.stderr or \
            os.listdir(out) != ['q_1.0-1.dsc']:
        raise Fail(f'deb-root.sh, a file of the .dsc missing: exit {r.returncode}, '
                   f'{r.stderr.strip()!r}, {out}: {os.listdir(out)}')
    said.append(r.stderr.strip())
    with open(os.path.join(out, 'q_1.0.orig.tar.xz'), 'wb'):
        pass
    r = run([deb_root, dsc, out], env=dict(os.environ, PATH=bin_without(tmp, 'mmdebstrap')),
            check=False)
    if r.returncode == 0 or 'mmdebstrap not found' not in r.stderr or \
            'make deps-deb' not in r.stderr or sorted(os.listdir(out)) != \
            ['q_1.0-1.dsc', 'q_1.0.orig.tar.xz']:
        raise Fail(f'deb-root.sh without mmdebstrap: exit {r.returncode}, {r.stderr.strip()!r}')
    said.append(r.stderr.strip())
    return '; '.join(said)


def t_install_refuses(tmp):
    """uninstall without a manifest removes nothing and says why; install
    overwrites no file it did not install; uninstall keeps a directory that
    holds someone else's file."""
    build, dest = os.path.join(tmp, 'rbuild'), os.path.join(tmp, 'rdest')
    fake_build(build)
    os.makedirs(dest)
    r = install_sh('--uninstall', INSTALL_PREFIX, destdir=dest, check=False)
    if r.returncode == 0 or 'no ' not in r.stderr or 'manifest' not in r.stderr:
        raise Fail(f'uninstall without a manifest: exit {r.returncode}, {r.stderr.strip()!r}')
    why = r.stderr.strip()
    # Someone else's qemu-img in PREFIX/bin (as Debian's in /usr/bin).
    theirs = f'{dest}/usr/bin/qemu-img'
    os.makedirs(os.path.dirname(theirs))
    with open(theirs, 'w', encoding='utf-8') as f:
        f.write('Debian\'s')
    r = install_sh(build, '/usr', destdir=dest, check=False)
    if r.returncode == 0 or 'not overwriting' not in r.stderr:
        raise Fail(f'install over a file it did not install: exit {r.returncode}, '
                   f'{r.stderr.strip()!r}')
    if open(theirs, encoding='utf-8').read() != 'Debian\'s' or tree(dest) != \
            ['usr', 'usr/bin', 'usr/bin/qemu-img']:
        raise Fail(f'a refused install changed DESTDIR: {tree(dest)}')
    # A file of the user's in a directory install made stays, and so does
    # the directory.
    install_sh(build, INSTALL_PREFIX, destdir=dest)
    mine = f'{dest}{INSTALL_PREFIX}/share/qemu/my-vars.fd'
    with open(mine, 'w', encoding='utf-8') as f:
        f.write('mine')
    out = install_sh('--uninstall', INSTALL_PREFIX, destdir=dest).stdout
    rest = tree(f'{dest}/opt')
    if rest != ['qemu-iobatch', 'qemu-iobatch/share', 'qemu-iobatch/share/qemu',
                'qemu-iobatch/share/qemu/my-vars.fd'] or 'kept' not in out:
        raise Fail(f'uninstall with a file of the user\'s in the prefix left {rest}: {out!r}')
    return f'{why}; install into /usr refused over a qemu-img it did not install; ' \
           'uninstall keeps a file of the user\'s and its directories'


# -- the repository and the check ----------------------------------------------

class Host:
    """A stand-in host: apt with a private configuration under DIR/etc/apt
    and a private dpkg status file; qemu-iobatch-apt is unpacked under DIR."""

    def __init__(self, d):
        self.d = d
        for sub in ('etc/apt/sources.list.d', 'etc/apt/preferences.d', 'etc/apt/apt.conf.d',
                    'etc/update-motd.d', 'state/lists/partial', 'cache/archives/partial',
                    'log', 'archive'):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        self.conf = os.path.join(d, 'apt.conf')
        conf = (f'Dir::Etc "{d}/etc/apt";\nDir::State "{d}/state";\n'
                f'Dir::State::status "{d}/status";\nDir::Cache "{d}/cache";\n'
                f'Dir::Log "{d}/log";\nDebug::NoLocking "true";\n')
        if os.geteuid() == 0:
            conf += 'APT::Sandbox::User "root";\n'
        with open(self.conf, 'w', encoding='utf-8') as f:
            f.write(conf)
        self.state = os.path.join(d, 'var/lib/qemu-iobatch')
        # The check (also as apt's hook runs it) and the login message keep
        # their state here, not in /var/lib/qemu-iobatch.
        self.env = dict(os.environ, APT_CONFIG=self.conf, LC_ALL='C',
                        QEMU_IOBATCH_STATE=self.state)
        self.check = os.path.join(d, 'usr/sbin/qemu-iobatch-check')
        with open(os.path.join(d, 'etc/apt/sources.list.d/debian.sources'), 'w',
                  encoding='utf-8') as f:
            f.write(f'Types: deb\nURIs: file:{d}/archive\nSuites: ./\nTrusted: yes\n')
        self.installed({})
        self.archive([])

    def installed(self, pkgs):
        """The dpkg status file: {package: version} installed."""
        with open(os.path.join(self.d, 'status'), 'w', encoding='utf-8') as f:
            for p, v in pkgs.items():
                f.write(f'Package: {p}\nStatus: install ok installed\nPriority: optional\n'
                        f'Architecture: amd64\nVersion: {v}\nMaintainer: t <t@localhost>\n'
                        'Description: stand-in\n\n')

    def archive(self, versions, prefs=''):
        """Debian's archive, a stand-in: the five packages at these versions;
        prefs: an extra preferences file (e.g. a backports priority)."""
        with open(os.path.join(self.d, 'archive', 'Packages'), 'w', encoding='utf-8') as f:
            for v in versions:
                for p in PACKAGES:
                    f.write(f'Package: {p}\nVersion: {v}\nArchitecture: amd64\n'
                            f'Maintainer: t <t@localhost>\nFilename: ./{p}_{v}.deb\n'
                            'Size: 1000\nDescription: Debian\'s, a stand-in\n\n')
        pf = os.path.join(self.d, 'etc/apt/preferences.d/backports.pref')
        if prefs:
            with open(pf, 'w', encoding='utf-8') as f:
                f.write(prefs)
        elif os.path.exists(pf):
            os.remove(pf)

    def apt(self, *args, check=True):
        return run(['apt-get', '-q', *args], env=self.env, check=check)

    def unpack_apt_pkg(self, deb):
        """qemu-iobatch-apt's files under DIR, as dpkg would install them
        under /; the two absolute paths in them (the key of Signed-By, the
        check in the hook) point under DIR."""
        run(['dpkg-deb', '-x', deb, self.d])
        for f, old in (('etc/apt/sources.list.d/qemu-iobatch.sources',
                        'Signed-By: /usr/share/keyrings/'),
                       ('etc/apt/apt.conf.d/80qemu-iobatch', '/usr/sbin/qemu-iobatch-check')):
            path = os.path.join(self.d, f)
            with open(path, encoding='utf-8') as fh:
                text = fh.read()
            if old not in text:
                raise Fail(f'{f} of qemu-iobatch-apt lacks {old!r}: {text!r}')
            new = old.replace('/usr/', f'{self.d}/usr/')
            with open(path, 'w', encoding='utf-8') as fh:
                fh.write(text.replace(old, new))

    def fresh_lists(self):
        """Forget what apt-get update fetched, so that the next one decides
        alone what apt knows."""
        lists = os.path.join(self.d, 'state/lists')
        for f in os.listdir(lists):
            if os.path.isfile(os.path.join(lists, f)) and f != 'lock':
                os.remove(os.path.join(lists, f))

    def fork_known(self):
        """The +iobatch versions of qemu-system-x86 that apt knows."""
        return re.findall(r'^ (?:\*\*\*|   ) (\S+\+iobatch\d+) ', self.policy(), re.M)

    def update(self):
        return self.apt('update')

    def policy(self):
        return run(['apt-cache', 'policy', 'qemu-system-x86'], env=self.env).stdout

    def simulate(self, *args):
        """{package: version} that apt-get -s ARGS would install."""
        out = self.apt('-s', *args).stdout
        got = {}
        for line in out.splitlines():
            m = re.match(r'^Inst (\S+) (?:\[\S+\] )?\((\S+) ', line)
            if m and m.group(1) in PACKAGES:
                got[m.group(1)] = m.group(2)
        return got

    def run_check(self):
        env = dict(self.env, QEMU_IOBATCH_STATE=self.state)
        return run([self.check], env=env, check=False)

    def held_back(self):
        f = os.path.join(self.state, 'held-back')
        return open(f, encoding='utf-8').read() if os.path.exists(f) else None


def stand_in_debs(d, version, packages=None):
    """The five packages (or PACKAGES) at version, empty, as 'make deb'
    leaves them."""
    os.makedirs(d)
    for p in packages or PACKAGES:
        pd = os.path.join(d, 'pkg', p)
        os.makedirs(f'{pd}/DEBIAN')
        with open(f'{pd}/DEBIAN/control', 'w', encoding='utf-8') as f:
            f.write(f'Package: {p}\nVersion: {version}\nArchitecture: amd64\n'
                    'Maintainer: t <t@localhost>\nDescription: stand-in for the fork\n')
        run(['dpkg-deb', '--root-owner-group', '-Zgzip', '--build', pd,
             f'{d}/{p}_{version}_amd64.deb'])
    shutil.rmtree(os.path.join(d, 'pkg'))
    with open(f'{d}/build-time.txt', 'w', encoding='utf-8') as f:
        f.write('0 s (stand-in)\n')


def repo_sh(*args):
    return run([os.path.join(TOP, 'scripts', 'repo.sh'), *args])


def new_gpg_key(home, uid):
    """A signing key in a gpg home of its own; returns its fingerprint."""
    os.makedirs(home, mode=0o700)
    run(['gpg', '--homedir', home, '--batch', '--quiet', '--passphrase', '',
         '--pinentry-mode', 'loopback', '--quick-generate-key', uid, 'ed25519', 'sign', 'never'])
    out = run(['gpg', '--homedir', home, '--batch', '--with-colons',
               '--list-secret-keys']).stdout
    return re.search(r'^fpr:+([0-9A-F]{40}):', out, re.M).group(1)


def stop_agent(home):
    subprocess.run(['gpgconf', '--homedir', home, '--kill', 'gpg-agent'],
                   capture_output=True, check=False)


def key_fingerprints(keyring):
    """The fingerprints of the public keys in a keyring file (gpg
    --show-keys: no keyring is imported anywhere)."""
    out = run(['gpg', '--batch', '--with-colons', '--show-keys', keyring],
              env=dict(os.environ, GNUPGHOME=os.path.dirname(keyring))).stdout
    kinds = {l.split(':')[0] for l in out.splitlines()}
    if 'sec' in kinds or 'ssb' in kinds:
        raise Fail(f'{keyring} holds a secret key')
    return re.findall(r'^fpr:+([0-9A-F]{40}):', out, re.M)


def all_at(got, version):
    return sorted(got) == sorted(PACKAGES) and set(got.values()) == {version}


class RepoTests:
    def __init__(self, tmp):
        self.tmp = tmp
        self.repo = os.path.join(tmp, 'srv', 'repo')
        self.keydir = os.path.join(tmp, 'srv', 'signing')
        self.base = pinned()
        n = int(version_sh(TOP, 'rev').stdout)
        self.v1 = f'{self.base}+iobatch{n}'
        self.v2 = version_sh(TOP, 'deb', env={'IOBATCH_REV': str(n + 1)}).stdout.strip()
        m = re.match(r'(.*\+deb12u)(\d+)$', self.base)
        if not m:
            raise Fail(f'cannot derive the next Debian version from {self.base}')
        self.debian_binnmu = f'{self.base}+b3'
        self.debian_next = f'{m.group(1)}{int(m.group(2)) + 1}'
        stand_in_debs(os.path.join(tmp, 'deb1'), self.v1)
        stand_in_debs(os.path.join(tmp, 'deb2'), self.v2)
        self.host = Host(os.path.join(tmp, 'host'))
        self.apt_version = version_sh(TOP, 'apt').stdout.strip()
        self.apt_deb = f'{self.repo}/qemu-iobatch-apt_{self.apt_version}_all.deb'

    def repo_sh(self, deb_dir):
        return repo_sh('--from', f'{self.tmp}/{deb_dir}', '--repo', self.repo,
                       '--key-dir', self.keydir, '--uri', f'file:{self.repo}', '--no-setup')

    def install(self):
        """make repo's repository, qemu-iobatch-apt from it on the host:
        apt-get update takes the signed repository without a warning, and
        apt installs the fork from it over a higher Debian version."""
        out = self.repo_sh('deb1').stdout
        if self.v1 not in out:
            raise Fail(f'repo.sh does not list {self.v1}: {out.strip()}')
        if not os.path.isfile(self.apt_deb):
            raise Fail(f'repo.sh put no {os.path.basename(self.apt_deb)} into the repository: '
                       f'{os.listdir(self.repo)}')
        h = self.host
        h.unpack_apt_pkg(self.apt_deb)
        with open(f'{h.d}/etc/apt/sources.list.d/qemu-iobatch.sources', encoding='utf-8') as f:
            sources = f.read()
        for want in (f'URIs: file:{self.repo}', 'Types: deb', 'Suites: ./',
                     f'Signed-By: {h.d}/usr/share/keyrings/qemu-iobatch-archive-keyring.gpg'):
            if want not in sources:
                raise Fail(f'qemu-iobatch.sources lacks {want!r}: {sources!r}')
        if re.search(r'(?i)trusted', sources):
            raise Fail(f'qemu-iobatch.sources trusts the repository without a signature: {sources!r}')
        h.archive([self.debian_binnmu, self.debian_next])
        upd = h.update()
        noise = [l for l in (upd.stdout + upd.stderr).splitlines() if re.match(r'^[WE]: ', l)]
        if noise:
            raise Fail(f'apt-get update with the signed repository warned: {noise}')
        if self.v1 not in h.fork_known():
            raise Fail(f'after apt-get update apt does not know {self.v1}: {h.policy()!r}')
        got = h.simulate('install', *PACKAGES)
        if not all_at(got, self.v1):
            raise Fail(f'apt-get install from the repository would install {got}, want {self.v1}')
        pref = f'{h.d}/etc/apt/preferences.d/qemu-iobatch.pref'
        saved = pref + '.off'
        os.rename(pref, saved)
        try:
            without = h.simulate('install', *PACKAGES)
        finally:
            os.rename(saved, pref)
        if not all_at(without, self.debian_next):
            raise Fail(f'without qemu-iobatch.pref apt would install {without}, want '
                       f'{self.debian_next}: the check proves nothing')
        return (f'{out.strip().splitlines()[0]}; apt-get update took it by Signed-By without a '
                f'warning; apt-get install takes {self.v1} over Debian\'s '
                f'{self.debian_next} (without the pin: {self.debian_next})')

    def signed(self):
        """InRelease and Release.gpg verify with the key qemu-iobatch-apt
        ships; the key was made once in the key directory (mode 700, outside
        the repository) and a second repo.sh keeps it; nothing secret is in
        the repository."""
        keyring = f'{self.host.d}/usr/share/keyrings/qemu-iobatch-archive-keyring.gpg'
        with open(f'{self.keydir}/fingerprint', encoding='utf-8') as f:
            fpr = f.read().strip()
        if key_fingerprints(keyring) != [fpr]:
            raise Fail(f'qemu-iobatch-apt ships keys {key_fingerprints(keyring)}, '
                       f'want the signing key {fpr} alone')
        for args in (['InRelease'], ['Release.gpg', 'Release']):
            r = run(['gpgv', '--status-fd', '1', '--keyring', keyring,
                     *[f'{self.repo}/{a}' for a in args]], check=False)
            if r.returncode != 0 or f'VALIDSIG {fpr}' not in r.stdout:
                raise Fail(f'gpgv {" ".join(args)}: exit {r.returncode}: '
                           f'{(r.stdout + r.stderr).strip()[-200:]!r}')
        with open(f'{self.repo}/InRelease', encoding='utf-8') as f:
            inrel = f.read()
        with open(f'{self.repo}/Release', encoding='utf-8') as f:
            if f.read() not in inrel:
                raise Fail('InRelease does not carry the Release file as it is')
        mode = os.stat(self.keydir).st_mode & 0o777
        if mode != 0o700:
            raise Fail(f'the key directory {self.keydir} has mode {mode:o}, want 700')
        if os.path.commonpath([self.keydir, self.repo]) == self.repo:
            raise Fail(f'the key directory {self.keydir} is inside the repository')
        for f in os.listdir(self.repo):
            path = f'{self.repo}/{f}'
            if os.path.isdir(path):
                raise Fail(f'a directory in the repository: {f}')
            with open(path, 'rb') as fh:
                data = fh.read()
            if b'PRIVATE KEY' in data or f.endswith(('.key', '.kbx')) or f == 'fingerprint':
                raise Fail(f'the repository has key material: {f}')
        if key_fingerprints(f'{self.repo}/qemu-iobatch-archive-keyring.gpg') != [fpr]:
            raise Fail('the repository\'s qemu-iobatch-archive-keyring.gpg is not the signing key')
        self.repo_sh('deb1')
        with open(f'{self.keydir}/fingerprint', encoding='utf-8') as f:
            again = f.read().strip()
        if again != fpr:
            raise Fail(f'a second repo.sh made a new key {again} (was {fpr})')
        return (f'InRelease and Release.gpg: VALIDSIG {fpr[-16:]} with the shipped key; key dir '
                'mode 700 beside the repository, kept by a second repo.sh; no secret in the repository')

    def rejected(self, what, spoil):
        """apt-get update, with fresh lists, after spoil() changed the
        repository: it must fail and apt must not know the fork.  Then the
        repository is put back and accepted again."""
        h = self.host
        saved = {}
        for f in ('InRelease', 'Release', 'Release.gpg', 'Packages', 'Packages.gz'):
            with open(f'{self.repo}/{f}', 'rb') as fh:
                saved[f] = fh.read()
        try:
            spoil()
            h.fresh_lists()
            r = h.apt('update', check=False)
            known = h.fork_known()
        finally:
            for f, data in saved.items():
                with open(f'{self.repo}/{f}', 'wb') as fh:
                    fh.write(data)
        out = (r.stdout + r.stderr).strip()
        if r.returncode == 0 or known:
            raise Fail(f'apt accepted the repository with {what}: apt-get update exit '
                       f'{r.returncode}, knows {known}: {out[-300:]!r}')
        h.fresh_lists()
        back = h.update()
        if self.v1 not in h.fork_known():
            raise Fail(f'the repository put back is not accepted again: {back.stdout[-200:]!r}')
        err = [l for l in out.splitlines() if l.startswith(('E: ', 'W: '))]
        return f'{what}: apt-get update exit {r.returncode}, no fork version known: ' + \
            ' | '.join(err)[:200]

    def resign(self, release_text=None):
        """Sign Release (or release_text as Release) with a key of another
        gpg home, as someone without the project's key would."""
        home = os.path.join(self.tmp, 'otherkey')
        if not os.path.isdir(home):
            self.other_fpr = new_gpg_key(home, 'not the qemu-iobatch key')
        rel = f'{self.repo}/Release'
        if release_text is not None:
            with open(rel, 'w', encoding='utf-8') as f:
                f.write(release_text)
        try:
            for args, out in ((['--clearsign'], 'InRelease'),
                              (['--detach-sign', '--armor'], 'Release.gpg')):
                run(['gpg', '--homedir', home, '--batch', '--yes', '--pinentry-mode', 'loopback',
                     '--passphrase', '', *args, '-o', f'{self.repo}/{out}', rel])
        finally:
            stop_agent(home)

    def rejects_other_key(self):
        return self.rejected('Release signed with another key', self.resign)

    def rejects_modified_release(self):
        """The signed text changed after signing, as someone who can write
        the directory but has no key would do it: a package added to
        Packages, and the Release in InRelease (and Release) indexed again to
        match, with the old signatures kept."""
        def spoil():
            self.plant_package()
            rel = run(['apt-ftparchive', 'release', '.'], cwd=self.repo).stdout
            with open(f'{self.repo}/Release', 'w', encoding='utf-8') as f:
                f.write(rel)
            path = f'{self.repo}/InRelease'
            with open(path, encoding='utf-8') as f:
                text = f.read()
            m = re.match(r'(-----BEGIN PGP SIGNED MESSAGE-----\n(?:Hash: \S+\n)*\n)(.*?\n)'
                         r'(-----BEGIN PGP SIGNATURE-----\n.*)$', text, re.S)
            if not m:
                raise Fail(f'InRelease is not a clear-signed message: {text[:200]!r}')
            body = re.sub(r'^-', '- -', rel, flags=re.M)
            if body == m.group(2):
                raise Fail('the new Release is the signed one')
            with open(path, 'w', encoding='utf-8') as f:
                f.write(m.group(1) + body + m.group(3))
        return self.rejected('a package added and InRelease/Release indexed again after '
                             'signing', spoil)

    def plant_package(self):
        stanza = (f'\nPackage: qemu-utils\nVersion: {self.base}+iobatch9999\n'
                  'Architecture: amd64\nMaintainer: x <x@localhost>\n'
                  'Filename: ./qemu-utils_x.deb\nSize: 1\nDescription: planted\n')
        for f, opener in (('Packages', open), ('Packages.gz', gzip.open)):
            with opener(f'{self.repo}/{f}', 'at', encoding='utf-8') as fh:
                fh.write(stanza)

    def rejects_modified_packages(self):
        """Packages changed after the Release was signed (a package added,
        as someone with write access to the directory could)."""
        return self.rejected('Packages modified after signing', self.plant_package)

    def apt_package(self):
        """qemu-iobatch-apt: exactly its files, conffiles in /etc, what
        packaging/ has, in the repository's index; apt installs it from
        there and can purge it."""
        want = {
            'etc/apt/apt.conf.d/80qemu-iobatch': ('-rw-r--r--', 'packaging/80qemu-iobatch'),
            'etc/apt/preferences.d/qemu-iobatch.pref': ('-rw-r--r--', 'packaging/qemu-iobatch.pref'),
            'etc/apt/sources.list.d/qemu-iobatch.sources': ('-rw-r--r--', None),
            'etc/update-motd.d/90-qemu-iobatch': ('-rwxr-xr-x', 'packaging/90-qemu-iobatch'),
            'usr/sbin/qemu-iobatch-check': ('-rwxr-xr-x', 'packaging/qemu-iobatch-check'),
            'usr/share/keyrings/qemu-iobatch-archive-keyring.gpg':
                ('-rw-r--r--', f'{self.keydir}/qemu-iobatch-archive-keyring.gpg'),
        }
        listing = run(['dpkg-deb', '-c', self.apt_deb]).stdout
        got = {}
        for line in listing.splitlines():
            f = line.split()
            if not f[0].startswith('d'):
                got[f[-1].lstrip('./')] = f[0]
            if f[1] != 'root/root':
                raise Fail(f'{f[-1]} belongs to {f[1]}, want root/root')
        if got != {p: m for p, (m, _) in want.items()}:
            raise Fail(f'qemu-iobatch-apt holds {got}, want {[(p, m) for p, (m, _) in want.items()]}')
        x = os.path.join(self.tmp, 'apt-pkg-x')
        run(['dpkg-deb', '-R', self.apt_deb, x])
        for path, (_, src) in want.items():
            if src is None:
                continue
            with open(f'{x}/{path}', 'rb') as a, open(os.path.join(TOP, src), 'rb') as b:
                if a.read() != b.read():
                    raise Fail(f'{path} of qemu-iobatch-apt is not {src}')
        with open(f'{x}/DEBIAN/conffiles', encoding='utf-8') as f:
            conffiles = sorted(f.read().split())
        if conffiles != sorted('/' + p for p in want if p.startswith('etc/')):
            raise Fail(f'conffiles: {conffiles}')
        fields = {k: run(['dpkg-deb', '-f', self.apt_deb, k]).stdout.strip()
                  for k in ('Package', 'Version', 'Architecture', 'Maintainer')}
        with open(os.path.join(TOP, 'packaging/maintainer'), encoding='utf-8') as f:
            maint = f.read().strip()
        if fields != {'Package': 'qemu-iobatch-apt', 'Version': self.apt_version,
                      'Architecture': 'all', 'Maintainer': maint}:
            raise Fail(f'control fields: {fields}')
        # postrm purge, under DPKG_ROOT as dpkg --root runs it.
        root = os.path.join(self.tmp, 'purge-root')
        os.makedirs(f'{root}/var/lib/qemu-iobatch')
        with open(f'{root}/var/lib/qemu-iobatch/held-back', 'w', encoding='utf-8') as f:
            f.write('x')
        run(['sh', f'{x}/DEBIAN/postrm', 'remove'], env=dict(os.environ, DPKG_ROOT=root))
        if not os.path.exists(f'{root}/var/lib/qemu-iobatch/held-back'):
            raise Fail('postrm remove took the check\'s state (only purge should)')
        run(['sh', f'{x}/DEBIAN/postrm', 'purge'], env=dict(os.environ, DPKG_ROOT=root))
        if os.path.exists(f'{root}/var/lib/qemu-iobatch'):
            raise Fail('postrm purge left /var/lib/qemu-iobatch')
        h = self.host
        # What it depends on: apt and an OpenPGP verifier, gpgv on bookworm,
        # sqv on trixie, whose apt has no gpgv (a trixie root refused it).
        for verifier in ({'gpgv': '2.2.40-1'}, {'sqv': '1.3.0-3'}):
            h.installed({'apt': '2.6.1', **verifier})
            r = h.apt('-s', 'install', 'qemu-iobatch-apt', check=False)
            if not re.search(rf'^Inst qemu-iobatch-apt \({re.escape(self.apt_version)} ',
                             r.stdout, re.M):
                raise Fail(f'apt-get -s install qemu-iobatch-apt with {list(verifier)[0]}: '
                           f'{(r.stdout + r.stderr).strip()[-300:]!r}')
        sim = r.stdout
        with open(os.path.join(h.d, 'status'), 'a', encoding='utf-8') as f:
            f.write(f'Package: qemu-iobatch-apt\nStatus: install ok installed\n'
                    f'Architecture: all\nVersion: {self.apt_version}\n'
                    'Maintainer: t <t@localhost>\nDescription: stand-in\n\n')
        purge = h.apt('-s', 'purge', 'qemu-iobatch-apt').stdout
        if not re.search(r'^Purg qemu-iobatch-apt', purge, re.M):
            raise Fail(f'apt-get -s purge qemu-iobatch-apt: {purge.strip()[-200:]!r}')
        h.installed({})
        return (f'qemu-iobatch-apt {self.apt_version} all: {len(want)} files as packaging/ has '
                'them, 4 conffiles; apt-get -s installs it from the repository (beside gpgv, '
                'and beside sqv) and purges it')

    def upgrade(self):
        h = self.host
        h.installed({p: self.v1 for p in PACKAGES})
        h.update()
        if h.simulate('upgrade'):
            raise Fail(f'apt-get -s upgrade with {self.v1} installed would install {h.simulate("upgrade")}')
        self.repo_sh('deb1')   # again: a no-op
        out = self.repo_sh('deb2').stdout
        if self.v1 not in out or self.v2 not in out:
            raise Fail(f'the repository should hold {self.v1} and {self.v2}: {out.strip()}')
        h.update()
        got = h.simulate('upgrade')
        if not all_at(got, self.v2):
            raise Fail(f'apt-get -s upgrade would install {got}, want {self.v2} of all five')
        return f'{self.v1} installed, {self.v2} added: apt-get upgrade installs {self.v2} of all five'

    def rebuilt_differently(self):
        d = os.path.join(self.tmp, 'deb1b')
        stand_in_debs(d, self.v1)
        with open(f'{d}/build-time.txt', 'a', encoding='utf-8'):
            pass
        # Another build of the same version: other bytes (another mtime in the ar headers).
        os.utime(f'{d}/qemu-utils_{self.v1}_amd64.deb', (0, 0))
        run(['dpkg-deb', '-R', f'{d}/qemu-utils_{self.v1}_amd64.deb', f'{d}/x'])
        with open(f'{d}/x/DEBIAN/control', 'a', encoding='utf-8') as f:
            f.write('X-Rebuilt: yes\n')
        run(['dpkg-deb', '--root-owner-group', '-Zgzip', '--build', f'{d}/x',
             f'{d}/qemu-utils_{self.v1}_amd64.deb'])
        shutil.rmtree(f'{d}/x')
        r = run([os.path.join(TOP, 'scripts', 'repo.sh'), '--from', d, '--repo', self.repo,
                 '--key-dir', self.keydir, '--no-setup'], check=False)
        if r.returncode == 0 or 'built twice' not in r.stderr:
            raise Fail(f'repo.sh took a different build of {self.v1}: exit {r.returncode}, '
                       f'{r.stderr.strip()!r}')
        return r.stderr.strip()[:120] + '...'

    def migrate_setup_apt(self):
        """A host that the setup-apt of earlier repositories set up (run
        from git history, under SETUP_ROOT): qemu-iobatch-apt's preinst
        (first install, DPKG_ROOT) removes what setup-apt wrote, so that
        its own files take their place; nothing is left that trusts the
        repository unsigned or runs /usr/local/sbin/qemu-iobatch-check."""
        gone = run(['git', '-C', TOP, 'log', '-1', '--format=%H', '--diff-filter=D', '--',
                    'packaging/setup-apt'], check=False).stdout.strip()
        if not gone:
            raise Fail('no commit removed packaging/setup-apt in this checkout\'s history '
                       '(a shallow clone or a tarball?): git fetch --unshallow')
        old, oldhost = os.path.join(self.tmp, 'old-repo'), os.path.join(self.tmp, 'old-host')
        os.makedirs(old)
        os.makedirs(f'{oldhost}/etc/update-motd.d')
        for f in ('setup-apt', 'qemu-iobatch.pref', '80qemu-iobatch', 'qemu-iobatch-check'):
            text = run(['git', '-C', TOP, 'show', f'{gone}^:packaging/{f}']).stdout
            with open(f'{old}/{f}', 'w', encoding='utf-8') as fh:
                fh.write(text)
            os.chmod(f'{old}/{f}', 0o755 if f in ('setup-apt', 'qemu-iobatch-check') else 0o644)
        for f in ('Packages', 'Release'):
            open(f'{old}/{f}', 'w', encoding='utf-8').close()
        shutil.copy(f'{self.tmp}/deb1/qemu-utils_{self.v1}_amd64.deb', old)
        run([f'{old}/setup-apt'], env=dict(os.environ, SETUP_ROOT=oldhost))
        before = sorted(tree(oldhost))
        if 'usr/local/sbin/qemu-iobatch-check' not in before:
            raise Fail(f'the old setup-apt wrote {before}')
        x = os.path.join(self.tmp, 'apt-pkg-migrate')
        run(['dpkg-deb', '-e', self.apt_deb, x])
        out = run(['sh', f'{x}/preinst', 'install'],
                  env=dict(os.environ, DPKG_ROOT=oldhost)).stdout
        # dpkg would keep a file it finds at a conffile's place as the
        # admin's: none may be left for it.
        left = [p for p in tree(oldhost) if os.path.isfile(os.path.join(oldhost, p))]
        if left:
            raise Fail(f'after the preinst, setup-apt\'s {left} are left: dpkg would keep them')
        run(['dpkg-deb', '-x', self.apt_deb, oldhost])
        stale = []
        for dp, _, fs in os.walk(oldhost):
            for f in fs:
                with open(os.path.join(dp, f), 'rb') as fh:
                    data = fh.read()
                if b'/usr/local/sbin' in data or re.search(rb'(?im)^trusted:', data):
                    stale.append(os.path.relpath(os.path.join(dp, f), oldhost))
        if stale or os.path.exists(f'{oldhost}/usr/local/sbin/qemu-iobatch-check'):
            raise Fail(f'after qemu-iobatch-apt over setup-apt\'s files, left from them: {stale}')
        return f'{len(out.splitlines())} files of setup-apt removed by the preinst: ' + \
            ', '.join(l.split()[2] for l in out.splitlines())

    def missing_tool(self):
        """Without gpg, repo.sh stops and says what to do."""
        bindir = bin_without(self.tmp, 'gpg')
        r = run([os.path.join(TOP, 'scripts', 'repo.sh'), '--from', f'{self.tmp}/deb1',
                 '--repo', f'{self.tmp}/repo-nogpg', '--no-setup'],
                env=dict(os.environ, PATH=bindir), check=False)
        if r.returncode == 0 or 'gpg' not in r.stderr or 'make deps' not in r.stderr:
            raise Fail(f'repo.sh without gpg: exit {r.returncode}, {r.stderr.strip()!r}')
        return r.stderr.strip()

    def refuses_key_inside(self):
        """The signing key never goes where hosts read."""
        r = run([os.path.join(TOP, 'scripts', 'repo.sh'), '--from', f'{self.tmp}/deb1',
                 '--repo', self.repo, '--key-dir', f'{self.repo}/signing', '--no-setup'],
                check=False)
        if r.returncode == 0 or 'inside the repository' not in r.stderr or \
                os.path.exists(f'{self.repo}/signing'):
            raise Fail(f'repo.sh with the key directory in the repository: exit '
                       f'{r.returncode}, {r.stderr.strip()!r}')
        return r.stderr.strip()

    def one_line(self):
        """One repository per line: the trixie line's packages go into a
        repository of their own, whose Release names trixie; the bookworm
        repository refuses them, and the trixie line refuses a build
        without its seven packages."""
        trixie = line_var('trixie', '${LINE_DEB_PACKAGES[*]}').split()
        v = f'{pinned("lines/trixie")}+iobatch1'
        stand_in_debs(f'{self.tmp}/deb-trixie', v, trixie)
        env = dict(os.environ, LINE='trixie')
        own = f'{self.tmp}/srv/repo-trixie'

        def repo_trixie(deb_dir, repo):
            return run([os.path.join(TOP, 'scripts', 'repo.sh'), '--from', f'{self.tmp}/{deb_dir}',
                        '--repo', repo, '--key-dir', self.keydir, '--no-setup'],
                       env=env, check=False)
        r = repo_trixie('deb-trixie', self.repo)
        if r.returncode == 0 or "bookworm line's repository" not in r.stderr:
            raise Fail(f'LINE=trixie into the bookworm repository: exit {r.returncode}, '
                       f'{r.stderr.strip()[-200:]!r}')
        r = repo_trixie('deb1', own)
        if r.returncode == 0 or 'qemu-system-modules-spice' not in r.stderr:
            raise Fail(f'LINE=trixie from a bookworm build: exit {r.returncode}, '
                       f'{r.stderr.strip()[-200:]!r}')
        r = repo_trixie('deb-trixie', own)
        if r.returncode != 0:
            raise Fail(f'LINE=trixie into its own repository: exit {r.returncode}, '
                       f'{r.stderr.strip()[-300:]!r}')
        codenames = {}
        for name, d in (('bookworm', self.repo), ('trixie', own)):
            with open(f'{d}/Release', encoding='utf-8') as f:
                codenames[name] = control_field(f.read(), 'Codename')
        if codenames != {'bookworm': 'bookworm', 'trixie': 'trixie'}:
            raise Fail(f'Release Codename of each line\'s repository: {codenames}')
        with open(f'{own}/Packages', encoding='utf-8') as f:
            got = sorted(re.findall(r'^Package: (qemu-system-x86|qemu-system-modules-\S+)$',
                                    f.read(), re.M))
        if got != sorted(p for p in trixie if p.startswith(('qemu-system-x86', 'qemu-system-modules'))):
            raise Fail(f'the trixie repository\'s Packages has {got}')
        return (f'the bookworm repository refuses the trixie line\'s packages, the trixie line '
                f'a build without its module packages; Codename {codenames}')

    # -- the held-back check ------------------------------------------------
    def check_case(self, installed, archive, prefs=''):
        h = self.host
        h.installed({p: installed for p in PACKAGES})
        h.archive(archive, prefs)
        h.update()
        return h.run_check()

    def held_ok(self):
        r = self.check_case(self.v2, [self.debian_binnmu])
        if r.returncode != 0 or 'ok:' not in r.stdout or self.host.held_back():
            raise Fail(f'exit {r.returncode}: {r.stdout.strip()!r}')
        return r.stdout.strip()

    def held_newer(self):
        r = self.check_case(self.v2, [self.debian_binnmu, self.debian_next])
        state = self.host.held_back()
        if r.returncode != 1 or 'WARNING' not in r.stdout or self.debian_next not in r.stdout \
                or self.base not in r.stdout:
            raise Fail(f'exit {r.returncode}: {r.stdout.strip()!r}')
        # What it tells the admin must be true: the pin holds Debian's
        # update back, the fork's base is older, wait for the next release
        # or go back with one command (held-back-fallback runs it).  Not
        # 'make deb repo', which rebuilds the same base and changes nothing.
        for bad in ('make deb', 'make repo', 'make check-update'):
            if bad in r.stdout:
                raise Fail(f'the warning suggests {bad!r}, which does not help a host: '
                           f'{r.stdout.strip()!r}')
        for want in ('holds it back', f"built on Debian's older {self.base}",
                     "wait for the project's next release", "go back to Debian's packages",
                     'apt-get install '):
            if want not in r.stdout:
                raise Fail(f'the warning does not say {want!r}: {r.stdout.strip()!r}')
        if not state or self.debian_next not in state:
            raise Fail(f'no state file with the warning: {state!r}')
        motd = run(['sh', f'{self.host.d}/etc/update-motd.d/90-qemu-iobatch'],
                   env=self.host.env).stdout
        if self.debian_next not in motd:
            raise Fail(f'the login message does not show it: {motd!r}')
        return r.stdout.strip()[:150] + '...'

    def fallback_command(self, out):
        """The one command the warning gives to go back to Debian's packages."""
        m = re.search(r'go back to Debian\'s packages now with: (apt-get install(?: \S+=\S+)+) ',
                      out)
        if not m:
            raise Fail(f'no apt-get install command in the warning: {out.strip()!r}')
        return m.group(1)

    def held_fallback(self):
        """The warning's command, run (simulated) as it is with the pin in
        place, puts Debian's newest version of every fork package installed,
        no other; afterwards the pin does not pull the fork back, the check
        is quiet, and a host without qemu-system-gui gets no command for it."""
        h = self.host
        r = self.check_case(self.v2, [self.debian_binnmu, self.debian_next])
        cmd = self.fallback_command(r.stdout)
        want = ' '.join(f'{p}={self.debian_next}' for p in PACKAGES)
        if cmd != f'apt-get install {want}':
            raise Fail(f'the warning gives {cmd!r}, want \'apt-get install {want}\'')
        got = h.simulate(*cmd.split()[1:])
        if not all_at(got, self.debian_next):
            raise Fail(f'{cmd} (apt-get -s, the pin in place) would install {got}, '
                       f'want {self.debian_next} of all five')
        sim = h.apt('-s', *cmd.split()[1:]).stdout
        if re.search(r'^Remv ', sim, re.M):
            raise Fail(f'{cmd} would remove packages: {sim.strip()[-300:]!r}')
        # After it: Debian's packages stay, the check says nothing is held back.
        h.installed({p: self.debian_next for p in PACKAGES})
        after = h.simulate('upgrade')
        if after:
            raise Fail(f'after going back, apt-get -s upgrade would install {after}: '
                       'the pin pulls the fork back')
        quiet = h.run_check()
        if quiet.returncode != 0 or 'not a qemu-iobatch build' not in quiet.stdout \
                or h.held_back():
            raise Fail(f'after going back the check says (exit {quiet.returncode}): '
                       f'{quiet.stdout.strip()!r}')
        # ... and Debian's next update reaches the host again.
        m = re.match(r'(.*\+deb12u)(\d+)$', self.debian_next)
        later = f'{m.group(1)}{int(m.group(2)) + 1}'
        h.archive([self.debian_binnmu, self.debian_next, later])
        h.update()
        got_later = h.simulate('upgrade')
        if not all_at(got_later, later):
            raise Fail(f'after going back, with Debian\'s {later} in the archive, apt-get -s '
                       f'upgrade would install {got_later}, want {later} of all five')
        h.archive([self.debian_binnmu, self.debian_next])
        # Only what is installed: a host without qemu-system-gui.
        four = {p: self.v2 for p in PACKAGES if p != 'qemu-system-gui'}
        h.installed(four)
        h.update()
        r4 = h.run_check()
        cmd4 = self.fallback_command(r4.stdout)
        if 'qemu-system-gui' in cmd4:
            raise Fail(f'without qemu-system-gui installed the warning gives {cmd4!r}')
        got4 = h.simulate(*cmd4.split()[1:])
        if sorted(got4) != sorted(four) or set(got4.values()) != {self.debian_next}:
            raise Fail(f'{cmd4} would install {got4}, want {self.debian_next} of {sorted(four)}')
        return (f'{cmd}: apt-get -s installs {self.debian_next} of all five over the pin, '
                'removes nothing; then apt-get upgrade keeps them (and takes Debian\'s next '
                'update), the check is quiet; '
                'without qemu-system-gui the command leaves it out')

    def held_backports(self):
        bpo = '1:10.0.2+ds-2+deb13u1~bpo12+1'
        prefs = f'Package: {" ".join(PACKAGES)}\nPin: version {bpo}\nPin-Priority: 100\n'
        r = self.check_case(self.v2, [self.debian_binnmu, bpo], prefs)
        if r.returncode != 0 or 'ok:' not in r.stdout or self.host.held_back():
            raise Fail(f'with {bpo} at priority 100: exit {r.returncode}: {r.stdout.strip()!r}')
        return f'{bpo} at priority 100 ignored: {r.stdout.strip()[:80]}...'

    def held_rebuilt(self):
        d = os.path.join(self.tmp, 'deb3')
        v3 = f'{self.debian_next}+iobatch1'
        stand_in_debs(d, v3)
        repo_sh('--from', d, '--repo', self.repo, '--key-dir', self.keydir, '--no-setup')
        r = self.check_case(self.v2, [self.debian_binnmu, self.debian_next])
        if r.returncode != 0 or 'apt upgrade' not in r.stdout or self.host.held_back():
            raise Fail(f'with {v3} in the repository: exit {r.returncode}: {r.stdout.strip()!r}')
        got = self.host.simulate('upgrade')
        if not all_at(got, v3):
            raise Fail(f'apt-get -s upgrade would install {got}, want {v3}')
        # A host that went back to Debian's packages (held-back-fallback)
        # keeps the pin: the next release brings the fork back.
        self.host.installed({p: self.debian_next for p in PACKAGES})
        back = self.host.simulate('upgrade')
        if not all_at(back, v3):
            raise Fail(f'from Debian\'s {self.debian_next}, apt-get -s upgrade would install '
                       f'{back}, want {v3}')
        return r.stdout.strip() + f' (also from Debian\'s {self.debian_next})'

    def held_not_fork(self):
        r = self.check_case(self.debian_binnmu, [self.debian_binnmu, self.debian_next])
        if r.returncode != 0 or 'not a qemu-iobatch build' not in r.stdout:
            raise Fail(f'exit {r.returncode}: {r.stdout.strip()!r}')
        return r.stdout.strip()

    def over_backports(self):
        """A host that has bookworm-backports' QEMU 10.0 installed keeps it:
        the pin (990) does not downgrade, as docs/install.md says; the
        command it gives (explicit versions, --allow-downgrades) installs
        the fork's newest version of all five and removes nothing.  (A pin
        above 1000 would downgrade, and would also pull the fork back over
        an admin who went back to Debian's packages: held-back-fallback.)"""
        h = self.host
        bpo = '1:10.0.2+ds-2+deb13u1~bpo12+1'
        prefs = f'Package: {" ".join(PACKAGES)}\nPin: version {bpo}\nPin-Priority: 100\n'
        h.installed({p: bpo for p in PACKAGES})
        h.archive([self.debian_binnmu, bpo], prefs)
        h.update()
        fork = h.fork_known()
        if not fork:
            raise Fail(f'apt knows no +iobatch version: {h.policy()!r}')
        newest = fork[0]
        for v in fork[1:]:
            if run(['dpkg', '--compare-versions', v, 'gt', newest], check=False).returncode == 0:
                newest = v
        for args in (('install', *PACKAGES), ('upgrade',)):
            got = h.simulate(*args)
            if got:
                raise Fail(f'with {bpo} installed, apt-get -s {args[0]} would install {got}: '
                           'install.md says apt keeps 10.0')
        cmd = ['install', '--allow-downgrades'] + [f'{p}={newest}' for p in PACKAGES]
        got = h.simulate(*cmd)
        if not all_at(got, newest):
            raise Fail(f'apt-get -s {" ".join(cmd)} would install {got}, want {newest} of all five')
        sim = h.apt('-s', *cmd).stdout
        if re.search(r'^Remv ', sim, re.M):
            raise Fail(f'it would remove packages: {sim.strip()[-300:]!r}')
        return (f'{bpo} installed: apt-get install and upgrade keep it; with explicit versions '
                f'and --allow-downgrades apt installs {newest} of all five, removes nothing')

    def held_hook(self):
        """apt-get update runs the check through the shipped hook."""
        h = self.host
        h.installed({p: self.v2 for p in PACKAGES})
        h.archive([self.debian_binnmu])
        quiet = h.update().stdout
        if 'qemu-iobatch' in quiet:
            raise Fail(f'apt-get update with nothing held back printed: {quiet!r}')
        h.archive([self.debian_binnmu, self.debian_next])
        r = h.update()
        line = [l for l in r.stdout.splitlines() if 'qemu-iobatch-check' in l]
        if not line or 'WARNING' not in line[0] or self.debian_next not in line[0]:
            raise Fail(f'apt-get update (exit {r.returncode}) did not warn: {r.stdout.strip()[-300:]!r}')
        if not h.held_back():
            raise Fail('no state file after the hook')
        return f'apt-get update exits 0 and prints: {line[0][:120]}...'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--build', help='also check the --version of this build (build/fork, ...)')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix='iobatch-packaging-') as tmp:
        os.chmod(tmp, 0o755)
        clone = os.path.join(tmp, 'clone')
        report('version-series', t_series)
        shallow = git(TOP, 'rev-parse', '--is-shallow-repository') == 'true'
        if shallow:
            print('FAIL version-rev: this checkout is a shallow clone; the tests of the package '
                  'revision need its history (git fetch --unshallow)', flush=True)
            global failed
            failed += 1
        else:
            run(['git', 'clone', '-q', TOP, clone])
            report('version-rev', lambda: t_rev(clone))
            report('version-rev-grows', lambda: t_rev_grows(clone))
            report('version-rev-uncommitted', lambda: t_rev_uncommitted(clone))
        report('version-rev-shallow', lambda: t_rev_shallow(tmp))
        report('version-rev-tarball', lambda: t_rev_tarball(tmp))
        if a.build:
            report('build-version', lambda: t_build_version(os.path.abspath(a.build)))
        report('deb-changelog-merge', lambda: t_changelog_merge(tmp))
        sources = {}
        report('deb-src-metadata', lambda: t_deb_src_metadata(tmp, 'bookworm', sources))
        report('deb-src-metadata-trixie', lambda: t_deb_src_metadata(tmp, 'trixie', sources))
        for line in ('bookworm', 'trixie'):
            report(f'deb-profile-packages-{line}', lambda l=line: t_deb_profile_packages(l, sources))
        report('install-uninstall', lambda: t_install_uninstall(tmp))
        report('install-refuses', lambda: t_install_refuses(tmp))
        report('deb-root-refuses', lambda: t_deb_root_refuses(tmp))
        try:
            t = RepoTests(tmp)
        except (Fail, OSError, subprocess.SubprocessError) as e:
            print(f'FAIL repo-setup: {e}', flush=True)
            return 1
        try:
            report('repo-install', t.install)
            report('repo-signed', t.signed)
            report('repo-rejects-other-key', t.rejects_other_key)
            report('repo-rejects-modified-release', t.rejects_modified_release)
            report('repo-rejects-modified-packages', t.rejects_modified_packages)
            report('repo-apt-package', t.apt_package)
        finally:
            stop_agent(f'{t.keydir}/gnupg')
        report('repo-upgrade', t.upgrade)
        report('repo-rebuilt-differently', t.rebuilt_differently)
        report('repo-refuses-key-inside', t.refuses_key_inside)
        report('repo-one-line', t.one_line)
        report('repo-missing-tool', t.missing_tool)
        report('repo-migrate-setup-apt', t.migrate_setup_apt)
        report('held-back-ok', t.held_ok)
        report('held-back-newer', t.held_newer)
        report('held-back-fallback', t.held_fallback)
        report('held-back-backports', t.held_backports)
        report('held-back-hook', t.held_hook)
        report('held-back-rebuilt', t.held_rebuilt)
        report('held-back-not-fork', t.held_not_fork)
        report('repo-over-backports', t.over_backports)
        stop_agent(f'{t.keydir}/gnupg')
    print(f'packaging: {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
