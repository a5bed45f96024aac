#!/usr/bin/env python3
"""Syscalls per guest request, base against fork, measured side by side.

A TCG guest (the built-in guest of tests/guest) runs fio 4 KiB random reads
on a virtio-blk disk on one IOThread, backed by a raw file on tmpfs with
O_DIRECT.  QEMU runs under `strace -f -ff`, one trace file per thread.  For
the window in which fio runs, the script counts per thread:

  submissions    io_submit(2) / io_uring_enter(2)      any thread
  notifications  write(2) by the IOThread               (guest notifier
                 eventfd writes; the vCPU threads' writes are the guest's
                 doorbell and are not counted)

and divides by the requests the device completed in that window
(query-blockstats).  Builds run in turn (A B A B ...), the medians of the
repetitions are reported.  strace slows QEMU down and shifts batching, so
these are counts, not timings.

    python3 bench/syscalls.py [--reps 3] [--qd 1 32] [--aio native io_uring]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'guest'))
import harness  # noqa: E402  pylint: disable=wrong-import-position

WORKLOAD = '''
DEV=/dev/vda
wait_dev $DEV
# warm up, then the measured run between the markers
fio --eta=never --output=/dev/null --name=warm --filename=$DEV --direct=1 \\
    --ioengine=libaio --rw=randread --bs=4k --iodepth={qd} --size=64M \\
    --runtime=2 --time_based=1
mark go
fio_json randread --name=randread --filename=$DEV --direct=1 \\
    --ioengine=libaio --rw=randread --bs=4k --iodepth={qd} --size=64M \\
    --runtime={secs} --time_based=1
mark done
sleep 30   # the host reads its counters now, then quits QEMU
'''
SUBMIT = ('io_submit', 'io_uring_enter')


def trace_counts(prefix, tids):
    """{tid: {syscall: count}} of the per-thread strace files so far."""
    out = {}
    for tid in tids:
        counts = {}
        try:
            with open(f'{prefix}.{tid}', encoding='utf-8', errors='replace') as f:
                for line in f:
                    # "<... write resumed>" continues a call counted already
                    m = re.match(r'(\w+)\(', line)
                    if m:
                        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        except FileNotFoundError:
            pass
        out[tid] = counts
    return out


def threads(pid):
    names = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/comm', encoding='utf-8') as f:
                names[int(tid)] = f.read().strip()
        except OSError:
            pass
    return names


def wait_serial(path, marker, deadline):
    while time.time() < deadline:
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
        except FileNotFoundError:
            text = ''
        if marker in text:
            return text
        if '@@ERROR' in text:
            raise RuntimeError('guest error: ' +
                               re.search(r'@@ERROR.*', text).group(0))
        time.sleep(0.2)
    raise RuntimeError(f'timeout waiting for {marker}')


def requests_done(vm):
    for dev in vm.qmp('query-blockstats')['return']:
        if dev.get('qdev', '').startswith('/machine/peripheral/vd0') or \
                dev.get('node-name') == 'd0':
            s = dev['stats']
            return s['rd_operations'] + s['wr_operations']
    raise RuntimeError('no blockstats for the disk')


def thread_cpu(pid, names):
    """{thread group: CPU seconds} from /proc/PID/task/*/schedstat."""
    out = {}
    for tid, name in names.items():
        try:
            with open(f'/proc/{pid}/task/{tid}/schedstat', encoding='ascii') as f:
                ns = int(f.read().split()[0])
        except OSError:
            continue
        group = ('main' if tid == pid else 'IOThread' if name.startswith('IO ')
                 else 'vCPU' if name.startswith('CPU ') else 'worker' if name == 'worker'
                 else 'other')
        out[group] = out.get(group, 0) + ns / 1e9
    return out


def one_run(build, aio, qd, secs, guest, tmp, event_idx=True, trace=True,
            device_props=''):
    """One guest fio run.  With trace, QEMU runs under strace and the
    syscall counts are returned; without, the timings (IOPS, latency, CPU
    per request of each QEMU thread group).  device_props: extra
    comma-separated virtio-blk-pci properties."""
    harness.use_qemu_python(build)
    from qemu.machine import QEMUMachine  # pylint: disable=import-outside-toplevel
    img = os.path.join(tmp, 'disk.img')
    with open(img, 'wb') as f:
        f.truncate(256 << 20)
    wl = os.path.join(tmp, 'workload.sh')
    with open(wl, 'w', encoding='utf-8') as f:
        f.write(WORKLOAD.format(qd=qd, secs=secs))
    serial = os.path.join(tmp, 'serial.log')
    prefix = os.path.join(tmp, 'strace')
    direct = 'off' if aio == 'threads' else 'on'
    vm = QEMUMachine(
        os.path.join(ROOT, 'build', build, 'qemu-system-x86_64'),
        wrapper=['strace', '-f', '-ff', '-qq', '-o', prefix,
                 '-e', 'trace=io_submit,io_uring_enter,write'] if trace else [],
        base_temp_dir=tmp,
        args=['-M', 'q35', '-accel', 'tcg,thread=multi', '-smp', '2',
              '-name', 'bench,debug-threads=on',
              '-m', '1G', '-nodefaults', '-no-reboot',
              '-chardev', f'file,id=ser0,path={serial}', '-serial', 'chardev:ser0',
              '-kernel', os.path.join(guest, 'vmlinuz'),
              '-initrd', os.path.join(guest, 'initrd.cpio'),
              '-append', harness.CMDLINE,
              '-fw_cfg', f'name=opt/iobatch/workload,file={wl}',
              '-object', 'iothread,id=io0',
              '-blockdev', f'driver=file,node-name=f0,filename={img},'
                           f'aio={aio},cache.direct={direct}',
              '-blockdev', 'driver=raw,node-name=d0,file=f0',
              '-device', 'virtio-blk-pci,id=vd0,drive=d0,iothread=io0,'
                         f'event_idx={"on" if event_idx else "off"}'
                         + (f',{device_props}' if device_props else '')])
    vm.launch()
    try:
        deadline = time.time() + 180 + secs
        wait_serial(serial, '@@MARK go', deadline)
        pid = vm.get_pid()
        # under strace, QEMU is strace's child
        kids = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True,
                              text=True, check=False).stdout.split()
        qpid = int(kids[0]) if kids else pid
        names = threads(qpid)
        before = trace_counts(prefix, names) if trace else {}
        cpu0 = thread_cpu(qpid, names)
        req0 = requests_done(vm)
        text = wait_serial(serial, '@@MARK done', deadline)
        after = trace_counts(prefix, names) if trace else {}
        cpu1 = thread_cpu(qpid, names)
        req1 = requests_done(vm)
        vm.shutdown(timeout=30)
    finally:
        if vm.is_running():
            vm.kill()
    m = re.search(r'@@FIO-BEGIN randread\r?\n(.*?)@@FIO-END', text, re.S)
    fio = json.loads(m.group(1)[m.group(1).find('{'):])
    job = fio['jobs'][0]['read']
    iops = job['iops']
    nreq = req1 - req0
    if not trace:
        pct = job['clat_ns']['percentile']
        r = {'requests': nreq, 'iops': iops,
             'p50_us': pct['50.000000'] / 1e3, 'p99_us': pct['99.000000'] / 1e3}
        for g in cpu1:
            r[f'{g}_us_per_req'] = (cpu1[g] - cpu0.get(g, 0)) * 1e6 / nreq
        r['qemu_us_per_req'] = (sum(cpu1.values()) - sum(cpu0.values())) * 1e6 / nreq
        return r
    subs = sum(after[t].get(s, 0) - before[t].get(s, 0)
               for t in names for s in SUBMIT)
    iot = [t for t, n in names.items() if n.startswith('IO io0')]
    notif = sum(after[t].get('write', 0) - before[t].get('write', 0)
                for t in iot)
    return {'requests': nreq, 'iops': iops,
            'submissions_per_req': subs / nreq,
            'notifications_per_req': notif / nreq}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--qd', type=int, nargs='+', default=[1, 32])
    ap.add_argument('--aio', nargs='+', default=['native', 'io_uring'])
    ap.add_argument('--secs', type=int, default=8)
    ap.add_argument('--builds', nargs='+', default=['base', 'fork'])
    ap.add_argument('--event-idx', choices=['on', 'off'], default='on',
                    help='the device\'s event_idx property (default: on)')
    ap.add_argument('--json', help='write all runs here')
    a = ap.parse_args()
    if not subprocess.run(['which', 'strace'], capture_output=True,
                          check=False).returncode == 0:
        sys.exit('syscalls.py needs strace: apt-get install -y strace')
    guest = harness.build_guest()
    runs = []
    for aio in a.aio:
        for qd in a.qd:
            for rep in range(a.reps):
                for build in a.builds:
                    with tempfile.TemporaryDirectory(prefix='iobatch-sc-',
                                                     dir='/dev/shm') as tmp:
                        r = one_run(build, aio, qd, a.secs, guest, tmp,
                                    a.event_idx == 'on')
                    r.update(build=build, aio=aio, qd=qd, rep=rep,
                             event_idx=a.event_idx)
                    runs.append(r)
                    print(json.dumps(r), flush=True)
    if a.json:
        with open(a.json, 'w', encoding='utf-8') as f:
            json.dump(runs, f, indent=1)
    print()
    print('| aio | iodepth | build | submissions/req | notifications/req '
          '| IOPS (under strace) |')
    print('|---|---|---|---|---|---|')
    for aio in a.aio:
        for qd in a.qd:
            for build in a.builds:
                rs = [r for r in runs if r['build'] == build and
                      r['aio'] == aio and r['qd'] == qd]
                med = {k: statistics.median(r[k] for r in rs) for k in
                       ('submissions_per_req', 'notifications_per_req', 'iops')}
                print(f'| {aio} | {qd} | {build} | '
                      f'{med["submissions_per_req"]:.2f} | '
                      f'{med["notifications_per_req"]:.2f} | '
                      f'{med["iops"]:.0f} |')


if __name__ == '__main__':
    main()
