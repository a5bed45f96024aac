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


def pairwise_missing():
    """Pairs of axis values that no PAIRWISE row covers (must be empty)."""
    names = list(AXES)
    missing = []
    for i, j in itertools.combinations(range(len(names)), 2):
        for a in AXES[names[i]]:
            for b in AXES[names[j]]:
                if not any(r[i] == a and r[j] == b for r in PAIRWISE):
                    missing.append(f'{names[i]}={a} {names[j]}={b}')
    return missing


def _pw_name(r):
    aio, io, nq, ev, pk, fmt = r
    return (f'pw-{aio}-{"iot" if io else "noiot"}-q{nq}-{"evidx" if ev else "noevidx"}'
            f'-{"packed" if pk else "split"}-{fmt}')


VERIFY_ENV = {'DEV': '/dev/vda', 'MB': '32', 'ZERO': '1'}

CASES = [
    Case(_pw_name(r), 'verify',
         [Disk(aio=r[0], iothread=r[1], num_queues=r[2], event_idx=r[3], packed=r[4], fmt=r[5])],
         env=dict(VERIFY_ENV, ENGINE='libaio' if i % 2 else 'io_uring'),
         machine='pc' if i % 3 == 2 else 'q35',
         base=i in (1, 5),
         doc='pairwise axes; verify + write-zeroes + discard')
    for i, r in enumerate(PAIRWISE)
] + [
    Case('stop-cont', 'verify',
         [Disk(aio='native', iothread=True, num_queues=2)],
         env={'DEV': '/dev/vda', 'MB': '48', 'LOOPS': '4', 'ENGINE': 'io_uring'},
         scenario='stopcont', base=True, timeout=180,
         doc='QMP stop/cont 4x during fio; fio completes and verifies'),

    Case('stop-cont-threads', 'verify',
         [Disk(aio='threads', iothread=True, num_queues=2, event_idx=False)],
         env={'DEV': '/dev/vda', 'MB': '48', 'LOOPS': '4', 'ENGINE': 'io_uring'},
         scenario='stopcont', base=True, timeout=180,
         doc='stop-cont on aio=threads: the thread pool completes requests '
             'outside the AioContext lock, every completion notifies'),

    # The fork's notification batching (x-notify-batch): its other policies
    # defer more than the default does, which stop/cont must survive too.
    Case('stop-cont-deferred', 'verify',
         [Disk(aio='native', iothread=True, num_queues=2, props='x-notify-batch=deferred')],
         env={'DEV': '/dev/vda', 'MB': '48', 'LOOPS': '4', 'ENGINE': 'io_uring'},
         scenario='stopcont', timeout=180,
         doc='stop-cont with every notification of a batch deferred to its end'),

    Case('stop-cont-first-bounded', 'verify',
         [Disk(aio='threads', iothread=True, num_queues=2, event_idx=False,
               props='x-notify-batch=first,x-notify-batch-inflight=2,x-notify-batch-max=4')],
         env={'DEV': '/dev/vda', 'MB': '48', 'LOOPS': '4', 'ENGINE': 'io_uring'},
         scenario='stopcont', timeout=180,
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

assert len({c.name for c in CASES}) == len(CASES), 'duplicate case names'
