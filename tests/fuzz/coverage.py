#!/usr/bin/env python3
"""How much of the virtio-blk path a fuzz corpus reaches.

Replays the corpus of TARGET (build/fuzz/corpus/TARGET by default) once
with libFuzzer's -print_coverage=1 and prints, per source file of the
device path, the edges the corpus covered out of all the edges of the
file's functions, and how many of its functions ran; then the same for
each function of the completion and notification path that the series
changed.  Only what QEMU's fuzzing build instruments is counted: hw/ and
include/hw/ (scripts/oss-fuzz/instrumentation-filter-template), not util/
or block/.

usage: coverage.py TARGET [CORPUS_DIR ...]
"""

import collections
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ['hw/block/virtio-blk.c', 'hw/block/dataplane/virtio-blk.c',
         'hw/virtio/virtio.c', 'hw/virtio/virtio-pci.c']
FUNCS = ['virtio_blk_handle_vq', 'virtio_blk_submit_multireq',
         'virtio_blk_req_complete', 'virtio_blk_data_plane_start',
         'virtio_blk_data_plane_stop', 'virtio_notify_irqfd',
         'virtio_notify_irqfd_batch_end', 'virtio_notify_irqfd_deferred_fn',
         'virtio_notify_irqfd_bh', 'virtio_notify_irqfd_sync',
         'virtio_notify_irqfd_sync_bh', 'virtio_irqfd_should_notify',
         'virtio_error', 'virtqueue_pop', 'virtqueue_flush']


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    target = sys.argv[1]
    dirs = [os.path.abspath(d) for d in sys.argv[2:]] or \
        [f'{TOP}/build/fuzz/corpus/{target}']
    for d in dirs:
        if not os.path.isdir(d):
            sys.exit(f'coverage: error: no corpus {d}; run make fuzz first')
    out = subprocess.run([f'{TOP}/build/fuzz/qemu/qemu-fuzz-i386',
                          f'--fuzz-target={target}', '-runs=0',
                          '-print_coverage=1', *dirs],
                         capture_output=True, text=True, errors='replace',
                         cwd='/tmp', check=False)
    edges = collections.defaultdict(lambda: [0, 0, 0, 0])
    funcs = {}
    pat = re.compile(r'^(COVERED|UNCOVERED)_FUNC: hits: \d+ edges: (\d+)/(\d+) '
                     r'(\S+) .*/src/fork/([^:]+):\d+$')
    for line in (out.stdout + out.stderr).splitlines():
        m = pat.match(line)
        if m and m.group(5) in FILES:
            e = edges[m.group(5)]
            e[0] += int(m.group(2))
            e[1] += int(m.group(3))
            e[2] += m.group(1) == 'COVERED'
            e[3] += 1
            if m.group(4) in FUNCS:
                funcs[m.group(4)] = (int(m.group(2)), int(m.group(3)))
    if not edges:
        sys.exit(f'coverage: error: no coverage printed (exit status '
                 f'{out.returncode}):\n{out.stderr[-2000:]}')
    print(f'| file ({target}) | edges covered | functions reached |')
    print('| --- | --- | --- |')
    for f in FILES:
        if f in edges:
            c, t, fc, ft = edges[f]
            print(f'| {f} | {c}/{t} ({100 * c / t:.0f}%) | {fc}/{ft} |')
    print()
    print(f'| function ({target}) | edges covered |')
    print('| --- | --- |')
    for f in FUNCS:
        if f in funcs:
            print(f'| {f} | {funcs[f][0]}/{funcs[f][1]} |')


if __name__ == '__main__':
    main()
