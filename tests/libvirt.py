#!/usr/bin/env python3
"""libvirt end to end: Debian's libvirt runs the fork (docs/install.md).

    python3 tests/libvirt.py --emulator PATH [--keep]

Starts a private libvirtd (its own PID, stopped at the end) and runs a TCG
domain whose <emulator> is PATH, with an IOThread and two virtio-blk disks
on it, io='native' and io='io_uring'; the built-in guest (guest/) boots by
direct kernel boot, runs fio verify on both disks and powers off.  Where
libvirt (10.0 or later) and QEMU (9.0 or later) can map a disk's queues to
IOThreads, the io='native' disk has two queues instead, one on each of two
IOThreads (<driver><iothreads><iothread id='1'><queue id='0'/>...), and
libvirt-vq-mapping checks that both queues and both threads carried the
verified I/O; elsewhere that check skips, saying why.

The libvirtd runs in a mount namespace of its own, in which /etc/libvirt,
/run/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt,
/etc/passwd and /etc/group are private copies under a temporary directory:
the machine's libvirt configuration (qemu.conf included), its domains and
any libvirtd already running are neither read nor touched.

Prints "ok NAME", "FAIL NAME: why" or "SKIP NAME: why" per check and
"N passed, N failed, N skipped"; exits 1 if a check failed.  Skips only
when libvirt is not installed and cannot be installed.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, 'tests', 'guest'))
import harness  # noqa: E402  pylint: disable=wrong-import-position

PACKAGES = ['libvirt-daemon', 'libvirt-daemon-driver-qemu', 'libvirt-clients']
DOMAIN = 'iobatch-libvirt'
PRIVATE = ['/etc/libvirt', '/run/libvirt', '/var/lib/libvirt',
           '/var/cache/libvirt', '/var/log/libvirt']
# Disk serials (the guest finds its disks by them), targets and io modes.
DISKS = [('iobatch-native', 'vda', 'native'), ('iobatch-uring', 'vdb', 'io_uring')]
MB = 32                 # per fio job; two jobs per disk
BOOT_TIMEOUT = 120
IO_TIMEOUT = 600
# libvirt's <driver><iothreads> for virtio-blk, QEMU's iothread-vq-mapping.
MAPPING_LIBVIRT = (10, 0, 0)


class Fail(Exception):
    pass


class Skip(Exception):
    """A check that cannot run here; says why."""


class Report:
    def __init__(self):
        self.n = {'ok': 0, 'FAIL': 0, 'SKIP': 0}

    def line(self, kind, name, why=''):
        self.n[kind] += 1
        print(f'{kind} {name}' + (f': {why}' if why else ''), flush=True)

    def summary(self):
        print(f'{self.n["ok"]} passed, {self.n["FAIL"]} failed, '
              f'{self.n["SKIP"]} skipped', flush=True)
        return 1 if self.n['FAIL'] else 0


def installed(pkg):
    r = subprocess.run(['dpkg-query', '-W', '-f=${Status}', pkg],
                       capture_output=True, text=True, check=False)
    return r.stdout.endswith('ok installed')


def ensure_libvirt():
    """Install Debian's libvirt when missing.  Returns None, or why it
    cannot be had (the one reason to skip)."""
    missing = [p for p in PACKAGES if not installed(p)]
    if not missing:
        return None
    if os.geteuid() != 0:
        return (f'libvirt is not installed and this is not root; run: '
                f'apt-get install --no-install-recommends {" ".join(missing)}')
    print(f'# installing {" ".join(missing)}', flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    cmd = ['apt-get', 'install', '-y', '-q', '--no-install-recommends'] + missing
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        subprocess.run(['apt-get', 'update', '-q'], env=env, capture_output=True,
                       check=False)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return (f'apt-get install {" ".join(missing)} failed: '
                f'{(r.stdout + r.stderr).strip().splitlines()[-1:]}')
    return None


def version_of(text):
    """(major, minor, micro) of the first dotted version in text."""
    m = re.search(r'(\d+)\.(\d+)\.(\d+)', text)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def mapping_support(libvirtd_version, emulator):
    """None if a disk's queues can be mapped to IOThreads, else why not."""
    have = version_of(libvirtd_version)
    if have < MAPPING_LIBVIRT:
        return (f'libvirt {".".join(map(str, have))} has no <driver><iothreads> for a'
                f' disk (libvirt {".".join(map(str, MAPPING_LIBVIRT))} or later)')
    why = harness.binary_missing_property(emulator, 'iothread-vq-mapping')
    return why and f'{why} (QEMU 9.0 or later)'


class Libvirtd:
    """A private libvirtd in a mount namespace of its own."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.sock = os.path.join(tmp, 'sock')
        self.uri = f'qemu:///system?socket={self.sock}/libvirt-sock'
        self.proc = None
        self.log = os.path.join(tmp, 'libvirtd.log')

    def _config(self):
        t = self.tmp
        etc = os.path.join(t, 'etc')
        for d in ['etc/qemu', 'run', 'lib', 'cache', 'log', 'sock']:
            os.makedirs(os.path.join(t, d), exist_ok=True)
        with open(os.path.join(etc, 'libvirtd.conf'), 'w', encoding='utf-8') as f:
            f.write(f'unix_sock_dir = "{self.sock}"\n'
                    'auth_unix_ro = "none"\nauth_unix_rw = "none"\n'
                    f'log_outputs = "3:file:{self.log}"\n')
        # libvirt 9.0 looks the default user up before it reads qemu.conf;
        # without virtlogd, QEMU's output goes to a file.
        with open(os.path.join(etc, 'qemu.conf'), 'w', encoding='utf-8') as f:
            f.write('user = "root"\ngroup = "root"\ndynamic_ownership = 0\n'
                    'remember_owner = 0\nsecurity_driver = "none"\n'
                    'stdio_handler = "file"\nnamespaces = [ ]\n'
                    'cgroup_controllers = [ ]\n')
        for name, line in (('passwd', 'libvirt-qemu:x:64055:64055:Libvirt Qemu:'
                                      '/var/lib/libvirt:/usr/sbin/nologin\n'),
                           ('group', 'libvirt-qemu:x:64055:\n')):
            with open(f'/etc/{name}', encoding='utf-8') as f:
                text = f.read()
            if not re.search(r'^libvirt-qemu:', text, re.M):
                text += line
            with open(os.path.join(t, name), 'w', encoding='utf-8') as f:
                f.write(text)
        binds = [(os.path.join(t, 'etc'), '/etc/libvirt'), (os.path.join(t, 'run'), '/run/libvirt'),
                 (os.path.join(t, 'lib'), '/var/lib/libvirt'),
                 (os.path.join(t, 'cache'), '/var/cache/libvirt'),
                 (os.path.join(t, 'log'), '/var/log/libvirt'),
                 (os.path.join(t, 'passwd'), '/etc/passwd'),
                 (os.path.join(t, 'group'), '/etc/group')]
        return binds

    def start(self):
        binds = self._config()
        for d in PRIVATE:
            os.makedirs(d, exist_ok=True)   # mount points; the packages make most
        script = ' && '.join(f'mount --bind {src} {dst}' for src, dst in binds)
        script += (f' && exec /usr/sbin/libvirtd --config /etc/libvirt/libvirtd.conf'
                   f' --pid-file {self.tmp}/libvirtd.pid')
        out = open(os.path.join(self.tmp, 'libvirtd.out'), 'w', encoding='utf-8')
        # unshare and sh exec, so that the child's PID is libvirtd's.
        self.proc = subprocess.Popen(['unshare', '--mount', '--propagation', 'private',
                                      'sh', '-c', script], stdout=out, stderr=out,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        until = time.time() + 60
        while time.time() < until:
            if self.proc.poll() is not None:
                raise Fail(f'libvirtd exited with {self.proc.returncode}: {self.tail()}')
            if os.path.exists(f'{self.sock}/libvirt-sock'):
                # Not 'virsh version': it wants a QEMU in /usr/bin, and the
                # machine need not have one (the domain names its own).
                r = self.virsh('list', '--all', check=False)
                if r.returncode == 0:
                    return subprocess.run(['/usr/sbin/libvirtd', '--version'], check=False,
                                          capture_output=True, text=True).stdout
            time.sleep(0.5)
        raise Fail(f'libvirtd did not answer within 60 s: {self.tail()}')

    def tail(self):
        text = ''
        for p in (os.path.join(self.tmp, 'libvirtd.out'), self.log):
            try:
                with open(p, encoding='utf-8', errors='replace') as f:
                    text += f.read()
            except OSError:
                pass
        return ' | '.join(text.strip().splitlines()[-6:])

    def virsh(self, *args, check=True, timeout=120):
        r = subprocess.run(['virsh', '-q', '-c', self.uri] + list(args),
                           capture_output=True, text=True, timeout=timeout, check=False)
        if check and r.returncode != 0:
            raise Fail(f'virsh {" ".join(args)}: {(r.stderr or r.stdout).strip()}')
        return r

    def qmp(self, dom, cmd, **arguments):
        msg = {'execute': cmd}
        if arguments:
            msg['arguments'] = arguments
        r = json.loads(self.virsh('qemu-monitor-command', dom, json.dumps(msg)).stdout)
        if 'error' in r:
            raise Fail(f'{cmd}: {r["error"]}')
        return r['return']

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def domain_xml(emulator, guest, tmp, mapping):
    """The domain; with mapping, disk 0 has two queues, queue 0 on IOThread
    1 and queue 1 on IOThread 2."""
    disks = ''
    for i, (serial, dev, io) in enumerate(DISKS):
        if mapping and i == 0:
            driver = (f"<driver name='qemu' type='raw' cache='none' io='{io}' queues='2'>"
                      "<iothreads><iothread id='1'><queue id='0'/></iothread>"
                      "<iothread id='2'><queue id='1'/></iothread></iothreads></driver>")
        else:
            driver = f"<driver name='qemu' type='raw' cache='none' io='{io}' iothread='1'/>"
        disks += f"""
    <disk type='file' device='disk'>
      {driver}
      <source file='{tmp}/disk{i}.raw'/>
      <target dev='{dev}' bus='virtio'/>
      <serial>{serial}</serial>
    </disk>"""
    return f"""<domain type='qemu'>
  <name>{DOMAIN}</name>
  <memory unit='MiB'>1024</memory>
  <vcpu>2</vcpu>
  <iothreads>{2 if mapping else 1}</iothreads>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{guest}/vmlinuz</kernel>
    <initrd>{guest}/initrd.cpio</initrd>
    <cmdline>{harness.CMDLINE}</cmdline>
  </os>
  <sysinfo type='fwcfg'>
    <entry name='opt/iobatch/workload' file='{tmp}/workload.sh'/>
  </sysinfo>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{emulator}</emulator>{disks}
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{tmp}/ctl.raw'/>
      <target dev='vdc' bus='virtio'/>
      <serial>iobatch-ctl</serial>
    </disk>
    <serial type='file'>
      <source path='{tmp}/serial.log' append='off'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


class Test:
    def __init__(self, emulator, tmp, report):
        self.emulator = os.path.realpath(emulator)
        self.tmp = tmp
        self.report = report
        self.lv = Libvirtd(tmp)
        self.serial = os.path.join(tmp, 'serial.log')
        self.pid = None
        self.unmapped = 'not looked at'    # None: disk 0's queues are mapped
        self.threads = {}                  # IOThread id: (thread id, run ns at boot)

    def log(self):
        try:
            with open(self.serial, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            return ''

    def state(self):
        return self.lv.virsh('domstate', '--reason', DOMAIN).stdout.strip()

    def wait_marker(self, pattern, timeout):
        until = time.time() + timeout
        while time.time() < until:
            text = self.log()
            m = re.search(pattern, text)
            if m:
                return m
            err = re.search(r'@@ERROR .*', text)
            if err:
                raise Fail(f'guest: {err.group(0)}')
            if not self.state().startswith(('running', 'paused')):
                raise Fail(f'domain {self.state()} before /{pattern}/')
            time.sleep(0.3)
        raise Fail(f'no /{pattern}/ within {timeout} s; serial log ends: '
                   + ' | '.join(self.log().strip().splitlines()[-5:]))

    def qemu_pid(self):
        with open(f'{self.tmp}/run/qemu/{DOMAIN}.pid', encoding='ascii') as f:
            return int(f.read().strip())

    # -- the checks, in order; each raises Fail ------------------------------
    def define_start(self):
        try:
            guest = harness.build_guest()
        except SystemExit as e:
            raise Fail(str(e)) from e
        for i in range(len(DISKS)):
            with open(f'{self.tmp}/disk{i}.raw', 'wb') as f:
                f.truncate(256 << 20)
        with open(f'{self.tmp}/ctl.raw', 'wb') as f:
            f.truncate(1 << 20)
        with open(f'{self.tmp}/workload.sh', 'w', encoding='utf-8') as f:
            f.write(f'ENGINE=io_uring\nMB={MB}\n')
            if self.unmapped is None:
                # A writer and its reader pinned to each vCPU: Linux
                # submits on the submitting CPU's queue, so both are used.
                f.write('SPLIT_CPUS=2\n')
            with open(os.path.join(TOP, 'guest', 'workloads', 'libvirt.sh'),
                      encoding='utf-8') as w:
                f.write(w.read())
        xml = os.path.join(self.tmp, 'domain.xml')
        with open(xml, 'w', encoding='utf-8') as f:
            f.write(domain_xml(self.emulator, guest, self.tmp, self.unmapped is None))
        self.lv.virsh('define', xml)
        got = self.lv.virsh('dumpxml', DOMAIN).stdout
        if f'<emulator>{self.emulator}</emulator>' not in got:
            raise Fail('the defined domain does not name the emulator')
        self.lv.virsh('start', DOMAIN)
        if not self.state().startswith('running'):
            raise Fail(f'after start: {self.state()}')
        self.wait_marker(r'@@BOOT', BOOT_TIMEOUT)
        return 'defined and started; the guest booted'

    def emulator_is_fork(self):
        self.pid = self.qemu_pid()
        exe = os.readlink(f'/proc/{self.pid}/exe')
        if exe == self.emulator:
            return f'/proc/{self.pid}/exe = {exe}'
        # In a chroot, libvirtd's mount namespace is not the reader's, and
        # the link names the file from the real root: the same file?
        a, b = os.stat(f'/proc/{self.pid}/exe'), os.stat(self.emulator)
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
            raise Fail(f'/proc/{self.pid}/exe is {exe}, not {self.emulator}')
        return f'/proc/{self.pid}/exe is {exe}, the file {self.emulator} (inode {b.st_ino})'

    def run_ns(self, tid):
        """The time thread tid of QEMU has run (schedstat), in ns."""
        with open(f'/proc/{self.pid}/task/{tid}/schedstat', encoding='ascii') as f:
            return int(f.read().split()[0])

    def iothreads(self):
        its = self.lv.qmp(DOMAIN, 'query-iothreads')
        ids = sorted(t['id'] for t in its)
        want = ['iothread1', 'iothread2'] if self.unmapped is None else ['iothread1']
        if ids != want:
            raise Fail(f'query-iothreads: {ids}, want {want}')
        for t in sorted(its, key=lambda t: t['id']):
            tid = t['thread-id']
            if not os.path.exists(f'/proc/{self.pid}/task/{tid}'):
                raise Fail(f'{t["id"]} thread {tid} is not a thread of QEMU {self.pid}')
            self.threads[t['id']] = (tid, self.run_ns(tid))
        links = {}
        for i in range(len(DISKS) + 1):
            links[i] = self.lv.qmp(DOMAIN, 'qom-get', path=f'/machine/peripheral/virtio-disk{i}',
                                   property='iothread')
        on1 = range(1, len(DISKS)) if self.unmapped is None else range(len(DISKS))
        for i in on1:
            if links[i] != '/objects/iothread1':
                raise Fail(f'virtio-disk{i} iothread link is {links[i]!r}')
        if links[len(DISKS)]:
            raise Fail(f'the control disk is on {links[len(DISKS)]!r}, want none')
        threads = ', '.join(f'{k} (thread {v[0]})' for k, v in self.threads.items())
        if self.unmapped is not None:
            return f'{threads}; virtio-disk0,1 -> /objects/iothread1'
        path = '/machine/peripheral/virtio-disk0'
        mapping = self.lv.qmp(DOMAIN, 'qom-get', path=path, property='iothread-vq-mapping')
        want_map = [{'iothread': 'iothread1', 'vqs': [0]}, {'iothread': 'iothread2', 'vqs': [1]}]
        if mapping != want_map or links[0]:
            raise Fail(f'virtio-disk0: iothread-vq-mapping {mapping}, iothread {links[0]!r};'
                       f' want {want_map} and no iothread')
        nq = self.lv.qmp(DOMAIN, 'qom-get', path=path, property='num-queues')
        if nq != 2:
            raise Fail(f'virtio-disk0 has {nq} queues, want 2')
        return (f'{threads}; virtio-disk0 queue 0 -> iothread1, queue 1 -> iothread2;'
                f' virtio-disk1 -> /objects/iothread1')

    def aio_modes(self):
        with open(f'/proc/{self.pid}/cmdline', 'rb') as f:
            args = f.read().decode().split('\0')
        modes = {}
        for a, b in zip(args, args[1:]):
            if a == '-blockdev' and b.startswith('{'):
                o = json.loads(b)
                if o.get('driver') == 'file':
                    modes[o['filename']] = (o.get('aio'), o.get('cache', {}).get('direct'))
        for i, (_, _, io) in enumerate(DISKS):
            got = modes.get(f'{self.tmp}/disk{i}.raw')
            if got != (io, True):
                raise Fail(f'disk{i}: aio/direct {got}, want ({io}, True)')
        return 'QEMU runs disk0 with aio=native, disk1 with aio=io_uring, O_DIRECT'

    def blkstat(self, dev):
        st = {}
        for line in self.lv.virsh('domblkstat', DOMAIN, dev).stdout.splitlines():
            f = line.split()
            if len(f) == 3:
                st[f[1]] = int(f[2])
        return st

    def guest_stat(self, n):
        """{serial: fields of /sys/block/vdX/stat} from the @@STATn lines."""
        return {m.group(1): [int(x) for x in m.group(2).split()]
                for m in re.finditer(rf'@@STAT{n} (\S+) ([\d ]+)', self.log())}

    def go(self, n):
        with open(f'{self.tmp}/ctl.raw', 'r+b') as f:
            f.write(f'IOBATCH-GO{n}\n'.encode().ljust(512, b'\0'))

    def domblkstat(self):
        """What QEMU counted for each disk while the guest ran fio, against
        what the guest's block layer and fio counted: domblkstat before (guest
        idle, waiting) and after (domain suspended) the workload."""
        self.wait_marker(r'@@MARK stats0', BOOT_TIMEOUT)
        before = {dev: self.blkstat(dev) for _, dev, _ in DISKS}
        self.go(1)
        self.wait_marker(r'@@MARK stats1', IO_TIMEOUT)
        self.lv.virsh('suspend', DOMAIN)
        if not self.state().startswith('paused'):
            raise Fail(f'after suspend: {self.state()}')
        g0, g1 = self.guest_stat(0), self.guest_stat(1)
        fio = dict(harness.fio_results(self.log()))
        out = []
        for serial, dev, _ in DISKS:
            after = self.blkstat(dev)
            q = {k: after[k] - before[dev][k] for k in
                 ('rd_req', 'rd_bytes', 'wr_req', 'wr_bytes', 'flush_operations')}
            if serial not in g0 or serial not in g1 or len(g1[serial]) < 17:
                raise Fail(f'no @@STAT0/@@STAT1 lines for {serial}')
            g = [b - a for a, b in zip(g0[serial], g1[serial])]
            m = re.search(rf'@@DISK .*{serial} /dev/(\S+)', self.log())
            jobs = fio.get(f'verify-{m.group(1) if m else "?"}', {}).get('jobs')
            if not jobs:
                raise Fail(f'no fio result for {serial}')
            fr = sum(j['read']['total_ios'] for j in jobs)
            fw = sum(j['write']['total_ios'] for j in jobs)
            fs = sum(j['sync']['total_ios'] for j in jobs)
            # /sys/block/X/stat: 0 reads, 2 sectors read, 4 writes (fio's
            # writes plus one empty pre-flush write per fsync), 6 sectors
            # written, 15 flushes sent to the device.
            want = {'rd_req': (g[0], fr), 'rd_bytes': (g[2] * 512,),
                    'wr_req': (g[4] - fs, fw), 'wr_bytes': (g[6] * 512,),
                    'flush_operations': (g[15],)}
            bad = [f'{k} {q[k]} (guest/fio {"/".join(map(str, v))})'
                   for k, v in want.items() if any(q[k] != x for x in v)]
            if bad:
                raise Fail(f'{dev}: domblkstat during the workload differs: ' + ', '.join(bad))
            if not (q['rd_req'] and q['wr_req'] and q['flush_operations']):
                raise Fail(f'{dev}: no reads, writes or flushes counted: {q}')
            out.append(f'{dev} rd {q["rd_req"]} wr {q["wr_req"]} flush {q["flush_operations"]}')
        return '; '.join(out) + ' during fio, = guest and fio'

    def used_queue(self, vq, iothread=None):
        """x-query-virtio-queue-status of virtio-disk0's queue vq, which must
        have completed requests and have none in flight (the domain paused
        after the I/O); iothread names the thread that serves it, for the
        message."""
        path = '/machine/peripheral/virtio-disk0/virtio-backend'
        what = f'queue {vq} of virtio-disk0' + (f' (on {iothread})' if iothread else '')
        q = self.lv.qmp(DOMAIN, 'x-query-virtio-queue-status', path=path, queue=vq)
        if q['inuse'] != 0 or q['used-idx'] != q['last-avail-idx']:
            raise Fail(f'{what} has requests in flight: {q}')
        if q['used-idx'] == 0:
            raise Fail(f'{what} never used: {q}')
        return q

    def queue_status(self):
        """The documented way to look at a device's queues (docs/install.md);
        with the domain paused after the I/O, nothing is in flight."""
        q = self.used_queue(0)
        return f'virtio-disk0 queue 0: used-idx {q["used-idx"]}, inuse 0'

    def vq_mapping(self):
        """With disk 0's queues on two IOThreads: after the verified
        workload (the domain paused), each queue has completed requests and
        has none in flight, and each IOThread has run since the boot."""
        if self.unmapped is not None:
            raise Skip(self.unmapped)
        out = []
        for vq, name in ((0, 'iothread1'), (1, 'iothread2')):
            q = self.used_queue(vq, name)
            tid, ns0 = self.threads[name]
            ran = self.run_ns(tid) - ns0
            if ran <= 0:
                raise Fail(f'{name} (thread {tid}) has not run since the boot, '
                           f'though queue {vq} completed {q["used-idx"]}')
            out.append(f'queue {vq}: used-idx {q["used-idx"]}, {name} ran {ran / 1e6:.0f} ms')
        return 'virtio-disk0 ' + '; '.join(out)

    def queue_stats(self):
        """The fork's counters (docs/notify-batch.md), read as docs/install.md
        shows: they agree with the queue's own state, which has nothing in
        flight (the domain paused after the I/O)."""
        path = '/machine/peripheral/virtio-disk0/virtio-backend'
        names = [c['name'] for c in self.lv.qmp(DOMAIN, 'query-commands')]
        if 'x-query-virtio-queue-stats' not in names:
            ver = self.lv.qmp(DOMAIN, 'query-version')['qemu']
            if ver['major'] < 10:
                raise Fail('no x-query-virtio-queue-stats: the bookworm line has it')
            raise Skip(f'QEMU {ver["major"]}.{ver["minor"]}.{ver["micro"]} has no '
                       'x-query-virtio-queue-stats (both lines of the fork have it,'
                       ' Debian\'s QEMU not)')
        st = self.used_queue(0)
        stats = self.lv.qmp(DOMAIN, 'x-query-virtio-queue-stats', path=path)
        q = next((s for s in stats if s['queue-index'] == 0), None)
        if q is None:
            raise Fail(f'no counters for queue 0 of virtio-disk0: {stats}')
        # Both count from the guest driver's reset; used-idx wraps at 2^16.
        if q['completions'] % 65536 != st['used-idx']:
            raise Fail(f'completions {q["completions"]} do not match used-idx '
                       f'{st["used-idx"]}: {q}')
        if not 0 < q['notifications'] <= q['completions']:
            raise Fail(f'notifications {q["notifications"]} for {q["completions"]} '
                       f'completions: {q}')
        if len(q['batches']) != 8 or not sum(q['batches']):
            raise Fail(f'no batches counted: {q}')
        return (f'virtio-disk0 queue 0: {q["completions"]} completions, '
                f'{q["notifications"]} notifications, {q["merged"]} merged')

    def resume_shutoff(self):
        self.go(2)
        self.lv.virsh('resume', DOMAIN)
        until = time.time() + 120
        while time.time() < until:
            st = self.state()
            if st.startswith('shut off'):
                break
            time.sleep(0.5)
        else:
            raise Fail(f'the domain did not shut off by itself: {self.state()}')
        if st != 'shut off (shutdown)':
            raise Fail(f'domain state {st!r}, want shut off (shutdown)')
        m = re.search(r'@@RESULT rc=(\d+)', self.log())
        if not m or m.group(1) != '0':
            raise Fail(f'guest workload result: {m.group(0) if m else "none"}')
        return 'resumed; the guest powered off: shut off (shutdown)'

    def fio_verify(self):
        results = harness.fio_results(self.log())
        names = sorted(n for n, _ in results)
        if len(names) != len(DISKS):
            raise Fail(f'fio results {names}, want one per disk')

        class C:  # what check_fio reads of a case
            fsync = True
        try:
            harness.check_fio(C, results)
        except harness.CaseFail as e:
            raise Fail(str(e)) from e
        n = sum(j['read']['total_ios'] + j['write']['total_ios']
                for _, r in results for j in r['jobs'])
        return f'{", ".join(names)}: {n} I/Os, verify=crc32c, no errors'

    def lifecycle(self):
        os.rename(self.serial, self.serial + '.1')
        self.lv.virsh('start', DOMAIN)
        self.wait_marker(r'@@BOOT', BOOT_TIMEOUT)
        self.lv.virsh('destroy', DOMAIN)
        st = self.state()
        if st != 'shut off (destroyed)':
            raise Fail(f'after destroy: {st!r}')
        self.lv.virsh('undefine', DOMAIN)
        names = self.lv.virsh('list', '--all', '--name').stdout.split()
        if DOMAIN in names:
            raise Fail('still listed after undefine')
        return 'start, destroy: shut off (destroyed); undefine'

    def cleanup(self):
        try:
            if self.lv.proc and self.lv.proc.poll() is None:
                self.lv.virsh('destroy', DOMAIN, check=False)
        except (subprocess.TimeoutExpired, OSError):
            pass
        # A QEMU that libvirtd left behind: only ours, by its pid file.
        try:
            pid = self.qemu_pid()
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                if f'guest={DOMAIN}'.encode() in f.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
        self.lv.stop()

    def run(self):
        r = self.report
        try:
            ver = self.lv.start()
        except Fail as e:
            r.line('FAIL', 'libvirt-daemon', str(e))
            return
        print('# ' + ' '.join(ver.split()), flush=True)
        self.unmapped = mapping_support(ver, self.emulator)
        print('# disk 0: ' + ('two queues on two IOThreads' if self.unmapped is None
                              else f'one IOThread ({self.unmapped})'), flush=True)
        steps = [('libvirt-define-start', self.define_start),
                 ('libvirt-emulator', self.emulator_is_fork),
                 ('libvirt-iothreads', self.iothreads),
                 ('libvirt-aio-modes', self.aio_modes),
                 ('libvirt-suspend-domblkstat', self.domblkstat),
                 ('libvirt-queue-status', self.queue_status),
                 ('libvirt-vq-mapping', self.vq_mapping),
                 ('libvirt-queue-stats', self.queue_stats),
                 ('libvirt-resume-shutoff', self.resume_shutoff),
                 ('libvirt-fio-verify', self.fio_verify),
                 ('libvirt-lifecycle', self.lifecycle)]
        t0 = time.time()
        for i, (name, fn) in enumerate(steps):
            try:
                what = fn()
            except Skip as e:
                r.line('SKIP', name, str(e))
                continue
            except (Fail, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
                r.line('FAIL', name, f'{type(e).__name__ + ": " if not isinstance(e, Fail) else ""}{e}')
                print('# not run after that: ' + ', '.join(n for n, _ in steps[i + 1:]))
                tail = self.log().strip().splitlines()[-15:]
                for line in tail:
                    print(f'#   | {line}')
                qlog = os.path.join(self.tmp, 'log', 'qemu', f'{DOMAIN}.log')
                if os.path.exists(qlog):
                    with open(qlog, encoding='utf-8', errors='replace') as f:
                        for line in f.read().strip().splitlines()[-5:]:
                            print(f'#   qemu: {line}')
                return
            r.line('ok', name, f'{what} ({time.time() - t0:.0f}s)')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--emulator', required=True, help='the QEMU binary the domain runs')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    a = ap.parse_args()
    report = Report()
    if not os.access(a.emulator, os.X_OK):
        report.line('FAIL', 'libvirt', f'no emulator {a.emulator}; build it first')
        return report.summary()
    why = ensure_libvirt()
    if why:
        report.line('SKIP', 'libvirt', why)
        return report.summary()
    for tool in ('unshare', 'mount', '/usr/sbin/libvirtd', 'virsh'):
        if not shutil.which(tool):
            report.line('FAIL', 'libvirt', f'{tool} not found')
            return report.summary()
    if os.geteuid() != 0:
        report.line('SKIP', 'libvirt', 'a private system libvirtd needs root')
        return report.summary()
    tmp = tempfile.mkdtemp(prefix='iobatch-libvirt-', dir='/dev/shm')
    t = Test(a.emulator, tmp, report)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        t.run()
    finally:
        t.cleanup()
        if a.keep:
            print(f'# kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return report.summary()


if __name__ == '__main__':
    sys.exit(main())
