"""Unit tests of tests/guest/postmortem.py: a hang report finds the guest
kernel's log in guest RAM by its content, wherever KASLR put it.

    python3 -m unittest tests/test_postmortem.py
"""

import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'guest'))
import postmortem  # noqa: E402  pylint: disable=wrong-import-position

CMDLINE = b'console=ttyS0 clocksource=tsc tsc=reliable quiet panic=-1'


def ring(texts, first_id=0xfffffffffffffc00):
    """A printk text ring's data blocks: a little-endian long id, the text,
    padding to a long."""
    out = b''
    for n, t in enumerate(texts):
        blk = struct.pack('<Q', (first_id + n) & 0xffffffffffffffff) + t
        out += blk + b'\0' * (-len(blk) % 8)
    return out


def boot_log(last):
    return ring([b'Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org)',
                 b'Command line: ' + CMDLINE,
                 b'x86/fpu: x87 FPU will use FXSAVE',
                 b'BIOS-provided physical RAM map:',
                 last])


class FakeRam:
    """Guest RAM of `size` bytes with blobs at given addresses; pmemsave
    as QEMU does it, into a file."""

    def __init__(self, size, blobs):
        self.ram = bytearray(size)
        for addr, blob in blobs:
            self.ram[addr:addr + len(blob)] = blob
        self.calls = 0

    def pmemsave(self, addr, size, path):
        self.calls += 1
        if addr + size > len(self.ram):
            raise RuntimeError('Invalid parameter')
        with open(path, 'wb') as f:
            f.write(self.ram[addr:addr + size])


class TestKernelLog(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        for f in os.listdir(self.tmp):
            os.unlink(os.path.join(self.tmp, f))
        os.rmdir(self.tmp)

    # Small: 1 MiB chunks from 1 MiB on, in a few MiB of RAM.
    def log(self, ram, mem='8M'):
        return postmortem.kernel_log(ram.pmemsave, mem, 'tsc=reliable', self.tmp,
                                     start=1 << 20, chunk=1 << 20)

    def test_found_where_kaslr_put_it(self):
        ram = FakeRam(8 << 20, [(0x63c5000 >> 4, boot_log(b'virtio_blk virtio1: [vda] 8192 512-byte'))])
        out = self.log(ram)
        self.assertIn('kernel log at 0x63c508', out)
        self.assertIn('virtio_blk virtio1: [vda]', out)
        self.assertIn('Command line: console=ttyS0', out)

    def test_across_a_chunk_boundary(self):
        # The banner 100 bytes before the end of the first chunk: found
        # once, whole.
        at = (1 << 20) + (1 << 20) - 100
        ram = FakeRam(8 << 20, [(at, boot_log(b'the last record'))])
        out = self.log(ram)
        self.assertEqual(out.count('kernel log at'), 1, out)
        self.assertIn('the last record', out)

    def test_banner_alone_is_not_a_log(self):
        # linux_banner in the kernel's rodata, without a command line after it
        ram = FakeRam(8 << 20, [(0x1e0000, b'Linux version 6.1.0-57-amd64 (gcc 12)\n\0')])
        out = self.log(ram)
        self.assertIn('no boot log in guest RAM', out)

    def test_earlier_boots_too_shortest_last(self):
        old = boot_log(b'an earlier boot, further on') + ring([b'more of the earlier boot'] * 5)
        new = boot_log(b'where the boot stopped')
        ram = FakeRam(8 << 20, [(0x200000, new), (0x500000, old)])
        out = self.log(ram)
        self.assertEqual(out.count('kernel log at'), 2, out)
        self.assertTrue(out.rstrip().endswith('where the boot stopped'), out)

    def test_a_failing_pmemsave_is_reported_not_raised(self):
        ram = FakeRam(4 << 20, [])
        out = self.log(ram)      # RAM smaller than -m says: pmemsave fails
        self.assertIn('kernel log unavailable: Invalid parameter', out)

    def test_ram_bytes(self):
        self.assertEqual(postmortem.ram_bytes('1G'), 1 << 30)
        self.assertEqual(postmortem.ram_bytes('512M'), 512 << 20)
        self.assertEqual(postmortem.ram_bytes('2048'), 2048 << 20)
        with self.assertRaises(ValueError):
            postmortem.ram_bytes('lots')


class TestFirmwareLog(unittest.TestCase):
    def test_tail(self):
        with tempfile.NamedTemporaryFile('wb', delete=False) as f:
            f.write(b'SeaBIOS (version 1.16.2-debian-1.16.2-1)\n\nBooting from ROM...\n')
        try:
            self.assertEqual(postmortem.firmware_log(f.name, 2),
                             'SeaBIOS (version 1.16.2-debian-1.16.2-1)\nBooting from ROM...')
        finally:
            os.unlink(f.name)
        self.assertEqual(postmortem.firmware_log('/nonexistent/firmware.log'), '')


# HMP `info registers -a` of a two-vCPU x86 guest, trimmed to the lines
# cpu_state() reads (the real output has the segment and control registers
# between them).
REGS = """CPU#0
RAX=0000000000000000 RBX=ffffffff82613940 RCX=0000000000000000 RDX=0000000000000001
RIP=ffffffff81e0e8ab RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1
CPU#1
RAX=0000000000000001 RBX=ffff88803ec2b6c0 RCX=0000000000000000 RDX=0000000000000000
RIP=ffffffff8113a2f1 RFL=00000046 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
"""


class TestCpuState(unittest.TestCase):
    def test_each_vcpu(self):
        self.assertEqual(postmortem.cpu_state(REGS),
                         ['cpu0 rip=ffffffff81e0e8ab if=1 hlt=1',
                          'cpu1 rip=ffffffff8113a2f1 if=0 hlt=0'])

    def test_samples(self):
        seen = []

        def hmp(cmd):
            seen.append(cmd)
            return REGS
        out = postmortem.cpu_samples(hmp, samples=2, gap=0)
        self.assertEqual(seen, ['info registers -a'] * 2)
        self.assertEqual(out.splitlines()[1],
                         'vcpus, sample 2: cpu0 rip=ffffffff81e0e8ab if=1 hlt=1; '
                         'cpu1 rip=ffffffff8113a2f1 if=0 hlt=0')

    def test_a_failing_monitor_is_reported_not_raised(self):
        def hmp(cmd):
            raise RuntimeError('QEMU is gone')
        self.assertEqual(postmortem.cpu_samples(hmp, gap=0),
                         'vcpu state unavailable: QEMU is gone')


# HMP `info lapic 1` of the same guest (QEMU 7.2).
LAPIC = """dumping local APIC state for CPU 1 

LVT0\t 0x00010700 active-hi edge  masked                      ExtINT (vec 0)
LVTTHMR\t 0x00010000 active-hi edge  masked                      Fixed  (vec 0)
LVTT\t 0x000000ec active-hi edge                 one-shot     Fixed  (vec 236)
Timer\t DCR=0x3 (divide by 16) initial_count = 132694 current_count = 0
ICR\t 0x000008fb logical edge de-assert no-shorthand
ICR2\t 0x02000000 mask 00000010 (APIC ID)
ISR\t (none)
IRR\t 236 

APR 0x00 TPR 0x10 DFR 0x0f LDR 0x01 PPR 0x10
"""


class TestLapicState(unittest.TestCase):
    def test_the_lines_of_a_lost_wakeup(self):
        seen = []

        def hmp(cmd):
            seen.append(cmd)
            return LAPIC
        out = postmortem.lapic_state(hmp, 2).splitlines()
        self.assertEqual(seen, ['info lapic 0', 'info lapic 1'])
        self.assertEqual(out[1], 'lapic of cpu1: LVTT 0x000000ec active-hi edge one-shot '
                         'Fixed (vec 236); Timer DCR=0x3 (divide by 16) initial_count = '
                         '132694 current_count = 0; ICR 0x000008fb logical edge de-assert '
                         'no-shorthand; ISR (none); IRR 236')


# HMP `x/16xb $pc` and `x/6gx $esp` (QEMU 7.2's format).
CODE = """ffffffff9a308630: 0xf3 0x90 0x8b 0x07 0x85 0xc0 0x75 0xf8
ffffffff9a308638: 0xc3 0xcc 0xcc 0xcc 0x0f 0x1f 0x44 0x00
"""
STACK = """ffffa8b1c0003f00: 0xffffffff9a3086a1 0x0000000000000001
ffffa8b1c0003f10: 0xffff8c2a3ec1e940 0xffffffff9a30b2c5
ffffa8b1c0003f20: 0x0000000000000000 0xffffffff9a2c1d3e
"""


class TestCodeAt(unittest.TestCase):
    def test_bytes_and_stack_of_each_vcpu(self):
        seen = []

        def hmp(cmd):
            seen.append(cmd)
            return {'x/16xb $pc': CODE, 'x/6gx $esp': STACK}.get(cmd, '')
        out = postmortem.code_at(hmp, 2).splitlines()
        self.assertEqual(seen, ['cpu 0', 'x/16xb $pc', 'x/6gx $esp',
                                'cpu 1', 'x/16xb $pc', 'x/6gx $esp', 'cpu 0'])
        self.assertEqual(out[0], 'code of cpu0 at its rip: f3 90 8b 07 85 c0 75 f8 c3 cc cc cc '
                         '0f 1f 44 00; stack: 0xffffffff9a3086a1 0x0000000000000001 '
                         '0xffff8c2a3ec1e940 0xffffffff9a30b2c5 0x0000000000000000 '
                         '0xffffffff9a2c1d3e')
        self.assertEqual(len(out), 2)

    def test_a_monitor_error_is_said(self):
        def hmp(cmd):
            raise RuntimeError('monitor gone')
        self.assertEqual(postmortem.code_at(hmp, 2), 'code at rip unavailable: monitor gone')


if __name__ == '__main__':
    unittest.main()
