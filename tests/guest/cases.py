"""The guest case table.  One entry per case; see docs/guest-tests.md.

The verify workload (guest/workloads/verify.sh): fio verify=crc32c,
verify_fatal=1, block sizes 512 B..256 KiB, two jobs (iodepth 1 and 32),
random reads and writes mixed, a flush every 16 writes; then write-zeroes
(BLKZEROOUT, must read back zero) and discard.
"""

import itertools
import os

from harness import Case, Disk

# -- pairwise: every pair of values of these axes is in at least one case ----
AXES = {
    'aio': ('threads', 'native', 'io_uring'),
    'iothread': (False, True),
    'num_queues': (1, 2),
    'event_idx': (True, False),
    'packed': (False, True),
    'fmt': ('raw', 'qcow2'),
}

#         aio         iothread num_queues event_idx packed fmt
PAIRWISE = [
    ('threads',  False, 1, True,  False, 'raw'),
    ('threads',  True,  2, False, True,  'qcow2'),
    ('native',   False, 1, True,  True,  'qcow2'),
    ('native',   True,  2, False, False, 'raw'),
    ('io_uring', False, 1, False, False, 'qcow2'),
    ('io_uring', True,  2, True,  True,  'raw'),
    ('threads',  False, 2, True,  False, 'raw'),
    ('threads',  True,  1, True,  False, 'raw'),
]


def missing_pairs(axes, rows):
    """Pairs of axis values that no row covers."""
    names = list(axes)
    missing = []
    for i, j in itertools.combinations(range(len(names)), 2):
        for a in axes[names[i]]:
            for b in axes[names[j]]:
                if not any(r[i] == a and r[j] == b for r in rows):
                    missing.append(f'{names[i]}={a} {names[j]}={b}')
    return missing


def pairwise_missing():
    """Pairs of axis values that no row of a pairwise table covers (must be
    empty): the disk axes (PAIRWISE) and the migration axes
    (MIGRATE_PAIRWISE)."""
    return (missing_pairs(AXES, PAIRWISE)
            + [f'migration: {m}' for m in missing_pairs(MIGRATE_AXES, MIGRATE_PAIRWISE)])


def _pw_name(r):
    aio, io, nq, ev, pk, fmt = r
    return (f'pw-{aio}-{"iot" if io else "noiot"}-q{nq}-{"evidx" if ev else "noevidx"}'
            f'-{"packed" if pk else "split"}-{fmt}')


# -- migration with I/O in flight (ops.py, scenario migrate) ------------------
# Every value of every axis, and every pair (MIGRATE_PAIRWISE, in `make
# test`), or every combination (the long cases migrate-full-*), each a
# disk; three disks to a VM, migrated while all three do I/O.
MIGRATE_AXES = {
    'aio': ('threads', 'native', 'io_uring'),
    'iothread': (False, True),
    'event_idx': (True, False),
    'notify': ('first', 'deferred', 'immediate'),
}

#         aio         iothread event_idx notify
MIGRATE_PAIRWISE = [
    ('threads',  True,  True,  'first'),
    ('threads',  False, True,  'deferred'),
    ('threads',  True,  False, 'immediate'),
    ('native',   False, True,  'first'),
    ('native',   True,  False, 'deferred'),
    ('native',   False, True,  'immediate'),
    ('io_uring', True,  False, 'first'),
    ('io_uring', False, False, 'deferred'),
    ('io_uring', True,  True,  'immediate'),
]
# The VMs of make test: one disk of each aio mode in each.
MIGRATE_GROUPS = [(0, 4, 8), (1, 5, 6), (2, 3, 7)]
MIGRATE_MB = 16         # each disk: two regions of 2*MB MiB


def _migrate_case(name, rows, long=False):
    disks = [Disk(aio=aio, iothread=io, num_queues=2, event_idx=ev,
                  props=f'x-notify-batch={pol}', serial=f'mig{k}', size_mb=4 * MIGRATE_MB)
             for k, (aio, io, ev, pol) in enumerate(rows)]
    doc = '; '.join(f'{aio}{" iothread" if io else ""} event_idx={"on" if ev else "off"} {pol}'
                    for aio, io, ev, pol in rows)
    return Case(name, 'rounds', disks,
                env={'DISKS': ' '.join(d.serial for d in disks), 'MB': str(MIGRATE_MB),
                     'CTL': '1'},
                ctl=True, scenario='migrate', scenario_args={'hops': 2}, timeout=300,
                optional='x-notify-batch', long=long,
                doc=f'2 live migrations during verified I/O: {doc}')


def _migrate_debian_case(machine, aio):
    """Live migration between Debian's own qemu-system-x86 (the pinned
    version, from its .deb) and the fork, both ways: a host upgraded to the
    fork, and the rollback.  No fork-only device property: Debian's QEMU
    must accept the same command line."""
    disks = [Disk(aio=aio, iothread=True, num_queues=2, serial='deb0', size_mb=4 * MIGRATE_MB),
             Disk(aio='threads', num_queues=1, serial='deb1', size_mb=4 * MIGRATE_MB)]
    return Case(f'migrate-debian-{machine}', 'rounds', disks,
                env={'DISKS': 'deb0 deb1', 'MB': str(MIGRATE_MB), 'CTL': '1'},
                machine=machine, ctl=True, scenario='migrate', scenario_args={'hops': 2},
                binaries=('debian', 'build'), timeout=300,
                doc=f'-M {machine}: live migration from Debian\'s qemu-system-x86 to the'
                    f' build and back, each during verified I/O ({aio} on an IOThread;'
                    ' threads)')


VERIFY_ENV = {'DEV': '/dev/vda', 'MB': '32', 'ZERO': '1'}
# stop-cont: rounds of the verify workload (io_uring) until the host has
# stopped the VM 4 times, each during a round's writes (ops.sc_stopcont).
STOPCONT_ENV = {'DISKS': 'sc0', 'MB': '16', 'CTL': '1'}

CASES = [
    Case(_pw_name(r), 'verify',
         [Disk(aio=r[0], iothread=r[1], num_queues=r[2], event_idx=r[3], packed=r[4], fmt=r[5])],
         env=dict(VERIFY_ENV, ENGINE='libaio' if i % 2 else 'io_uring'),
         machine='pc' if i % 3 == 2 else 'q35',
         base=i in (1, 5),
         doc='pairwise axes; verify + write-zeroes + discard')
    for i, r in enumerate(PAIRWISE)
] + [
    Case('stop-cont', 'rounds',
         [Disk(aio='native', iothread=True, num_queues=2, serial='sc0')],
         env=STOPCONT_ENV, ctl=True, scenario='stopcont', base=True, timeout=180,
         doc='QMP stop/cont 4x, each while a round of verified writes runs'),

    Case('stop-cont-threads', 'rounds',
         [Disk(aio='threads', iothread=True, num_queues=2, event_idx=False, serial='sc0')],
         env=STOPCONT_ENV, ctl=True, scenario='stopcont', base=True, timeout=180,
         doc='stop-cont on aio=threads: the thread pool completes requests '
             'outside the AioContext lock, every completion notifies'),

    # The fork's notification batching (x-notify-batch): its other policies
    # defer more than the default does, which stop/cont must survive too.
    Case('stop-cont-deferred', 'rounds',
         [Disk(aio='native', iothread=True, num_queues=2, serial='sc0',
               props='x-notify-batch=deferred')],
         env=STOPCONT_ENV, ctl=True, scenario='stopcont', timeout=180,
         needs='x-notify-batch',
         doc='stop-cont with every notification of a batch deferred to its end'),

    Case('stop-cont-first-bounded', 'rounds',
         [Disk(aio='threads', iothread=True, num_queues=2, event_idx=False, serial='sc0',
               props='x-notify-batch=first,x-notify-batch-inflight=2,x-notify-batch-max=4')],
         env=STOPCONT_ENV, ctl=True, scenario='stopcont', timeout=180,
         needs='x-notify-batch',
         doc='stop-cont with the first notification of a batch at once and the '
             'rest checked every 4 completions or when 2 are left in flight'),

    Case('reset', 'reset',
         [Disk(aio='io_uring', iothread=True, num_queues=2)],
         env={'DEV': '/dev/vda', 'ENGINE': 'io_uring'},
         scenario='reset', base=True, timeout=150,
         doc='system_reset during writes; 2nd boot verifies data flushed before it'),

    Case('eio-report', 'eio',
         [Disk(aio='native', iothread=True, werror='report', rerror='report',
               errors=({'event': 'write_aio', 'errno': '5'},
                       {'event': 'read_aio', 'errno': '5', 'sector': '131072'}))],
         env={'DEV': '/dev/vda', 'ENGINE': 'io_uring', 'BAD_SECTOR': '131072',
              'EXPECT_EVENT': 'report'},
         doc='blkdebug EIO with werror/rerror=report: guest sees EIO, no hang'),

    Case('werror-stop', 'verify',
         [Disk(aio='io_uring', iothread=True, werror='stop',
               errors=({'event': 'write_aio', 'errno': '5', 'once': 'on'},))],
         env={'DEV': '/dev/vda', 'MB': '8', 'ENGINE': 'io_uring'},
         scenario='werror-stop', base=True,
         doc='blkdebug once=on write error, werror=stop: paused + BLOCK_IO_ERROR, cont, verifies'),

    Case('poll-queues', 'poll',
         [Disk(aio='native', iothread=True, num_queues=2)],
         env={'DEV': '/dev/vda'}, append='virtio_blk.poll_queues=1', fsync=False,
         base=True,
         doc='virtio_blk.poll_queues=1, io_uring --hipri: verified, no interrupts'),

    Case('dm-linear', 'dm',
         [Disk(aio='native', iothread=True, num_queues=2, size_mb=64),
          Disk(aio='io_uring', iothread=False, num_queues=2, size_mb=64)],
         env={'DM': 'linear'}, append='virtio_blk.poll_queues=1', fsync=False,
         doc='dm-linear over 2 virtio-blk, polled --hipri, verified'),

    Case('dm-stripe', 'dm',
         [Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=64),
          Disk(aio='native', iothread=True, num_queues=2, size_mb=64)],
         env={'DM': 'stripe'}, append='virtio_blk.poll_queues=1', fsync=False,
         doc='dm-stripe over 2 virtio-blk, polled --hipri, verified'),

    Case('virtio-scsi-iothread', 'verify',
         [Disk(bus='virtio-scsi', aio='native', iothread=True, num_queues=2)],
         env={'DEV': '/dev/sda', 'MB': '16', 'ENGINE': 'io_uring', 'ZERO': '1',
              'REQUIRE_WZ': '0'},
         base=True,
         doc='virtio-scsi on an IOThread, verify workload'),

    # Everything at once, for SOAK_SECONDS (run.py --soak-seconds; the
    # documented long run is 3600): four disks on one IOThread, the aio
    # modes mixed, EVENT_IDX on and off, while the host loops through
    # stop/cont, the notification counters, blkdebug errors (werror/rerror
    # stop: the guest sees none), system_reset and the unplug of soak-uring.
    # The timeout is on top of the soak, and is also how long the guest may
    # make no progress (a round takes 7-20 s on 2 loaded cores).
    Case('soak', 'soak',
         [Disk(aio='threads', iothread=True, num_queues=2, event_idx=True, size_mb=64,
               props='serial=soak-threads'),
          Disk(aio='native', iothread=True, num_queues=1, event_idx=False, packed=True,
               fmt='qcow2', size_mb=64, props='serial=soak-native'),
          Disk(aio='io_uring', iothread=True, num_queues=2, event_idx=True, size_mb=64,
               props='serial=soak-uring'),
          Disk(aio='native', iothread=True, num_queues=1, event_idx=False, size_mb=64,
               werror='stop', rerror='stop', errors_switched=True,
               errors=({'event': 'write_aio', 'errno': '5', 'iotype': 'write'},
                       {'event': 'read_aio', 'errno': '5', 'iotype': 'read'}),
               props='serial=soak-err')],
         env={'MB': '8'}, machine='pc', scenario='soak', base=True,
         soak=int(os.environ.get('SOAK_SECONDS', '150')), timeout=150,
         doc='several disks on one IOThread for SOAK_SECONDS: stop/cont, reset, '
             'blkdebug errors, hot-unplug, counters; verified, RSS bounded'),

    Case('hotplug', 'hotplug',
         [Disk(aio='native', iothread=True, num_queues=2)],
         env={'DEV': '/dev/vda', 'ENGINE': 'io_uring'},
         machine='pc', scenario='hotplug', timeout=180,
         doc='device_del/device_add of a virtio-blk disk on an IOThread, I/O before/after'),
]

# -- operations with I/O in flight (ops.py) ------------------------------------
MIGRATE_FULL = list(itertools.product(*MIGRATE_AXES.values()))

# The disks, workload and guest of the migrations with iothread-vq-mapping
MIGRATE_MAPPING = dict(
    disks=[Disk(aio='io_uring', iothread=('io0', 'io1'), num_queues=4, serial='mig0',
                size_mb=4 * MIGRATE_MB),
           Disk(aio='native', iothread=('io1', 'io0'), num_queues=4, packed=True,
                event_idx=False, serial='mig1', size_mb=4 * MIGRATE_MB)],
    env={'DISKS': 'mig0 mig1', 'MB': str(MIGRATE_MB), 'CTL': '1', 'SPLIT_CPUS': '4'},
    smp=4, ctl=True, needs='iothread-vq-mapping')

CASES += [
    _migrate_case(f'migrate-pw{k + 1}', [MIGRATE_PAIRWISE[i] for i in g])
    for k, g in enumerate(MIGRATE_GROUPS)
] + [
    # The long form (--subset long): every combination, three to a VM.
    _migrate_case(f'migrate-full{k + 1:02}', MIGRATE_FULL[3 * k:3 * k + 3], long=True)
    for k in range(len(MIGRATE_FULL) // 3)
] + [
    _migrate_debian_case('pc', 'io_uring'),
    _migrate_debian_case('q35', 'native'),
] + [
    Case('blockjobs', 'rounds',
         [Disk(aio='native', iothread=True, num_queues=2, size_mb=32, serial='job0'),
          Disk(aio='io_uring', num_queues=2, size_mb=32, serial='job1')],
         env={'DISKS': 'job0 job1', 'MB': '8', 'CTL': '1'}, ctl=True,
         scenario='blockjobs', timeout=300,
         doc='blockdev-mirror + job-complete, blockdev-snapshot + block-commit + job-complete'
             ' during verified writes; qemu-img compare at each READY'),

    Case('iothreads', 'rounds',
         [Disk(aio='native', iothread='io0', num_queues=2, size_mb=32, serial='io0a'),
          Disk(aio='io_uring', iothread='io0', num_queues=2, size_mb=32, serial='io0b'),
          Disk(aio='threads', iothread='io1', num_queues=2, size_mb=32, serial='io1a'),
          Disk(aio='io_uring', iothread='io1', num_queues=1, event_idx=False, size_mb=32,
               serial='io1b'),
          Disk(bus='virtio-scsi', aio='native', iothread='io1', num_queues=2, size_mb=32,
               serial='io1scsi')],
         env={'DISKS': 'io0a io0b io1a io1b io1scsi', 'MB': '8', 'ROUNDS': '2'},
         scenario='iothreads', timeout=300,
         doc='two IOThreads with two virtio-blk disks each, and virtio-scsi on one of them:'
             ' all under verified load at once'),

    Case('iothread-vq-mapping', 'rounds',
         [Disk(aio='io_uring', iothread=('io0', 'io1'), num_queues=4, size_mb=32,
               serial='map0'),
          Disk(aio='native', iothread=('io1', 'io0'), num_queues=4, packed=True,
               event_idx=False, size_mb=32, serial='map1')],
         env={'DISKS': 'map0 map1', 'MB': '8', 'ROUNDS': '2', 'SPLIT_CPUS': '4'},
         smp=4, needs='iothread-vq-mapping', scenario='iothreads', timeout=300,
         doc='two disks of 4 queues each spread over two IOThreads (iothread-vq-mapping),'
             ' a fio job pinned to each of 4 vCPUs: every queue used, both IOThreads'
             ' busy, verified'),

    # The trixie line (QEMU 10.0): the operations of issue 33 item 3 on
    # disks whose queues are spread over two IOThreads.
    Case('migrate-mapping', 'rounds',
         **MIGRATE_MAPPING, scenario='migrate',
         scenario_args={'hops': 2}, timeout=300,
         doc='2 live migrations during verified I/O, two disks of 4 queues each over'
             ' two IOThreads (iothread-vq-mapping; split and packed rings)'),

    # The stop's drain against the IOThreads' deferred guest notifier
    # writes (lines/trixie/patches/fixes/0008), made certain: gdb holds
    # each write that comes during a stop for half a second.
    Case('migrate-late-notify', 'rounds',
         **MIGRATE_MAPPING, scenario='migrate',
         scenario_args={'hops': 1}, timeout=300, late_notify=True,
         doc='a live migration during verified I/O (the disks of migrate-mapping) under'
             ' gdb, which holds back every guest notification an IOThread makes during'
             ' the switch-over: none may find the guest notifier torn down'),

    Case('blockjobs-mapping', 'rounds',
         [Disk(aio='native', iothread=('io0', 'io1'), num_queues=4, size_mb=32, serial='job0'),
          Disk(aio='io_uring', iothread=('io1', 'io0'), num_queues=4, size_mb=32,
               serial='job1')],
         env={'DISKS': 'job0 job1', 'MB': '8', 'CTL': '1', 'SPLIT_CPUS': '4'},
         smp=4, ctl=True, needs='iothread-vq-mapping', scenario='blockjobs', timeout=300,
         doc='blockjobs (mirror, snapshot, commit during verified writes) on two disks'
             ' of 4 queues each over two IOThreads (iothread-vq-mapping)'),

    # blockjobs-mapping's machine for one round and nothing else: for
    # --repeat, a boot of that configuration again and again (a rare
    # boot hang and an abort in the MSI-X table under TCG, 2026-12-06:
    # docs/guest-tests.md).
    Case('boot-mapping', 'rounds',
         [Disk(aio='native', iothread=('io0', 'io1'), num_queues=4, size_mb=32, serial='job0'),
          Disk(aio='io_uring', iothread=('io1', 'io0'), num_queues=4, size_mb=32,
               serial='job1')],
         env={'DISKS': 'job0 job1', 'MB': '8', 'CTL': '1', 'SPLIT_CPUS': '4', 'ROUNDS': '1'},
         smp=4, ctl=True, needs='iothread-vq-mapping', timeout=300, long=True,
         doc='blockjobs-mapping\'s machine, one verified round, no operation: to repeat'
             ' its boot (--repeat N)'),

    # Not a virtio case: the TCG that runs every guest case.  A translation
    # of code that another vCPU overwrote, kept after the write, hung a
    # guest's boot (docs/guest-tests.md, "Cross-modifying code").
    Case('smc-race', 'smc', [], env={'ROUNDS': '20000'}, fio=False, timeout=240,
         doc='two vCPUs, one rewriting a function while the other runs it: after the'
             ' writer\'s last store and a cpuid, the new code runs (20000 rounds)'),

    Case('unplug-inflight', 'inflight',
         [Disk(aio='native', iothread=True, num_queues=2, size_mb=64)],
         env={'MODE': 'unplug', 'CYCLES': '4', 'ENGINE': 'io_uring'},
         machine='pc', scenario='unplug-inflight', timeout=240,
         doc='device_del with requests in flight, device_add, 4 times; pattern-verified'),

    Case('reset-storm', 'inflight',
         [Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=64)],
         env={'MODE': 'storm', 'RESETS': '4', 'ENGINE': 'libaio', 'CHUNKS': '16'},
         scenario='reset-storm', timeout=240,
         doc='4 system_resets with requests in flight; pattern-verified at every boot'),

    # The target of the planted lost write of a reset (docs/testing.md):
    # reset-storm with one reset, so that write N falls in boot 1.  Not in
    # make test (its suite planted runs it).
    Case('reset-once', 'inflight',
         [Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=64)],
         env={'MODE': 'storm', 'RESETS': '1', 'ENGINE': 'libaio', 'CHUNKS': '16'},
         scenario='reset-storm', timeout=180, long=True,
         doc='one system_reset with requests in flight: where --drop-write N lands in'
             ' the pass that the reset cuts'),

    # The target of --drop-write for the rounds (docs/testing.md, planted
    # lost writes): four rounds on one disk and nothing else, so that the
    # Nth write falls in a known round; round 3 is the first to rewrite a
    # region.  Not in make test.
    Case('rounds4', 'rounds',
         [Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=32, serial='rd0')],
         env={'DISKS': 'rd0', 'MB': '8', 'ROUNDS': '4'}, timeout=240, long=True,
         doc='4 rounds of the verify workload on one disk, nothing else: where'
             ' --drop-write N lands in a known round'),

    Case('reset-storm-50', 'inflight',
         [Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=64)],
         env={'MODE': 'storm', 'RESETS': '50', 'ENGINE': 'libaio', 'CHUNKS': '16'},
         scenario='reset-storm', timeout=1800, long=True,
         doc='50 system_resets with requests in flight; pattern-verified at every boot'),

    Case('enospc', 'rounds',
         [Disk(aio='native', iothread=True, num_queues=2, size_mb=32, serial='nospc0',
               werror='enospc', rerror='report', small_fs=True),
          Disk(aio='io_uring', iothread=True, num_queues=2, size_mb=32, serial='nospc1',
               werror='enospc', rerror='report', small_fs=True)],
         env={'DISKS': 'nospc0 nospc1', 'MB': '8', 'ROUNDS': '1'},
         small_fs_mb=48, scenario='enospc', scenario_args={'free_mb': 2}, timeout=240,
         doc='images on full tmpfs file systems, werror=enospc: the VM stops, space is freed,'
             ' cont; verified'),

    Case('eio-report-io_uring', 'eio',
         [Disk(aio='io_uring', iothread=True, werror='report', rerror='report',
               errors=({'event': 'write_aio', 'errno': '5'},
                       {'event': 'read_aio', 'errno': '5', 'sector': '131072'}))],
         env={'DEV': '/dev/vda', 'ENGINE': 'io_uring', 'BAD_SECTOR': '131072',
              'EXPECT_EVENT': 'report'},
         doc='eio-report on aio=io_uring: blkdebug EIO under the raw node, guest sees EIO,'
             ' no hang'),
]

assert len({c.name for c in CASES}) == len(CASES), 'duplicate case names'
