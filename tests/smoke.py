#!/usr/bin/env python3
"""Smoke job for one build of the fork (default: build/fork).

1. qemu-system-x86_64 -M pc and -M q35 start with their default devices and
   print no error or warning (firmware and option ROMs are found).
2. In each aio mode, a virtio-blk-pci disk on an IOThread (raw file,
   O_DIRECT) is written through the device's own BlockBackend with
   patterns at several offsets, read back and verified inside QEMU; after
   QEMU exits, the image file is compared byte by byte on the host.

Prints one line per check and "N passed, N failed" at the end.
"""

import os
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (offset, length, pattern byte) written in this order; later ones overlap.
WRITES = [(0, 1 << 20, 0x5a), (3 << 20, 64 << 10, 0xa5),
          (3 << 20 | 4096, 4096, 0x11), ((64 << 20) - 512, 512, 0xc3)]
# What each region holds after WRITES: read back and verified in QEMU.
READS = [(0, 1 << 20, 0x5a), (3 << 20, 4096, 0xa5), (3 << 20 | 4096, 4096, 0x11),
         (3 << 20 | 8192, 56 << 10, 0xa5), ((64 << 20) - 512, 512, 0xc3),
         (1 << 20, 2 << 20, 0)]
IMAGE_SIZE = 64 << 20


def src_dir(build):
    with open(f'{build}/config-host.mak', encoding='utf-8') as f:
        for line in f:
            if line.startswith('SRC_PATH='):
                return line.split('=', 1)[1].strip()
    sys.exit(f'smoke: {build}/config-host.mak has no SRC_PATH')


def machine(build, args, tmp):
    # pylint: disable=import-outside-toplevel
    sys.path.insert(0, os.path.join(src_dir(build), 'python'))
    from qemu.machine import QEMUMachine
    return QEMUMachine(f'{build}/qemu-system-x86_64', args=args,
                       base_temp_dir=tmp)


def check_firmware(build, tmp, mtype):
    vm = machine(build, ['-M', mtype, '-accel', 'tcg', '-display', 'none',
                         '-S'], tmp)
    vm.set_qmp_monitor(True)
    vm.launch()
    vm.shutdown()
    out = vm.get_log().strip()
    if out:
        return f'-M {mtype} printed: {out}'
    return None


def qemu_io(vm, qdev, cmd):
    """Run a qemu-io command on the BlockBackend of device qdev (HMP)."""
    r = vm.qmp('human-monitor-command',
               **{'command-line': f'qemu-io -d {qdev} "{cmd}"'})
    if 'return' not in r or r['return']:
        raise RuntimeError(f'qemu-io {cmd}: {r}')


def check_disk(build, tmp, aio):
    img = os.path.join(tmp, f'disk-{aio}.img')
    with open(img, 'wb') as f:
        f.truncate(IMAGE_SIZE)
    vm = machine(build, [
        '-M', 'q35', '-accel', 'qtest', '-nodefaults', '-display', 'none',
        '-object', 'iothread,id=io0',
        '-blockdev', f'driver=file,filename={img},node-name=file0,'
                     f'cache.direct=on,aio={aio}',
        '-blockdev', 'raw,file=file0,node-name=disk0',
        '-device', 'virtio-blk-pci,drive=disk0,iothread=io0,id=vblk0'], tmp)
    vm.launch()
    try:
        dev = 'vblk0/virtio-backend'
        for off, length, pat in WRITES:
            qemu_io(vm, dev, f'write -P {pat:#x} {off} {length}')
        for off, length, pat in READS:
            qemu_io(vm, dev, f'read -P {pat:#x} {off} {length}')
        qemu_io(vm, dev, 'flush')
    finally:
        vm.shutdown()
    log = vm.get_log()
    if 'verification failed' in log or 'error' in log.lower():
        return f'aio={aio}: QEMU reported: {log.strip()}'
    if log.count('wrote ') != len(WRITES) or log.count('read ') != len(READS):
        return f'aio={aio}: not every request completed: {log.strip()}'
    expect = bytearray(IMAGE_SIZE)
    for off, length, pat in WRITES:
        expect[off:off + length] = bytes([pat]) * length
    with open(img, 'rb') as f:
        data = f.read()
    if data != expect:
        bad = next(i for i in range(IMAGE_SIZE) if data[i] != expect[i])
        return f'aio={aio}: image differs from what was written at byte {bad}'
    return None


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                            else f'{TOP}/build/fork')
    if not os.path.exists(f'{build}/qemu-system-x86_64'):
        sys.exit(f'smoke: no qemu-system-x86_64 in {build}; run make first')
    checks = [(f'firmware -M {m}', check_firmware, m) for m in ('pc', 'q35')]
    checks += [(f'virtio-blk on an IOThread, aio={a}', check_disk, a)
               for a in ('threads', 'native', 'io_uring')]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix='iobatch_smoke_',
                                     dir='/dev/shm') as tmp:
        for name, fn, arg in checks:
            try:
                err = fn(build, tmp, arg)
            except Exception as e:  # pylint: disable=broad-except
                err = f'{type(e).__name__}: {e}'
            if err:
                failed += 1
                print(f'FAIL {name}: {err}', flush=True)
            else:
                passed += 1
                print(f'ok   {name}', flush=True)
    print(f'{passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
