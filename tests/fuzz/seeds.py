#!/usr/bin/env python3
"""Write seed inputs for the virtio-blk fuzz targets into DIR/TARGET/.

The targets of tests/qtest/fuzz/virtio_blk_fuzz.c read an input as a list
of actions, each a 5-byte header (queue, length, write, next, kick) and
`length` bytes that become one descriptor's buffer.  Starting from nothing,
libFuzzer needs a long time to build a request the device accepts (a
16-byte header, data in multiples of 512 bytes, a status byte); these seeds
are such requests, one per request type, so that the campaign spends its
time on the completion and notification paths and on variations of valid
requests.  virtio-blk-flags-fuzz and the virtio-blk-iothread-*fuzz targets
read 8 bytes of feature bits first.

generic-fuzz-virtio-blk reads a list of generic-fuzz operations separated
by "FUZZ" (tests/qtest/fuzz/generic_fuzz.c); its seeds write 0 at the
start of each of the device's memory and I/O regions (common and device
configuration, ISR, notify, MSI-X), which reaches every region's handler
and a notify of queue 0 before it is set up.

usage: seeds.py DIR
"""

import os
import struct
import sys

T_IN, T_OUT, T_FLUSH, T_GET_ID, T_DISCARD, T_WRITE_ZEROES = 0, 1, 4, 8, 11, 13
EVENT_IDX = 1 << 29


def action(data, queue=0, write=False, more=False, kick=False):
    return struct.pack('5B', queue, len(data), write, more, kick) + data


def request(rtype, sector, data_len, queue=0, out=False, payload=b''):
    """One request: header, data split into descriptors of at most 255
    bytes (a length is one byte), status; then a kick."""
    b = action(struct.pack('<IIQ', rtype, 0, sector), queue, more=True)
    left = data_len
    while left:
        n = min(left, 255)
        chunk = (payload[:n] if payload else bytes([0xa5]) * n)
        payload = payload[n:]
        b += action(chunk, queue, write=not out, more=True)
        left -= n
    return b + action(b'\xff', queue, write=True, kick=True)


def seeds():
    seg = struct.pack('<QII', 8, 8, 0)      # sector, num_sectors, flags
    return {
        'read': request(T_IN, 0, 512),
        'read-4k': request(T_IN, 64, 4096),
        'write': request(T_OUT, 16, 512, out=True),
        'write-read': request(T_OUT, 32, 512, out=True) +
                      request(T_IN, 32, 512),
        'flush': request(T_FLUSH, 0, 0),
        'get-id': request(T_GET_ID, 0, 20),
        'discard': request(T_DISCARD, 0, len(seg), out=True, payload=seg),
        'write-zeroes': request(T_WRITE_ZEROES, 0, len(seg), out=True,
                                payload=seg),
        'batch': b''.join(request(T_IN, 8 * i, 512) for i in range(8)),
        'two-queues': request(T_IN, 0, 512, queue=0) +
                      request(T_IN, 8, 512, queue=1),
    }


def generic_seeds():
    """generic-fuzz inputs: an MMIO write (op 3: size, region index, offset,
    value) of 4 bytes at offset 0 of each of the first 16 MMIO regions; an
    I/O port write (op 1) of 2 bytes at offsets 0 and 0x10 (the legacy
    queue notify) of each of the first 4 port regions."""
    op_out, op_write, sep = 1, 3, b'FUZZ'
    mmio = [bytes([op_write]) + struct.pack('<BBxxIQ', 2, base, 0, 0)
            for base in range(16)]
    pio = [bytes([op_out]) + struct.pack('<BBHI', 1, base, off, 0)
           for base in range(4) for off in (0, 0x10)]
    return {'poke-mmio': sep.join(mmio), 'poke-pio': sep.join(pio)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    top = sys.argv[1]
    features = {
        'virtio-blk-fuzz': [b''],
        'virtio-blk-flags-fuzz': [struct.pack('<Q', ~0 & (2**64 - 1))],
        # bits left off: none, or EVENT_IDX
        'virtio-blk-iothread-fuzz': [struct.pack('<Q', 0),
                                     struct.pack('<Q', EVENT_IDX)],
    }
    # the same target with its image on tmpfs, aio=native and io_uring
    for aio in ('native', 'io_uring'):
        features[f'virtio-blk-iothread-{aio}-fuzz'] = \
            features['virtio-blk-iothread-fuzz']
    os.makedirs(f'{top}/generic-fuzz-virtio-blk', exist_ok=True)
    for name, body in generic_seeds().items():
        with open(f'{top}/generic-fuzz-virtio-blk/{name}', 'wb') as f:
            f.write(body)
    for target, prefixes in features.items():
        os.makedirs(f'{top}/{target}', exist_ok=True)
        for i, prefix in enumerate(prefixes):
            for name, body in seeds().items():
                with open(f'{top}/{target}/{name}-{i}', 'wb') as f:
                    f.write(prefix + body)


if __name__ == '__main__':
    main()
