"""Where a hung guest is, for a timeout's report: the firmware's debug
output, where the vCPUs are, and the tail of the guest kernel's log,
read from guest memory.

The guest boots with `quiet` and its serial console carries the
workload's markers, so what the kernel said before a hang is not on the
console.  It is in the kernel's log buffer, in guest RAM.  Debian's
System.map is a stub (the real one is in the -dbg package) and KASLR
moves the kernel, so the buffer is found by its content: the first
record of a boot is the banner ("Linux version ..."), followed within a
few hundred bytes by "Command line: ..." with this harness's command
line.  Nothing else in memory looks like that: linux_banner itself is
not followed by the command line.  The records after it are the log, in
order until the buffer (128 KiB in Debian's kernels) wraps.

Stdlib only; the functions return text for the report and never raise:
a report that fails must not hide the failure it reports."""

import os
import re
import time
from typing import Callable, List, Optional

LOG_BUF_LEN = 1 << 17            # CONFIG_LOG_BUF_SHIFT=17 in Debian's kernels
CHUNK = 64 << 20
TEXT = re.compile(rb'[\x20-\x7e]{4,}')
BANNER = b'Linux version '


def ram_bytes(mem: str) -> int:
    """-m's size (1G, 512M, 2048) in bytes."""
    m = re.fullmatch(r'(\d+)([KMGT]?)', mem.strip().upper())
    if not m:
        raise ValueError(f'cannot read -m {mem!r}')
    return int(m.group(1)) << {'': 20, 'K': 10, 'M': 20, 'G': 30, 'T': 40}[m.group(2)]


def firmware_log(path: str, lines: int = 12) -> str:
    """The last lines the firmware wrote to the debug console
    (isa-debugcon at 0x402, SeaBIOS's debug port); '' when none."""
    try:
        with open(path, 'rb') as f:
            text = f.read().decode('ascii', 'replace')
    except OSError:
        return ''
    out = [l.rstrip() for l in text.splitlines() if l.strip()]
    return '\n'.join(out[-lines:])


def log_records(buf: bytes) -> List[str]:
    """The printable records of a printk text ring (each a long id, then
    the text, no terminator), in the order they are in the buffer."""
    return [m.group().decode('ascii') for m in TEXT.finditer(buf)]


def find_logs(chunk: bytes, marker: bytes) -> List[int]:
    """The offsets in chunk of boots' first log records: a banner with
    "Command line: ...marker" after it."""
    out = []
    i = chunk.find(BANNER)
    while i >= 0:
        near = chunk[i:i + 2048]
        c = near.find(b'Command line: ')
        if c >= 0 and marker in near[c:c + 512]:
            out.append(i)
        i = chunk.find(BANNER, i + 1)
    return out


def kernel_log(pmemsave: Callable[[int, int, str], None], mem: str, marker: str,
               tmp: str, lines: int = 15, start: int = 16 << 20,
               chunk: int = CHUNK) -> str:
    """The last records of the guest kernel's logs found in guest RAM with
    pmemsave(physical address, size, file); marker is a word of the
    kernel command line (it tells a log from other copies of the
    banner).  RAM survives a system_reset, so the logs of earlier boots
    may be there beside the current one's: each is shown, the shortest
    (the boot that got least far) last."""
    path = os.path.join(tmp, 'guest-ram.bin')
    logs = []
    try:
        size = ram_bytes(mem)
        found: List[int] = []
        addr = start
        while addr < size:
            # Overlap the chunks: a log that begins at the end of one is
            # found whole in the next (and once: only starts before chunk).
            n = min(chunk + 4096, size - addr)
            pmemsave(addr, n, path)
            with open(path, 'rb') as f:
                found += [addr + at for at in find_logs(f.read(), marker.encode())
                          if at < chunk]
            addr += chunk
        for at in found:
            pmemsave(at, LOG_BUF_LEN, path)
            with open(path, 'rb') as f:
                logs.append((at, log_records(f.read())))
    except Exception as e:  # pylint: disable=broad-except
        return f'kernel log unavailable: {e}'
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if not logs:
        return (f'kernel log: no boot log in guest RAM {start:#x}-{size:#x} '
                '(the kernel had not started, or its log was overwritten)')
    out = []
    for at, recs in sorted(logs, key=lambda x: -len(x[1]))[-4:]:
        out.append(f'kernel log at {at:#x}, {len(recs)} records, the last:')
        out += ['  ' + r for r in recs[-lines:]]
    return '\n'.join(out)


REG = re.compile(r'CPU#(\d+)|RIP=([0-9a-f]+)|RFL=([0-9a-f]+)|HLT=(\d)')


def cpu_state(regs: str) -> List[str]:
    """Each vCPU's instruction pointer, interrupt flag and halt state
    from HMP `info registers -a`: 'cpu0 rip=ffffffff81... if=1 hlt=0'."""
    out: List[str] = []
    cur: dict = {}
    for m in REG.finditer(regs):
        if m.group(1) is not None:
            if cur:
                out.append(cur)
            cur = {'cpu': m.group(1)}
        elif m.group(2) is not None:
            cur['rip'] = m.group(2)
        elif m.group(3) is not None:
            cur['if'] = str((int(m.group(3), 16) >> 9) & 1)
        elif m.group(4) is not None:
            cur['hlt'] = m.group(4)
    if cur:
        out.append(cur)
    return [f"cpu{c['cpu']} rip={c.get('rip', '?')} if={c.get('if', '?')} "
            f"hlt={c.get('hlt', '?')}" for c in out]


def cpu_samples(hmp: Callable[[str], str], samples: int = 3,
                gap: float = 1.0, label: str = 'vcpus') -> str:
    """Where the vCPUs are, sampled a few times gap seconds apart: a
    guest that crawls (slow, but working) shows instruction pointers
    that move; one that hangs shows a vCPU halted with interrupts on
    and nothing to wake it, or one spinning at the same few addresses
    (waiting for another vCPU, e.g. an IPI that never came)."""
    out = []
    try:
        for i in range(samples):
            if i:
                time.sleep(gap)
            out.append(f'{label}, sample {i + 1}: ' +
                       '; '.join(cpu_state(hmp('info registers -a'))))
    except Exception as e:  # pylint: disable=broad-except
        out.append(f'vcpu state unavailable: {e}')
    return '\n'.join(out)


def code_at(hmp: Callable[[str], str], cpus: int) -> str:
    """The bytes at each vCPU's instruction pointer and the top of its
    stack (HMP `x` after `cpu N`; HMP's $esp is all of rsp in long mode):
    with the guest kernel's symbols far away, the bytes say what a vCPU
    that stays at one address runs (say `f3 90`, pause, in a spin loop)
    and the stack where it came from."""
    out = []
    try:
        for c in range(cpus):
            hmp(f'cpu {c}')
            code = ' '.join(w.replace('0x', '') for l in hmp('x/16xb $pc').splitlines()
                            for w in l.split(':', 1)[-1].split())
            stack = ' '.join(w for l in hmp('x/6gx $esp').splitlines()
                             for w in l.split(':', 1)[-1].split())
            out.append(f'code of cpu{c} at its rip: {code}; stack: {stack}')
        hmp('cpu 0')
    except Exception as e:  # pylint: disable=broad-except
        out.append(f'code at rip unavailable: {e}')
    return '\n'.join(out)


LAPIC_KEEP = ('LVTT', 'Timer', 'ISR', 'IRR', 'ICR')


def lapic_state(hmp: Callable[[str], str], cpus: int) -> str:
    """Each vCPU's local APIC, the lines that tell a lost wakeup: the
    timer (LVTT, Timer: one-shot, its counts), the interrupts in service
    (ISR) and pending (IRR) and the last IPI sent (ICR).  An interrupt
    pending in IRR of a vCPU halted with interrupts on is a wakeup that
    QEMU did not deliver."""
    out = []
    try:
        for c in range(cpus):
            lines = [l for l in hmp(f'info lapic {c}').splitlines()
                     if l.split()[:1] and l.split()[0] in LAPIC_KEEP]
            out.append(f'lapic of cpu{c}: ' + '; '.join(' '.join(l.split()) for l in lines))
    except Exception as e:  # pylint: disable=broad-except
        out.append(f'lapic state unavailable: {e}')
    return '\n'.join(out)
