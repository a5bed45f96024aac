"""Run one guest case: start a QEMU build with a disk configuration and a
workload, drive QMP scenarios, collect the serial log and fio's JSON.

Stdlib only, plus QEMU's own python/qemu package from the build's source
tree.  Every run has a deadline: a lost notification shows up as a hang,
and the case then fails with the tail of the serial log.
"""

import functools
import glob
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Union

import postmortem

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUEST_DIR = os.path.join(ROOT, 'guest')
WORKLOADS = os.path.join(GUEST_DIR, 'workloads')
logging.getLogger('qemu').setLevel(logging.CRITICAL)   # we report failures ourselves
CMDLINE = 'console=ttyS0 clocksource=tsc tsc=reliable quiet panic=-1'
# Where qemu-system-x86_64 and qemu-img are; None: build/BUILD (run.py --bindir).
BINDIR: Optional[str] = None


def firmware_path(serial: str) -> str:
    """Where a VM whose serial log is serial writes its firmware's debug
    output (serial.log: firmware.log, serial-1.log: firmware-1.log)."""
    d, f = os.path.split(serial)
    return os.path.join(d, f.replace('serial', 'firmware', 1))


@functools.lru_cache(maxsize=None)
def debian_qemu() -> str:
    """A qemu-system-x86_64 that runs Debian's own package of the pinned
    version (scripts/debian-qemu.sh fetches it once)."""
    p = subprocess.run([os.path.join(ROOT, 'scripts', 'debian-qemu.sh')],
                       stdout=subprocess.PIPE, text=True, check=False)
    if p.returncode != 0:
        raise CaseFail(f'scripts/debian-qemu.sh failed (rc {p.returncode}): no Debian QEMU'
                       ' to migrate with')
    return p.stdout.strip().splitlines()[-1]


def use_qemu_python(build: str) -> None:
    """Import QEMUMachine from the build's own source tree: build/src/NAME
    for build/NAME, build/LINE/src/NAME for build/LINE/NAME (another line
    than bookworm, e.g. trixie/fork)."""
    line, _, name = build.rpartition('/')
    for tree in (os.path.join(ROOT, 'build', line, 'src', name, 'python'),
                 os.path.join(ROOT, 'build', 'src', 'base', 'python')):
        if os.path.isdir(os.path.join(tree, 'qemu', 'machine')):
            sys.path.insert(0, tree)
            return
    raise SystemExit('no python/qemu under build/src/{fork,base}: run make fetch')


class CaseFail(Exception):
    pass


class LateNotifyFail(CaseFail):
    """A case with late_notify failed in gdb_late_notify's own check: its
    message says what gdb saw already."""


def qmp_call(vm, cmd: str, **args) -> dict:
    """What QMP command cmd returned on vm (the keys of args as given:
    event_idx).  An error reply, or a QEMU that went away (it crashed, or
    refused a migration stream and quit), is a CaseFail with what QEMU
    said last, not a traceback of the harness."""
    try:
        r = vm.qmp(cmd, args_dict=args)
    except Exception as e:  # pylint: disable=broad-except
        # The QMP library's errors differ between QEMU versions'
        # python/qemu: whatever broke the connection, say why.
        if vm.is_running():
            raise CaseFail(f'QMP {cmd}: {type(e).__name__}: {e}') from e
        try:
            vm.shutdown()       # reads what QEMU printed (get_log)
        except Exception:  # pylint: disable=broad-except
            pass
        log = (vm.get_log() or '').strip().splitlines()[-3:]
        raise CaseFail(f'QMP {cmd}: QEMU exited (rc {vm.exitcode()})'
                       + (': ' + ' / '.join(log) if log else '')) from e
    if 'error' in r:
        raise CaseFail(f'QMP {cmd}: {r["error"]}')
    return r['return']


def launch(vm) -> None:
    """Start vm; a QEMU that does not start (a bad option, missing
    firmware) is a CaseFail with what it printed, not a traceback."""
    try:
        vm.launch()
    except Exception as e:  # pylint: disable=broad-except
        out = ' / '.join((vm.get_log() or str(e)).strip().splitlines()[-3:])
        raise CaseFail(f'QEMU did not start: {out}') from e


def queue_inflight(q: dict) -> int:
    """Requests a virtqueue holds (x-query-virtio-queue-status): popped
    and not completed (inuse), and made available by the driver but not
    yet popped (the shadow avail index ahead of last-avail-idx).

    >>> queue_inflight({'inuse': 3, 'shadow-avail-idx': 70, 'last-avail-idx': 70,
    ...                 'vring-num': 256})
    3
    >>> queue_inflight({'inuse': 1, 'shadow-avail-idx': 2, 'last-avail-idx': 65534,
    ...                 'vring-num': 256})
    5
    >>> queue_inflight({'inuse': 0, 'shadow-avail-idx': 3, 'last-avail-idx': 250,
    ...                 'vring-num': 256})
    9
    """
    ahead = (q.get('shadow-avail-idx', 0) - q.get('last-avail-idx', 0)) % 65536
    num = q.get('vring-num') or 65536
    if ahead > num:
        # A packed ring's indices are positions in the ring, which wrap at
        # its size, not at 65536.
        ahead = (q.get('shadow-avail-idx', 0) - q.get('last-avail-idx', 0)) % num
    return q.get('inuse', 0) + ahead


@dataclass
class Disk:
    """One guest disk: a backing image on tmpfs and a virtio device."""
    bus: str = 'virtio-blk'       # virtio-blk | virtio-scsi
    aio: str = 'io_uring'         # threads | native | io_uring
    # True: io0; a string: that IOThread's id; a tuple of ids: the device's
    # virtqueues spread over them (iothread-vq-mapping, QEMU 9.0 and later)
    iothread: Union[bool, str, Tuple[str, ...]] = False
    num_queues: int = 1
    event_idx: bool = True
    packed: bool = False
    fmt: str = 'raw'              # raw (file on /dev/shm) | qcow2
    size_mb: int = 128
    errors: Tuple[Dict[str, str], ...] = ()  # blkdebug inject-error rules
    # False: blkdebug (dbgN) is between the format node dN and the file;
    # True: dbgN sits beside the chain until the scenario switches dN's
    # file to it (blockdev-reopen), and back.
    errors_switched: bool = False
    werror: Optional[str] = None
    rerror: Optional[str] = None
    props: str = ''               # more device properties, e.g. x-notify-batch=deferred
    serial: str = ''              # the device's serial (virtio-blk-pci or scsi-hd)
    # small_fs: the image is alone on a tmpfs of Case.small_fs_mb MiB
    # (Run.small_fs[i]), to run out of space; else on the case's
    # directory on /dev/shm.
    small_fs: bool = False

    @property
    def vq_mapping(self) -> Tuple[str, ...]:
        """The IOThreads of iothread-vq-mapping, or () for none"""
        return self.iothread if isinstance(self.iothread, tuple) else ()

    @property
    def iothread_id(self) -> str:
        """The one IOThread of the device ('' for none or a mapping)"""
        if self.vq_mapping:
            return ''
        return 'io0' if self.iothread is True else str(self.iothread or '')

    @property
    def iothread_ids(self) -> Tuple[str, ...]:
        return self.vq_mapping or ((self.iothread_id,) if self.iothread else ())


@dataclass
class Case:
    """One table entry.  `workload` is guest/workloads/NAME.sh, run with
    `env` set; `scenario` names what the harness does over QMP meanwhile."""
    name: str
    workload: str
    disks: List[Disk]
    env: Dict[str, str] = field(default_factory=dict)
    machine: str = 'q35'
    append: str = ''
    scenario: str = 'none'
    timeout: int = 120
    base: bool = False            # also in the base subset
    long: bool = False            # only in the long subset (documented runs, not make test)
    soak: int = 0                 # scenario soak: seconds of host actions (timeout on top)
    fsync: bool = True            # verify jobs must have issued flushes
    fio: bool = True              # the workload runs fio: its results must be in the log
    mem: str = '1G'
    # A control disk (serial iobatch-ctl, 1 MiB, last) that the host writes
    # (Run.ctl_write) and the guest reads, to tell the guest's rounds to end.
    ctl: bool = False
    small_fs_mb: int = 0          # the size of the tmpfs of each disk with small_fs
    scenario_args: Dict[str, int] = field(default_factory=dict)   # e.g. hops, resets
    doc: str = ''
    smp: int = 2                  # the guest's vCPUs (Linux uses a queue per vCPU at most)
    needs: str = ''               # a virtio-blk-pci property the case needs; without it,
                                  # the case reports a skip with the reason
    # A virtio-blk-pci property the case sets where the build has it;
    # without it, the case runs with that property taken out of every
    # disk's props (upstream's behaviour) and says so.
    optional: str = ''
    # The QEMUs that the case's VMs run, in turn (a migration starts the
    # next): 'build' is the build under test, 'debian' Debian's own
    # qemu-system-x86 of the pinned version (debian_qemu()).  Default:
    # the build only.
    binaries: Tuple[str, ...] = ('build',)
    # Run the build's QEMUs under gdb (gdb_late_notify): hold back every
    # guest notification that an IOThread makes while the VM stops, and
    # fail the case if one finds the guest notifier torn down.
    late_notify: bool = False


def tf(b: bool) -> str:
    return 'on' if b else 'off'


def _statuses(status) -> str:
    """The device status of x-query-virtio-status, e.g. DRIVER_OK."""
    if isinstance(status, dict):
        return ','.join(x.split(':')[0].replace('VIRTIO_CONFIG_S_', '')
                        for x in status.get('statuses', []))
    return str(status)


class Run:
    """A running case: the VM, its serial log, markers, events.  A
    migration (Run.new_vm, ops.py) replaces the VM by another one on the
    same images; each VM has its own serial log, and log() reads them
    all, in order."""

    def __init__(self, case: Case, build: str, guest: str, tmp: str,
                 break_notify: Optional[int], drop_write: Optional[int] = None,
                 drop_min_bytes: int = 0):
        self.case, self.build, self.guest, self.tmp = case, build, guest, tmp
        self.break_notify = break_notify
        self.drop_write = drop_write
        self.drop_min_bytes = drop_min_bytes
        self.serial = os.path.join(tmp, 'serial.log')
        self.serials = [self.serial]
        self.pidfile = os.path.join(tmp, 'qemu.pid')
        self.pidfiles = [self.pidfile]
        self.events: List[dict] = []
        self.deadline = 0.0
        self.soak_end = 0             # scenario soak: when the guest stops its rounds
        self.cleanups: List[Callable[[], None]] = []   # run at the end, last first
        bindir = BINDIR or os.path.join(ROOT, 'build', build)
        self.binary = os.path.join(bindir, 'qemu-system-x86_64')
        self.qemu_img = os.path.join(bindir, 'qemu-img')
        if not os.access(self.binary, os.X_OK):
            raise CaseFail(f'no {self.binary}')
        self.small_fs: Dict[int, str] = {}
        self.cleanups.append(lambda: [umount(p) for p in self.small_fs.values()])
        self.vms: list = []
        self.kinds: List[str] = []    # the binaries of self.vms (Case.binaries)
        try:
            self.images = [self.make_image(i, d) for i, d in enumerate(self.disks())]
            self.workload = self.write_workload()
            self.vm = self.new_vm()
        except BaseException:
            self.cleanups[-1]()     # run_case has no Run to clean up
            raise

    def disks(self) -> List[Disk]:
        """The case's disks, and the control disk last."""
        if not self.case.ctl:
            return self.case.disks
        return self.case.disks + [Disk(aio='threads', size_mb=1, serial='iobatch-ctl')]

    def new_vm(self, incoming: bool = False):
        """A QEMUMachine of the case (not launched yet); with incoming, one
        that waits for a migration (-incoming defer) and logs its serial
        output to a file of its own."""
        from qemu.machine import QEMUMachine  # pylint: disable=import-outside-toplevel
        n = len(self.vms)
        if n:
            self.serials.append(os.path.join(self.tmp, f'serial-{n}.log'))
            self.pidfiles.append(os.path.join(self.tmp, f'qemu-{n}.pid'))
        kind = self.case.binaries[n % len(self.case.binaries)]
        binary = debian_qemu() if kind == 'debian' else self.binary
        wrapper: List[str] = []
        # The planted defects are in the build under test (gdb needs its
        # symbols, which Debian's stripped binary lacks).
        if self.break_notify is not None and kind == 'build':
            wrapper = gdb_wrapper(self.tmp, self.break_notify)
        elif self.drop_write is not None and kind == 'build':
            wrapper = gdb_drop_write(self.tmp, self.drop_write, self.drop_min_bytes)
        elif self.case.late_notify and kind == 'build':
            wrapper = gdb_late_notify(self.tmp)
        vm = QEMUMachine(binary, wrapper=wrapper,
                         name=self.case.name + (f'-{n}' if n else ''),
                         base_temp_dir=self.tmp, log_dir=self.tmp)
        vm.add_args(*self.qemu_args(self.serials[-1], self.pidfiles[-1]))
        if incoming:
            vm.add_args('-incoming', 'defer')
        self.vms.append(vm)
        self.kinds.append(kind)
        return vm

    def write_workload(self) -> str:
        c = self.case
        wl = os.path.join(self.tmp, 'workload.sh')
        with open(wl, 'w', encoding='utf-8') as f:
            for k, v in c.env.items():
                f.write(f'{k}={shlex.quote(str(v))}\n')
            if c.soak:
                # The guest's clock is the host's (the RTC): rounds end there.
                self.soak_end = int(time.time()) + c.soak
                f.write(f'SOAK_END={self.soak_end}\n')
            with open(os.path.join(WORKLOADS, c.workload + '.sh'), encoding='utf-8') as w:
                f.write(w.read())
        return wl

    def qemu_args(self, serial: str, pidfile: str) -> List[str]:
        c = self.case
        args = ['-M', c.machine, '-accel', 'tcg,thread=multi', '-smp', str(c.smp), '-m', c.mem,
                '-nodefaults', '-pidfile', pidfile,
                '-chardev', f'file,id=ser0,path={serial}', '-serial', 'chardev:ser0',
                # SeaBIOS's debug output, for a hang's report (postmortem.py)
                '-chardev', f'file,id=fw0,path={firmware_path(serial)}',
                '-device', 'isa-debugcon,iobase=0x402,chardev=fw0',
                '-kernel', os.path.join(self.guest, 'vmlinuz'),
                '-initrd', os.path.join(self.guest, 'initrd.cpio'),
                '-append', f'{CMDLINE} {c.append}'.strip(),
                '-fw_cfg', f'name=opt/iobatch/workload,file={self.workload}']
        if c.scenario not in ('reset', 'soak', 'reset-storm'):
            args.append('-no-reboot')   # a guest panic ends the run at once
        for io in sorted({io for d in self.disks() for io in d.iothread_ids}):
            args += ['-object', f'iothread,id={io}']
        for i, d in enumerate(self.disks()):
            args += self.disk_args(i, d)
        return args

    def make_image(self, i: int, d: Disk) -> str:
        where = self.tmp
        if d.small_fs:
            where = self.small_fs[i] = mount_small_fs(self.tmp, f'small{i}', self.case.small_fs_mb)
        img = os.path.join(where, f'disk{i}.{d.fmt}')
        if d.fmt == 'qcow2':
            subprocess.run([self.qemu_img, 'create', '-q', '-f', 'qcow2', img,
                            f'{d.size_mb}M'], check=True)
        else:
            with open(img, 'wb') as f:
                f.truncate(d.size_mb << 20)
        return img

    def disk_args(self, i: int, d: Disk) -> List[str]:
        img = self.images[i]
        args = ['-blockdev', f'driver=file,node-name=file{i},filename={img},'
                f'aio={d.aio},cache.direct={tf(d.aio != "threads")}']
        child = f'file{i}'
        if d.errors:
            rules = ''.join(f',inject-error.{n}.{k}={v}'
                            for n, r in enumerate(d.errors) for k, v in r.items())
            args += ['-blockdev', f'driver=blkdebug,node-name=dbg{i},image={child}{rules}']
            if not d.errors_switched:
                child = f'dbg{i}'
        args += ['-blockdev', f'driver={d.fmt},node-name=d{i},file={child}']
        dev = self.device_opts(i, d)
        if d.bus == 'virtio-scsi':
            io = f',iothread={d.iothread_id}' if d.iothread else ''
            props = f',{d.props}' if d.props else ''
            serial = f',serial={d.serial}' if d.serial else ''
            args += ['-device', f'virtio-scsi-pci,id=scsi{i},num_queues={d.num_queues},'
                     f'event_idx={tf(d.event_idx)},packed={tf(d.packed)}{io}{props}',
                     '-device', f'scsi-hd,drive=d{i},bus=scsi{i}.0,id=sd{i}{serial}']
        else:
            args += ['-device', dev]
        return args

    def ctl_write(self, text: str) -> None:
        """Write text into the first sector of the control disk, where the
        guest reads it (O_DIRECT through QEMU, aio=threads without
        O_DIRECT: the host's page cache is what both see)."""
        if not self.case.ctl:
            raise CaseFail('the case has no control disk')
        data = text.encode().ljust(512, b'\0')
        fd = os.open(self.images[-1], os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

    @staticmethod
    def device_opts(i: int, d: Disk) -> str:
        """The device for -device: key=value, or JSON with the mapping"""
        dev = Run.device_dict(i, d)
        if d.vq_mapping:
            return json.dumps(dev)
        return ','.join([str(dev.pop('driver'))] +
                        [f'{k}={tf(v) if isinstance(v, bool) else v}'
                         for k, v in dev.items()])

    @staticmethod
    def device_path(i: int, d: Disk) -> str:
        """The QOM path of disk i's virtio device (the PCI proxy)."""
        return f'/machine/peripheral/{"scsi" if d.bus == "virtio-scsi" else "vd"}{i}'

    @staticmethod
    def device_dict(i: int, d: Disk) -> Dict[str, object]:
        """The device as -device's JSON form or device_add's arguments:
        iothread-vq-mapping, a list, has no key=value form."""
        dev: Dict[str, object] = {'driver': 'virtio-blk-pci', 'id': f'vd{i}',
                                  'drive': f'd{i}', 'num-queues': d.num_queues,
                                  'event_idx': d.event_idx, 'packed': d.packed}
        if d.vq_mapping:
            dev['iothread-vq-mapping'] = [{'iothread': io} for io in d.vq_mapping]
        elif d.iothread:
            dev['iothread'] = d.iothread_id
        for k in ('werror', 'rerror', 'serial'):
            if getattr(d, k):
                dev[k] = getattr(d, k)
        for prop in filter(None, d.props.split(',')):
            k, _, v = prop.partition('=')
            dev[k] = int(v) if v.isdigit() else {'on': True, 'off': False}.get(v, v)
        return dev

    # -- observing the guest ------------------------------------------------
    def log(self) -> str:
        out = []
        for path in self.serials:
            try:
                with open(path, 'rb') as f:
                    out.append(f.read().decode('utf-8', 'replace'))
            except FileNotFoundError:
                pass
        return ''.join(out)

    def poll_events(self) -> None:
        if self.vm.is_running():
            try:
                # A command runs the QMP client's loop, which queues events.
                self.vm.qmp('query-status')
                self.events += self.vm.get_qmp_events(wait=False)
            except Exception:  # pylint: disable=broad-except
                pass

    def wait_marker(self, pattern: str, count: int = 1, timeout: Optional[float] = None) -> re.Match:
        """Wait until the serial log has `count` matches of `pattern`."""
        until = self.deadline if timeout is None else min(self.deadline, time.time() + timeout)
        rx = re.compile(pattern)
        while True:
            text = self.log()
            m = list(rx.finditer(text))
            if len(m) >= count:
                return m[count - 1]
            err = re.search(r'@@ERROR [^\r\n]*', text)
            if err:
                raise CaseFail(f'guest error: {err.group(0)}')
            if not self.vm.is_running():
                raise CaseFail(f'QEMU exited (rc {self.vm.exitcode()}) before /{pattern}/')
            if time.time() > until:
                what = 'timeout' if until == self.deadline else 'gave up'
                raise CaseFail(f'{what} after {self.case.timeout if what == "timeout" else timeout}s'
                               f' waiting for /{pattern}/ (hang? lost notification?)')
            self.poll_events()
            time.sleep(0.2)

    def qmp(self, cmd: str, **args) -> dict:
        r = qmp_call(self.vm, cmd, **args)
        self.poll_events()
        return r

    def event(self, name: str, timeout: float = 30) -> dict:
        for e in self.events:
            if e['event'] == name:
                self.events.remove(e)
                return e
        ev = self.vm.event_wait(name, timeout=min(timeout, max(1, self.deadline - time.time())))
        if ev is None:
            raise CaseFail(f'no {name} event within {timeout}s')
        return ev

    def device_add(self, i: int) -> None:
        """Plug disk i's device back (after device_del) as it was."""
        self.qmp('device_add', **self.device_dict(i, self.case.disks[i]))

    def virtio_state(self) -> str:
        """The device-side state of every virtqueue, for a hang report:
        inuse > 0 means requests the device has not completed; inuse=0 with
        used-idx == signalled-used means it completed them all and decided
        to notify, so the guest lost the interrupt.  driver-event-idx says
        whether the driver negotiated EVENT_IDX: after a reset, a driver
        with VERSION_1 alone that used queue 0 once is the firmware's
        (SeaBIOS reads a sector of each disk and polls for it, no
        interrupt), so a stall there is before Linux probed the disk."""
        if not self.vm.is_running():
            return ''
        out = []
        try:
            for dev in self.vm.qmp('x-query-virtio').get('return', []):
                path = dev['path']
                st = self.vm.qmp('x-query-virtio-status', path=path).get('return', {})
                feats = st.get('guest-features') or {}
                evidx = any('EVENT_IDX' in f for f in feats.get('transports', []))
                for q in range(st.get('num-vqs', 64)):
                    r = self.vm.qmp('x-query-virtio-queue-status', path=path, queue=q)
                    if 'error' in r:
                        break
                    v = r['return']
                    out.append(f'{dev["name"]} {path} isr={st.get("isr")} '
                               f'status={_statuses(st.get("status"))} '
                               f'driver-event-idx={evidx} q{q}: '
                               + ' '.join(f'{k}={v[k]}' for k in sorted(v)
                                          if k not in ('name', 'queue-index')))
        except Exception as e:  # pylint: disable=broad-except
            out.append(f'(virtio state unavailable: {e})')
        return '\n'.join(out)

    def device_inflight(self, vm=None) -> int:
        """Requests that the case's virtio devices hold on vm (default:
        the VM now), over all their queues (queue_inflight); not the
        control disk's."""
        vm = vm or self.vm
        n = 0
        for i, d in enumerate(self.case.disks):
            path = self.device_path(i, d) + '/virtio-backend'
            for q in range(d.num_queues + (2 if d.bus == 'virtio-scsi' else 0)):
                n += queue_inflight(qmp_call(vm, 'x-query-virtio-queue-status',
                                             path=path, queue=q))
        return n

    def postmortem(self) -> str:
        """Where the guest is, for a timeout's report: what the firmware
        printed last, the vCPUs' state and the tail of the kernel's log
        (postmortem.py)."""
        if not self.vm.is_running():
            return ''
        out = []
        fw = postmortem.firmware_log(firmware_path(self.serials[-1]))
        out.append('firmware: ' + ('\n  '.join(fw.splitlines()) if fw else '(nothing)'))

        def pmemsave(addr: int, size: int, path: str) -> None:
            r = self.vm.qmp('pmemsave', val=addr, size=size, filename=path)
            if 'error' in r:
                raise RuntimeError(r['error'].get('desc', r['error']))
        def hmp(cmd: str) -> str:
            return qmp_call(self.vm, 'human-monitor-command', **{'command-line': cmd})
        out.append(postmortem.cpu_samples(hmp))
        out.append(postmortem.lapic_state(hmp, self.case.smp))
        out.append(postmortem.code_at(hmp, self.case.smp))
        out.append(postmortem.kernel_log(pmemsave, self.case.mem, CMDLINE, self.tmp))
        # Again after the log's search (seconds of pmemsave): a log that
        # grew, or moved vCPUs, is a crawl; the same state is a hang.
        out.append(postmortem.cpu_samples(hmp, samples=1, label='vcpus after it'))
        return '\n'.join(out)

    def kill(self) -> None:
        for vm in self.vms:
            try:
                vm.kill()
            except Exception:  # pylint: disable=broad-except
                pass
        # Under the gdb wrapper, QEMU is gdb's child: end it by its own pid.
        for pidfile in self.pidfiles:
            try:
                with open(pidfile, encoding='ascii') as f:
                    pid = int(f.read().strip())
                with open(f'/proc/{pid}/cmdline', 'rb') as f:
                    mine = pidfile.encode() in f.read()   # not a reused pid
                if mine:
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass


INFLIGHT_TIMEOUT = 30        # seconds: an operation that never meets I/O fails


def await_inflight(r: Run, what: str, vm=None) -> int:
    """Poll the case's devices until they hold requests (Run.
    device_inflight) and return how many, for the operation `what` that
    the caller does at once: an operation that met no I/O in flight
    tested nothing (issue 34 item 3), so after INFLIGHT_TIMEOUT seconds
    without any the case fails."""
    until = time.time() + INFLIGHT_TIMEOUT
    while True:
        n = r.device_inflight(vm)
        if n:
            return n
        if time.time() > until:
            raise CaseFail(f'{what}: no request in flight on the devices for'
                           f' {INFLIGHT_TIMEOUT}s: the operation would test nothing')
        time.sleep(0.01)


def mount_small_fs(tmp: str, name: str, size_mb: int) -> str:
    """A tmpfs of size_mb MiB at tmp/name, for an image that must run out
    of space (root only)."""
    if not size_mb:
        raise CaseFail('a disk with small_fs needs the case\'s small_fs_mb')
    path = os.path.join(tmp, name)
    os.mkdir(path)
    p = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size_mb}m', 'iobatch-small', path],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise CaseFail(f'cannot mount a tmpfs of {size_mb} MiB on {path} ({p.stderr.strip()}):'
                       ' this case runs out of space on purpose and needs root')
    return path


def umount(path: str) -> None:
    subprocess.run(['umount', path], check=False, capture_output=True)


def need_gdb(option: str) -> None:
    if not shutil.which('gdb'):
        if os.geteuid() == 0:
            subprocess.run(['apt-get', 'install', '-y', '-q', 'gdb'], check=True,
                           stdout=subprocess.DEVNULL)
        else:
            raise SystemExit(f'{option} needs gdb: apt-get install -y gdb')


def gdb_wrapper(tmp: str, after: int) -> List[str]:
    """Run QEMU under gdb, and make every virtio_notify() and
    virtio_notify_irqfd() after the first `after` return without notifying
    the guest: a deliberately lost notification."""
    need_gdb('--break-notify')
    script = os.path.join(tmp, 'drop-notify.gdb')
    with open(script, 'w', encoding='ascii') as f:
        f.write('set confirm off\nset pagination off\n'
                'handle SIGUSR1 SIGUSR2 SIGPIPE SIGALRM nostop noprint pass\n'
                'set $n = 0\n')
        for fn in ('virtio_notify', 'virtio_notify_irqfd'):
            f.write(f'break {fn} if ($n = $n + 1) > {after}\n'
                    'commands\nsilent\nreturn\ncontinue\nend\n')
        f.write('run\n')
    return ['gdb', '-q', '-nx', '-batch', '-x', script, '--args']


# What gdb prints when it dropped the write (gdb_drop_write).
DROPPED_RE = re.compile(r'iobatch: dropped write (\d+): offset (\d+), (\d+) bytes')


def gdb_drop_write(tmp: str, n: int, min_bytes: int = 0) -> List[str]:
    """Run QEMU under gdb, and make the n-th write that reaches a file
    node (file-posix.c raw_co_pwritev: every aio mode, every image
    format's data and metadata) return success without writing: a
    deliberately lost write, which the guest's verification must see.
    With min_bytes, count only writes of at least that many bytes (a
    512-byte header sector holds no data to lose).  gdb prints DROPPED_RE
    into QEMU's log; the breakpoint is gone after."""
    need_gdb('--drop-write')
    script = os.path.join(tmp, 'drop-write.gdb')
    with open(script, 'w', encoding='ascii') as f:
        f.write('set confirm off\nset pagination off\n'
                'handle SIGUSR1 SIGUSR2 SIGPIPE SIGALRM nostop noprint pass\n'
                'set $w = 0\n'
                f'break file-posix.c:raw_co_pwritev if bytes >= {min_bytes}'
                f' && ($w = $w + 1) == {n}\n'
                'commands\nsilent\n'
                'printf "iobatch: dropped write %d: offset %ld, %ld bytes\\n", $w, offset, bytes\n'
                'disable\nreturn 0\ncontinue\nend\n'
                'run\n')
    return ['gdb', '-q', '-nx', '-batch', '-x', script, '--args']


# What gdb prints for each notification it held back (gdb_late_notify),
# and for one that found the guest notifier torn down when let go.
LATE_RE = re.compile(r'iobatch: late notify (\d+)')
LOST_RE = re.compile(r'iobatch: lost notify (\d+)')
LATE_NOTIFY_S = 0.5


def gdb_late_notify(tmp: str) -> List[str]:
    """Run QEMU under gdb in non-stop mode, and hold every call of
    virtio_notify_irqfd_deferred_fn() (the guest notifier write that an
    IOThread's virtio_notify_irqfd() deferred to the end of its section of
    deferred calls) that comes while the VM is not running, for
    LATE_NOTIFY_S, in its thread only: the rest of QEMU goes on, as if
    the host had preempted the IOThread there.  A stop (vm stop, the
    switch-over of a migration) drains the requests in flight, so such a
    write comes after a drain that already saw its request complete; if
    the stop has torn down the guest notifier by the time the write is
    made, the guest never hears of that completion.  gdb prints LATE_RE
    for every write it held and LOST_RE for one whose notifier was torn
    down by then.  10.0's function (not the bookworm line's, whose
    batching names it otherwise)."""
    need_gdb('late_notify')
    script = os.path.join(tmp, 'late-notify.gdb')
    with open(script, 'w', encoding='ascii') as f:
        f.write(f"""set confirm off
set pagination off
set non-stop on
handle SIGUSR1 SIGUSR2 SIGPIPE SIGALRM nostop noprint pass
break virtio_notify_irqfd_deferred_fn if 'runstate.c'::current_run_state != RUN_STATE_RUNNING
python
import threading
count = {{'late': 0, 'lost': 0}}
def on_stop(ev):
    if not isinstance(ev, gdb.BreakpointEvent):
        return
    thread = ev.inferior_thread
    def resume():
        count['late'] += 1
        gdb.execute('thread %d' % thread.num, to_string=True)
        gdb.write('iobatch: late notify %d\\n' % count['late'])
        if not int(gdb.parse_and_eval('((EventNotifier *) opaque)->initialized')):
            count['lost'] += 1
            gdb.write('iobatch: lost notify %d: the guest notifier was torn down\\n'
                      % count['lost'])
        gdb.execute('continue &')
    threading.Timer({LATE_NOTIFY_S}, lambda: gdb.post_event(resume)).start()
gdb.events.stop.connect(on_stop)
gdb.events.exited.connect(lambda e: gdb.post_event(lambda: gdb.execute('quit')))
end
run
""")
    # Not -batch, and the hold is a timer, not a sleep in a breakpoint's
    # commands: in non-stop mode `run` returns at the first stop, which a
    # batch gdb would end at, and gdb must keep handling events (other
    # threads' stops) while one thread is held.  gdb reads commands from
    # a pipe that stays open (none come) until the shell, which waits for
    # gdb, exits; gdb quits when QEMU has exited.
    return ['sh', '-c', 'tail -f /dev/null --pid=$$ | gdb -q -nx -x "$0" --args "$@"',
            script]


def late_notified(r: 'Run') -> Tuple[int, int]:
    """(held, lost): what gdb_late_notify printed in the logs of the
    case's QEMUs."""
    held = lost = 0
    for _, text in qemu_logs(r):
        held += len(LATE_RE.findall(text))
        lost += len(LOST_RE.findall(text))
    return held, lost


def qemu_logs(r: 'Run') -> List[Tuple[str, str]]:
    """(path, text) of the logs of the case's QEMUs, in order: tmp/NAME.log,
    NAME-1.log ... after a migration; under a gdb wrapper, gdb's output."""
    out = []
    for path in sorted(glob.glob(os.path.join(r.tmp, glob.escape(r.case.name) + '*.log'))):
        with open(path, encoding='utf-8', errors='replace') as f:
            out.append((path, f.read()))
    return out


# -- scenarios: what the harness does while the workload runs -----------------

def sc_none(r: Run) -> None:
    pass


def sc_reset(r: Run) -> None:
    """system_reset during phase-2 writes; the second boot verifies phase 1."""
    r.wait_marker(r'@@MARK phase2-running')
    time.sleep(2)
    if '@@RESULT' in r.log():
        raise CaseFail('phase 2 ended before the reset')
    n = await_inflight(r, 'system_reset')
    r.qmp('system_reset')
    r.event('RESET')
    print(f'# reset: system_reset (in flight: {n})', flush=True)
    r.wait_marker(r'@@BOOT', count=2)
    r.wait_marker(r'@@MARK phase1-verified')


def sc_werror_stop(r: Run) -> None:
    """The injected write error pauses the VM; it stays paused until cont."""
    ev = r.event('BLOCK_IO_ERROR', timeout=r.case.timeout)
    d = ev['data']
    if d.get('action') != 'stop' or d.get('operation') != 'write':
        raise CaseFail(f'unexpected BLOCK_IO_ERROR {d}')
    st = r.qmp('query-status')
    if st['running'] or st['status'] != 'io-error':
        raise CaseFail(f'VM not paused on the error: {st}')
    time.sleep(2)
    st = r.qmp('query-status')
    if st['running'] or '@@FIO-END' in r.log():
        raise CaseFail(f'VM went on while paused on an I/O error: {st}')
    # The blkdebug rule was once=on: the error is gone, the retry succeeds.
    r.qmp('cont')
    r.event('RESUME')


def sc_hotplug(r: Run) -> None:
    """device_del the disk after the first I/O, device_add it back."""
    r.wait_marker(r'@@MARK unplug-me')
    r.qmp('device_del', id='vd0')
    r.event('DEVICE_DELETED', timeout=60)
    r.wait_marker(r'@@MARK unplugged')
    r.device_add(0)
    r.wait_marker(r'@@MARK replugged')


def sc_soak(r: Run) -> None:
    """Everything at once, for a while: see soak.py."""
    import soak  # pylint: disable=import-outside-toplevel
    soak.run(r)


def sc_ops(r: Run) -> None:
    """Operations with I/O in flight: see ops.py."""
    import ops  # pylint: disable=import-outside-toplevel
    ops.SCENARIOS[r.case.scenario](r)


SCENARIOS = {'none': sc_none, 'reset': sc_reset,
             'werror-stop': sc_werror_stop, 'hotplug': sc_hotplug, 'soak': sc_soak}
SCENARIOS.update(dict.fromkeys(('stopcont', 'migrate', 'blockjobs', 'iothreads',
                                'unplug-inflight', 'reset-storm', 'enospc'), sc_ops))


# -- results ----------------------------------------------------------------

def fio_results(log: str) -> List[Tuple[str, dict]]:
    out = []
    # Boot by boot: a result that a reset cut short has no end marker
    # before the next @@BOOT, and is not a result.
    for boot in log.split('@@BOOT'):
        for m in re.finditer(r'@@FIO-BEGIN (\S+)\r?\n(.*?)@@FIO-END \S+ rc=(\d+)', boot, re.S):
            text = m.group(2)
            text = text[text.find('{'):]   # fio may print notes before the JSON
            try:
                out.append((m.group(1), json.loads(text)))
            except ValueError as e:
                raise CaseFail(f'fio {m.group(1)}: bad JSON ({e})') from e
    return out


# A load that the host cuts off (results named cut-*: ops.py's unplug)
# may end with these errors; never with another (EILSEQ: a verify error).
# ENOSPC: a write to a block device whose capacity the guest's driver set
# to 0 as the disk went.  ENOENT: a job that opened the device file after
# the disk went (its node is gone).
CUT_ERRNOS = {2: 'ENOENT', 5: 'EIO', 6: 'ENXIO', 19: 'ENODEV', 28: 'ENOSPC'}

# The writers of the verify workload (guest/lib.sh verify_fio): qd1 and
# qd32, or cpu0, cpu1, ... with SPLIT_CPUS; the reader beside each has
# the writer's name and an r.
VERIFY_WRITER = re.compile(r'qd1|qd32|cpu\d+')


def size_bytes(text: str) -> int:
    """A fio size option ("16M", "512k", "4096") in bytes.

    >>> size_bytes('16M'), size_bytes('512k'), size_bytes('4096')
    (16777216, 524288, 4096)
    """
    m = re.fullmatch(r'(\d+)([kKmMgG]?)i?[bB]?', text.strip())
    if not m:
        raise ValueError(f'not a fio size: {text!r}')
    return int(m.group(1)) << {'': 0, 'k': 10, 'm': 20, 'g': 30}[m.group(2).lower()]


def check_fio(case: Case, results: List[Tuple[str, dict]]) -> None:
    if not results:
        raise CaseFail('no fio results in the serial log')
    for name, res in results:
        jobs = {j['jobname']: j for j in res['jobs']}
        for j in res['jobs']:
            jn = f'{name}/{j["jobname"]}'
            cut = name.startswith('cut-')
            if j['error'] and not (cut and j['error'] in CUT_ERRNOS):
                raise CaseFail(f'fio {jn}: error {j["error"]}')
            if j['read']['io_bytes'] + j['write']['io_bytes'] == 0 and not cut:
                # A job of a cut load may have started after the cut.
                raise CaseFail(f'fio {jn}: no I/O')
            if VERIFY_WRITER.fullmatch(j['jobname']):
                check_verify_job(case, name, jn, j, jobs.get(j['jobname'] + 'r'))
            if j['jobname'] == 'qd32' and j['job options'].get('iodepth', '32') == '32':
                lv = j.get('iodepth_level', {})
                if not any(float(v) > 0 for k, v in lv.items() if k != '1'):
                    raise CaseFail(f'fio {jn}: never more than one I/O in flight')


def check_verify_job(case: Case, name: str, jn: str, j: dict, reader: Optional[dict]) -> None:
    """A writer of the verify workload (guest/lib.sh verify_fio): it wrote
    every block of its half once (a pass with data of its own, so the half
    holds that pass as a whole) and verified all it wrote; beside it, its
    reader read.  As --verify_only, it verified the whole half."""
    size = size_bytes(j['job options'].get('size', '0'))
    rd, wr = j['read']['io_bytes'], j['write']['io_bytes']
    if name.startswith('verifyonly-'):
        if size and rd != size:
            raise CaseFail(f'fio {jn}: verified {rd} of the {size} bytes of its half')
        return
    if size and wr != size:
        raise CaseFail(f'fio {jn}: wrote {wr} bytes, not its half ({size}) once')
    if rd != wr:
        raise CaseFail(f'fio {jn}: verified {rd} of the {wr} bytes it wrote')
    if not reader or not reader['read']['io_bytes']:
        raise CaseFail(f'fio {jn}: no reads beside the writes (its reader'
                       f' {j["jobname"]}r)')
    if case.fsync and not j.get('sync', {}).get('total_ios'):
        raise CaseFail(f'fio {jn}: no flushes')


def missing_property(prop: str, build: str) -> Optional[str]:
    """Why a case that needs virtio-blk-pci's property @prop cannot run on
    @build's QEMU, or None if it can"""
    return binary_missing_property(
        os.path.join(BINDIR or os.path.join(ROOT, 'build', build), 'qemu-system-x86_64'), prop)


@functools.lru_cache(maxsize=None)
def binary_missing_property(binary: str, prop: str) -> Optional[str]:
    """Why QEMU @binary's virtio-blk-pci has no property @prop, or None
    (asked once per binary and property: run.py asks for every case)"""
    out = subprocess.run([binary, '-device', 'virtio-blk-pci,help'],
                         capture_output=True, text=True, check=True).stdout
    if re.search(rf'^\s*{re.escape(prop)}=', out, re.M):
        return None
    return f'this QEMU\'s virtio-blk-pci has no {prop}'


def has_queue_stats(r: 'Run') -> bool:
    """Whether @r's QEMU has x-query-virtio-queue-stats, which the fork of
    either line must have (build/fork, build/trixie/fork); the bases and
    Debian's QEMU have not"""
    if 'x-query-virtio-queue-stats' in {c['name'] for c in r.qmp('query-commands')}:
        return True
    if r.build == 'fork' or r.build.endswith('/fork'):
        raise CaseFail(f'the fork ({r.build}) has no x-query-virtio-queue-stats')
    return False


def without_property(props: str, prop: str) -> str:
    """@props (a disk's -device options) without property @prop

    >>> without_property('x-notify-batch=first,serial=a', 'x-notify-batch')
    'serial=a'
    >>> without_property('x-notify-batch-max=4', 'x-notify-batch')
    'x-notify-batch-max=4'
    """
    return ','.join(p for p in props.split(',') if p and p.split('=')[0] != prop)


def dropped(r: 'Run') -> str:
    """What --drop-write did, from gdb's output in the logs of the case's
    QEMUs (tmp/NAME.log, NAME-1.log ... after a migration: each QEMU
    counts its own writes)."""
    found = []
    for path, text in qemu_logs(r):
        found += [f'dropped write {m.group(1)}: offset {m.group(2)}, {m.group(3)} bytes'
                  + (f' ({os.path.basename(path)})' if len(r.vms) > 1 else '')
                  for m in DROPPED_RE.finditer(text)]
    return '; '.join(found) or f'no write dropped: fewer than {r.drop_write} writes'


def run_case(case: Case, build: str, guest: str, break_notify: Optional[int] = None,
             keep: bool = False, drop_write: Optional[int] = None,
             drop_min_bytes: int = 0) -> Tuple[bool, str, float]:
    """Returns (ok, reason, seconds).  With drop_write, the reason says
    which write gdb dropped (gdb_drop_write), also when the case passed:
    then the case did not see it."""
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix=f'iobatch-guest-{case.name}-', dir='/dev/shm')
    r = None
    try:
        r = Run(case, build, guest, tmp, break_notify, drop_write, drop_min_bytes)
        r.deadline = time.time() + case.soak + case.timeout
        launch(r.vm)
        if break_notify is not None and r.kinds[0] == 'build':
            time.sleep(2)
            with open(os.path.join(tmp, case.name + '.log'), encoding='utf-8') as f:
                glog = f.read()
            if 'not defined' in glog or glog.count('Breakpoint ') < 2:
                raise CaseFail('--break-notify: gdb did not set both breakpoints')
        if (drop_write is not None or case.late_notify) and r.kinds[0] == 'build':
            # gdb reads QEMU's symbols first (seconds on a loaded machine).
            until = time.time() + 60
            while True:
                with open(os.path.join(tmp, case.name + '.log'), encoding='utf-8',
                          errors='replace') as f:
                    glog = f.read()
                if 'Breakpoint 1 at' in glog or time.time() > until or 'rror' in glog:
                    break
                time.sleep(0.5)
            if 'Breakpoint 1 at' not in glog:
                fail = CaseFail if drop_write is not None else LateNotifyFail
                raise fail(('--drop-write' if drop_write is not None else 'late_notify')
                           + f': gdb did not set its breakpoint ({glog.strip()[-300:]})')
        SCENARIOS[case.scenario](r)
        m = r.wait_marker(r'@@RESULT rc=(\d+)')
        err = re.search(r'@@ERROR [^\r\n]*', r.log())
        if err:
            raise CaseFail(f'guest error: {err.group(0)}')
        if m.group(1) != '0':
            raise CaseFail(f'workload exited {m.group(1)}')
        r.poll_events()
        if case.env.get('EXPECT_EVENT'):
            want = case.env['EXPECT_EVENT']
            if not any(e['event'] == 'BLOCK_IO_ERROR' and e['data'].get('action') == want
                       for e in r.events):
                raise CaseFail(f'no BLOCK_IO_ERROR event with action {want}')
        until = max(r.deadline, time.time() + 10)
        while r.vm.is_running() and time.time() < until:
            time.sleep(0.2)
        if r.vm.is_running():
            raise CaseFail('QEMU did not exit after the guest powered off')
        if r.vm.exitcode() != 0:
            raise CaseFail(f'QEMU exited with {r.vm.exitcode()}')
        if case.fio:
            check_fio(case, fio_results(r.log()))
        if case.late_notify:
            held, lost = late_notified(r)
            if lost:
                raise LateNotifyFail(f'{lost} of {held} guest notifications held back during'
                                     ' a stop found the guest notifier torn down (lost'
                                     ' interrupts)')
            if not held:
                raise LateNotifyFail('late_notify: no guest notification came during a stop,'
                                     ' nothing was checked')
            return True, f'gdb held {held} guest notifications during stops, none lost', \
                time.time() - t0
        return True, dropped(r) if drop_write is not None else '', time.time() - t0
    except CaseFail as e:
        tail = ''
        if r is not None:
            timed_out = 'timeout' in str(e)
            state = r.virtio_state() if timed_out else ''
            where = r.postmortem() if timed_out else ''
            if timed_out and '@@BOOT' not in r.log():
                # The first thing /init prints: before it, the guest's
                # drivers have not touched the disks (what the device
                # state shows is the firmware's, which polls).
                state = ('the guest did not reach /init (no @@BOOT): a kernel '
                         'boot that hung or crawled, not a lost notification\n'
                         + state)
            r.kill()
            if drop_write is not None:
                e = CaseFail(f'{e} [{dropped(r)}]')
            if case.late_notify and not isinstance(e, LateNotifyFail):
                held, lost = late_notified(r)
                e = CaseFail(f'{e} [gdb held {held} guest notifications during stops,'
                             f' {lost} of them found the guest notifier torn down]')
            tail = '\n'.join('    | ' + l for l in r.log().splitlines()[-25:])
            qlog = (r.vm.get_log() or '').strip()
            if qlog:
                tail += '\n    qemu: ' + '\n    qemu: '.join(qlog.splitlines()[-10:])
            if state:
                tail += '\n    virtio: ' + '\n    virtio: '.join(state.splitlines())
            if where:
                tail += '\n    guest: ' + '\n    guest: '.join(where.splitlines())
        return False, f'{e}\n{tail}', time.time() - t0
    finally:
        if r is not None:
            r.kill()
            for fn in reversed(r.cleanups):
                fn()
        if keep:
            print(f'# kept {tmp}', flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def build_guest() -> str:
    p = subprocess.run([os.path.join(GUEST_DIR, 'build-guest.sh')], stdout=subprocess.PIPE,
                       check=False, text=True)
    if p.returncode != 0:
        raise SystemExit(f'guest/build-guest.sh failed (rc {p.returncode})')
    return p.stdout.strip().splitlines()[-1]
