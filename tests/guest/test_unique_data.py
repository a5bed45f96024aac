"""The guest's verification schemes can see a lost write (issue 34, items 1
and 2), shown on the host: the guest's own job files and checks
(guest/lib.sh, run by busybox sh as in the guest) and the host's fio,
which is the guest's (guest/build-guest.sh copies /usr/bin/fio), on a
small file.  A lost write is planted by putting back a block as it was
before the pass that wrote it; the check must then fail, and pass on the
same image without the plant.

    python3 -m unittest -v tests/guest/test_unique_data.py

Skipped without fio or busybox.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIB = os.path.join(ROOT, 'guest', 'lib.sh')
sys.path.insert(0, HERE)

import harness  # noqa: E402

FIO = shutil.which('fio')
BUSYBOX = shutil.which('busybox')
MiB = 1 << 20
FIO_MAGIC = 0xacca      # fio's verify header (verify.h)


def applets(d: str) -> str:
    """A directory of busybox applets with fio: the guest's tools."""
    path = os.path.join(d, 'bin')
    os.mkdir(path)
    out = subprocess.run([BUSYBOX, '--list'], capture_output=True, text=True, check=True)
    for a in out.stdout.split():
        os.symlink(BUSYBOX, os.path.join(path, a))
    os.symlink(FIO, os.path.join(path, 'fio'))
    return path


@unittest.skipUnless(FIO and BUSYBOX, 'needs fio and busybox')
class Base(unittest.TestCase):
    """The passes or rounds run once (setUpClass, into snapshots); each test
    starts from a copy."""
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='iobatch-unique-')
        cls.bin = applets(cls.tmp)
        cls.img = os.path.join(cls.tmp, 'img')

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    @classmethod
    def sh(cls, script: str, **env) -> subprocess.CompletedProcess:
        """Run script after guest/lib.sh in busybox sh -e, as /init does."""
        e = {'PATH': cls.bin, 'WL_TMP': cls.tmp, **{k: str(v) for k, v in env.items()}}
        return subprocess.run([BUSYBOX, 'sh', '-e', '-c', f'. {LIB}\n{script}'],
                              cwd=cls.tmp, env=e, capture_output=True, text=True,
                              check=False, timeout=300)

    @classmethod
    def snapshot(cls, name: str) -> str:
        path = os.path.join(cls.tmp, name)
        shutil.copyfile(cls.img, path)
        return path

    def start(self, snap: str) -> None:
        """The image as it was in snapshot snap."""
        shutil.copyfile(os.path.join(self.tmp, snap), self.img)

    def read(self, off: int, n: int) -> bytes:
        with open(self.img, 'rb') as f:
            f.seek(off)
            return f.read(n)

    def put(self, off: int, data: bytes) -> None:
        with open(self.img, 'r+b') as f:
            f.seek(off)
            f.write(data)

    def restore(self, snap: str, off: int, n: int) -> None:
        """Plant: the bytes [off, off+n) as they were in snapshot snap."""
        with open(os.path.join(self.tmp, snap), 'rb') as f:
            f.seek(off)
            old = f.read(n)
        self.assertNotEqual(old, self.read(off, n), 'the plant changes nothing')
        self.put(off, old)


class Rounds(Base):
    """Item 1: rounds.sh's rounds (lib.sh verify_fio), MB=2: region 0 is
    the first 4 MiB, region 1 the next; round N writes region N%2 with
    seed N*64+1 (the first disk).  Snapshots: r2 (after rounds 1 and 2:
    region 1 holds round 1), r3 (after round 3), and the same with the
    seed 7 in every round (same-r2, same-r3: the workload as it was)."""
    MB = 2
    SPLIT: dict = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for pre, same in (('', False), ('same-', True)):
            with open(cls.img, 'wb') as f:
                f.truncate(4 * cls.MB * MiB)
            for r in (1, 2, 3):
                p = cls.fio(r, 'write', 7 if same else 0)
                assert p.returncode == 0, p.stderr + p.text[:2000]
                cls.results = getattr(cls, 'results', {})
                cls.results[f'{pre}r{r}'] = p.text
                cls.snapshot(f'{pre}r{r}')

    @classmethod
    def fio(cls, rnd: int, mode: str, seed: int = 0) -> subprocess.CompletedProcess:
        """Round rnd's verify workload (mode write) or its verification
        (mode verify: --verify_only), as rounds.sh runs it."""
        seed = seed or rnd * 64 + 1
        opt = '--verify_only' if mode == 'verify' else ''
        out = os.path.join(cls.tmp, f'r{rnd}-{mode}.json')
        p = cls.sh(f'verify_fio job.fio {cls.img} libaio {cls.MB}'
                   f' {rnd % 2 * 2 * cls.MB} {seed} {mode}\n'
                   f'fio --output-format=json --output={out} {opt} job.fio',
                   **cls.SPLIT)
        with open(out, encoding='utf-8') as f:
            p.text = f.read()
        return p

    def ok(self, p: subprocess.CompletedProcess) -> dict:
        self.assertEqual(p.returncode, 0, p.stderr + p.text[:2000])
        return json.loads(p.text[p.text.find('{'):])

    def writes(self, region: int):
        """The writes that left the region as it is: (offset, length).
        With block sizes of 512 B..256 KiB fio puts a verify header in
        every 512 bytes (verify_interval = the smallest block size), with
        the seed of its write: a write is a run of sectors of one seed."""
        out, off = [], region * 2 * self.MB * MiB
        end = off + 2 * self.MB * MiB
        while off < end:
            magic, _, length, seed = struct.unpack('<HHIQ', self.read(off, 16))
            self.assertEqual((magic, length), (FIO_MAGIC, 512), f'no fio header at {off}')
            if out and seed == last:
                out[-1] = (out[-1][0], out[-1][1] + 512)
            else:
                out.append((off, 512))
            last = seed
            off += 512
        return out

    def test_clean_rounds_verify_and_pass_the_harness(self):
        self.start('r3')
        res = [('verify-r3', json.loads(self.results['r3'][self.results['r3'].find('{'):])),
               ('verifyonly-r3', self.ok(self.fio(3, 'verify'))),
               ('verifyonly-r2', self.ok(self.fio(2, 'verify')))]

        class C:
            fsync = True
        harness.check_fio(C, res)

    def test_lost_write_of_round_3_is_seen(self):
        """A write of round 3 lost: its blocks are round 1's, whose seed the
        verify tells apart."""
        self.start('r3')
        writes = self.writes(1)
        off, n = writes[len(writes) // 2]
        self.restore('r2', off, n)
        p = self.fio(3, 'verify')
        self.assertNotEqual(p.returncode, 0, 'round 3 verified with a block of round 1')
        m = re.search(r'verify: bad header[^\n]*|[^\n]*verify failed[^\n]*', p.text + p.stderr)
        self.assertTrue(m, p.text[-2000:])
        print(f'\n  a write of round 3 ({off}+{n}) lost: {m.group(0).strip()}', file=sys.stderr)

    def test_torn_write_of_round_3_is_seen(self):
        """The second half of a write of round 3 lost."""
        self.start('r3')
        off, n = max(self.writes(1), key=lambda w: w[1])
        half = n // 1024 * 512
        self.restore('r2', off + half, n - half)
        self.assertNotEqual(self.fio(3, 'verify').returncode, 0,
                            'round 3 verified with half a write of round 1')

    def test_the_other_region_is_verified_whole(self):
        """After round 3, round 2's region verifies; a write of it gone (a
        copy that missed it: zeroes) does not."""
        self.start('r3')
        self.ok(self.fio(2, 'verify'))
        off, n = self.writes(0)[-1]
        self.put(off, b'\0' * n)
        self.assertNotEqual(self.fio(2, 'verify').returncode, 0)

    def test_control_same_seed_every_round_is_blind(self):
        """Why the seed: with the same data every round (the workload as it
        was, one job file per region), round 1's write in round 3's place
        verifies clean."""
        self.start('same-r3')
        writes = self.writes(1)
        off, n = writes[len(writes) // 2]
        self.restore('same-r2', off, n)      # differs only in the headers' time
        self.ok(self.fio(3, 'verify', seed=7))

    def test_control_write_only_job_takes_the_seed_from_the_header(self):
        """Why rw=randrw, rwmixread=0: fio 3.33 checks a block's seed only
        in a job that reads and writes; a randwrite job's --verify_only
        passes a stale block of another seed at the same offset and length."""
        job = os.path.join(self.tmp, 'w.fio')
        with open(job, 'w', encoding='ascii') as f:
            f.write(f'[w]\nfilename={self.img}\ndirect=1\nrw=randwrite\nbs=4k\nsize=1M\n'
                    'verify=crc32c\nverify_fatal=1\nrandseed=${SEED}\n')

        def run(seed, *opt):
            return subprocess.run([FIO, *opt, job], env={'SEED': str(seed)}, cwd=self.tmp,
                                  capture_output=True, text=True, check=False)
        self.assertEqual(run(1).returncode, 0)
        self.snapshot('seed1')
        self.assertEqual(run(2).returncode, 0)
        self.restore('seed1', 64 * 4096, 4096)
        self.assertEqual(run(2, '--verify_only').returncode, 0)


class SplitRounds(Rounds):
    """The same rounds with SPLIT_CPUS=2 (the iothread-vq-mapping case's
    workload, there with 4): writers cpu0 and cpu1, pinned to CPUs 0 and
    1, on the same halves as qd1 and qd32; the checks must see the same."""
    SPLIT = {'SPLIT_CPUS': 2}

    def test_the_writers_are_split(self):
        res = json.loads(self.results['r3'][self.results['r3'].find('{'):])
        jobs = {j['jobname']: j['job options'] for j in res['jobs']}
        self.assertEqual(sorted(jobs), ['cpu0', 'cpu0r', 'cpu1', 'cpu1r'])
        self.assertEqual((jobs['cpu1']['cpus_allowed'], jobs['cpu1']['iodepth']),
                         ('1', '32'))


class Passes(Base):
    """Item 2: inflight.sh's passes (lib.sh gen_job, check_gens), A_MB=1
    (256 blocks of 4 KiB), B_MB=2 (16 blocks of 128 KiB), the header at
    HDR (3 MiB).  Passes 1 and 2 complete; pass 3 in CHUNKS=8 chunks (32
    blocks of A and 2 of B each), cut in chunk 4: chunks 1-3 run whole,
    then chunk 4 for a second at 20 writes a second (on the guest the
    unplug or reset cuts it)."""
    CHUNKS = 8
    ENV = {'A_MB': 1, 'B_MB': 2, 'ENGINE': 'libaio', 'HDR': 6144, 'CHUNKS': CHUNKS}
    NBLK = 256 + 16

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(cls.img, 'wb') as f:
            f.truncate(4 * MiB)
        cls.env = dict(cls.ENV, DEV=cls.img)
        for k in (1, 2):
            p = cls.sh(f'gen_job p{k}.fio pass {k}\nfio --output=/dev/null p{k}.fio', **cls.env)
            assert p.returncode == 0, p.stdout + p.stderr
            cls.snapshot(f'pass{k}')
        whole = ' '.join(f'--section={j}-{c}' for c in (1, 2, 3) for j in ('wa', 'wb', 'h')
                         if (j, c) != ('h', 1))
        p = cls.sh(f'gen_job p3.fio pass 3 {cls.CHUNKS}\n'
                   f'fio --output=/dev/null {whole} p3.fio\n'
                   # the logs of the next run would take the same names
                   'for f in done-3_clat.*.log; do mv "$f" "whole-$f"; done\n'
                   'fio --rate_iops=20 --runtime=1 --output=/dev/null'
                   ' --section=wa-4 --section=wb-4 --section=h-4 p3.fio', **cls.env)
        assert p.returncode == 0, p.stdout + p.stderr
        cls.snapshot('cut3')
        cls.logs = sorted(os.path.join(cls.tmp, f) for f in os.listdir(cls.tmp)
                          if re.fullmatch(r'(whole-)?done-3_clat\.\d+\.log', f))
        done = set()
        for log in cls.logs:
            with open(log, encoding='ascii') as f:
                done |= {int(w[4]) for w in (line.split(',') for line in f)
                         if w[2].strip() == '1'}
        cls.done = sorted(done)

    def setUp(self):
        self.start('cut3')

    def check(self, *gens, logs=True) -> subprocess.CompletedProcess:
        """check_gens c K [K2 C] with pass 3's logs (K2, logs)"""
        args = ' '.join(map(str, gens))
        if len(gens) == 3 and logs:
            args += ' ' + ' '.join(self.logs)
        return self.sh(f'check_gens c {args}', **self.env)

    @staticmethod
    def size(off: int) -> int:
        return 4096 if off < MiB else 128 << 10

    @classmethod
    def chunk(cls, off: int) -> int:
        """The chunk (1-based) of pass 3 that the block at off is in"""
        if off < MiB:
            return off // (MiB // cls.CHUNKS) + 1
        return (off - MiB) // (2 * MiB // cls.CHUNKS) + 1

    def expect_fail(self, p, pattern: str) -> None:
        self.assertNotEqual(p.returncode, 0, p.stdout)
        m = re.search(r'@@ERROR .*', p.stdout)
        self.assertTrue(m and re.search(pattern, m.group(0)), p.stdout[-2000:])
        print(f'\n  {m.group(0)}', file=sys.stderr)

    def test_cut_pass_checks_clean(self):
        self.assertTrue(0 < len(self.done) < self.NBLK, f'pass 3 not cut: {len(self.done)}')
        self.assertEqual({self.chunk(o) for o in self.done}, {1, 2, 3, 4})
        p = self.check(2, 3, 3)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        m = re.search(r'@@INFO c: (\d+) of (\d+) blocks hold pass 2, (\d+) pass 3;'
                      r' (\d+) writes of pass 3 completed, all there, and the first 3 of 8'
                      r' chunks of it whole', p.stdout)
        self.assertTrue(m, p.stdout)
        self.assertEqual(int(m.group(1)) + int(m.group(3)), self.NBLK)
        self.assertEqual(int(m.group(4)), len(self.done))

    def test_header_names_the_complete_chunks(self):
        """The header job beside chunk 4 wrote that 3 chunks of the pass
        after pass 2 completed."""
        self.assertEqual(self.read(3 * MiB, 20), b'IOBATCH-PASS 2 0 3 I')

    def test_lost_write_of_a_complete_chunk_is_seen_without_logs(self):
        """A write of chunk 2 lost, and no log of the completed writes (a
        reset took it): the header's chunks show it.  Without them (C=0,
        the check before the chunks) it passes: the blind spot."""
        off = next(o for o in self.done if self.chunk(o) == 2 and o < MiB)
        self.restore('pass2', off, self.size(off))
        self.expect_fail(self.check(2, 3, 3, logs=False),
                         r'blocks of the first 3 of 8 chunks of pass 3, which completed,'
                         rf' do not hold it \(lost writes\), e.g. offsets {off} ')
        p = self.check(2, 3, 0, logs=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_lost_write_of_the_cut_chunk_needs_the_logs(self):
        off = next(o for o in self.done if self.chunk(o) == 4)
        self.restore('pass2', off, self.size(off))
        p = self.check(2, 3, 3, logs=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.expect_fail(self.check(2, 3, 3), r'completed but their blocks do not hold it')

    def test_lost_completed_write_is_seen(self):
        """A write of pass 3 completed, its block still pass 2's: the guest
        saw it complete, so it is lost, though pass 2 is allowed there."""
        off = self.done[len(self.done) // 2]
        self.restore('pass2', off, self.size(off))
        self.expect_fail(self.check(2, 3, 0), r'completed but their blocks do not hold it')

    def test_torn_write_is_seen(self):
        off = max(self.done)          # a block of region B
        n = self.size(off)
        self.restore('pass2', off + n // 2, n // 2)
        self.expect_fail(self.check(2, 3, 3), r'hold neither pass 2 nor pass 3')

    def test_stale_block_of_a_complete_pass_is_seen(self):
        """A block that pass 3 did not reach holds pass 1: pass 2's write
        there was lost (after a reset, the guest knows only that pass 2
        completed)."""
        off = next(o for o in range(0, MiB, 4096) if o not in self.done)
        self.restore('pass1', off, 4096)
        self.expect_fail(self.check(2, 3, 3), r'hold neither pass 2 nor pass 3')

    def test_misplaced_write_is_seen(self):
        off = self.done[0]
        other = next(o for o in range(0, MiB, 4096) if o != off)
        self.put(other, self.read(off, 4096))
        self.expect_fail(self.check(2, 3, 3), r'hold neither pass 2 nor pass 3')

    def test_a_disk_that_cannot_be_read_fails(self):
        p = self.sh('check_gens c 2 3 3', **dict(self.env, DEV=self.img + '.gone'))
        self.expect_fail(p, r'reading region a for pass 2 failed')

    def test_chunks_must_split_the_regions(self):
        p = self.sh('gen_job x.fio pass 3 3', **self.env)
        self.expect_fail(p, r'3 chunks do not split 1 MiB of 4 KiB blocks')

    def test_functions_leave_the_callers_variables(self):
        """gen_job and check_gens keep their variables to themselves: the
        callers loop over names like c, k and n (inflight.sh's unplug
        cycles counted c; run_pass's gen_job set it back to 1, so cycle 3
        never came)."""
        calls = (f'gen_job x.fio pass 3 {self.CHUNKS}; gen_job y.fio check 2;'
                 f' gen_job z.fio reads 0; region b 2 {self.CHUNKS} >/dev/null;'
                 f' check_gens c 2 3 3 {" ".join(self.logs)} >/dev/null')
        p = self.sh(f'set > vars.before\n{calls}\nset > vars.after\n'
                    'diff vars.before vars.after | sed -n "s/^[-+]//p" | grep -v "^[-+]" |'
                    ' tr "\\n" " "',
                    **self.env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout.strip(), '',
                         'lib.sh functions set variables of their callers: ' + p.stdout[-500:])

    def test_one_pass_check(self):
        self.start('pass2')
        p = self.check(2)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(f'@@INFO c: all {self.NBLK} blocks hold pass 2', p.stdout)
        self.restore('pass1', 5 * 4096, 4096)
        self.expect_fail(self.check(2), r'1 of 272 blocks do not hold pass 2')


if __name__ == '__main__':
    unittest.main()
