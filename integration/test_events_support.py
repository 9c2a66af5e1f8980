"""Hand-made producer programs (bpfkit.asm) for the event reader tests, and the checker of
sequence-numbered records. No tests here.

The record every producer sends is the benchmark's 32 bytes::

    struct { u64 seq; u64 ts; u32 len; u32 cpu; u64 check; }

``seq`` counts output attempts per CPU (from a PERCPU_ARRAY ``stats`` = {produced, drops}),
so a failed output shows up as a gap; ``check`` is ``~seq`` so a torn record is detected.
With ``sizes`` the record length varies with seq (32..56 bytes, zeros after the first 32) so
rings wrap at every alignment.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass, field

from bpfkit import asm
from bpfkit._kernel import perf as kperf
from bpfkit._kernel import tracefs
from bpfkit._kernel.consts import MapType, PerfType, ProgType
from bpfkit.maps import Map, MapSpec
from bpfkit.program import Program, ProgramSpec

R0, R1, R2, R3, R4, R5, R6, R7, R8, R10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8, asm.R10
REC = struct.Struct("<QQIIQ")
BPF_F_CURRENT_CPU = 0xFFFFFFFF
FUNC_MAP_LOOKUP = 1
FUNC_KTIME = 5
FUNC_SMP_ID = 8
FUNC_PERF_OUTPUT = 25
FUNC_RINGBUF_OUTPUT = 130


def stats_map(name: str = "ev_stats") -> Map:
    return Map(MapSpec(name, MapType.PERCPU_ARRAY, 4, 16, 1, value_format="<QQ"))


def read_stats(stats: Map) -> tuple[int, int]:
    """(produced, drops) summed over CPUs."""
    per_cpu = stats.lookup(0)
    return sum(p for p, _ in per_cpu), sum(d for _, d in per_cpu)


def producer(kind: str, out: Map, stats: Map, prog_type: ProgType = ProgType.SCHED_CLS, sizes: bool = False) -> Program:
    """A program sending one record per run into ``out`` (``kind`` "ringbuf" or "perf")."""
    body = [
        asm.mov64_reg(R6, R1),  # ctx, for perf_event_output
        asm.st_imm(asm.W, R10, -4, 0),
        asm.mov64_reg(R2, R10),
        asm.alu64_imm(asm.ADD, R2, -4),
        asm.ld_map_fd(R1, stats.fd.raw),
        asm.call(FUNC_MAP_LOOKUP),
    ]
    tail = []
    # if r0 == 0 -> exit: patched below once the body length is known
    rest = [
        asm.mov64_reg(R7, R0),
        asm.ldx(asm.DW, R8, R7, 0),  # r8 = produced (this CPU) = seq
        asm.mov64_reg(R1, R8),
        asm.alu64_imm(asm.ADD, R1, 1),
        asm.stx(asm.DW, R7, R1, 0),  # produced++
        asm.stx(asm.DW, R10, R8, -72),  # e.seq
        asm.call(FUNC_KTIME),
        asm.stx(asm.DW, R10, R0, -64),  # e.ts
        asm.call(FUNC_SMP_ID),
        asm.stx(asm.W, R10, R0, -52),  # e.cpu
        asm.mov64_reg(R1, R8),
        asm.alu64_imm(asm.XOR, R1, -1),
        asm.stx(asm.DW, R10, R1, -48),  # e.check = ~seq
        asm.st_imm(asm.DW, R10, -40, 0),  # zero the tail of the 64-byte buffer
        asm.st_imm(asm.DW, R10, -32, 0),
        asm.st_imm(asm.DW, R10, -24, 0),
        asm.st_imm(asm.DW, R10, -16, 0),
        asm.st_imm(asm.DW, R10, -8, 0),
    ]
    if sizes:
        # size = 32 + 8 * (seq % 4): 32..56 bytes
        rest += [
            asm.mov64_reg(R5, R8),
            asm.alu64_imm(asm.AND, R5, 3),
            asm.alu64_imm(asm.LSH, R5, 3),
            asm.alu64_imm(asm.ADD, R5, 32),
        ]
    else:
        rest += [asm.mov64_imm(R5, 32)]
    rest += [asm.stx(asm.W, R10, R5, -56)]  # e.len
    if kind == "ringbuf":
        rest += [
            asm.mov64_reg(R3, R5),
            asm.ld_map_fd(R1, out.fd.raw),
            asm.mov64_reg(R2, R10),
            asm.alu64_imm(asm.ADD, R2, -72),
            asm.mov64_imm(R4, 0),
            asm.call(FUNC_RINGBUF_OUTPUT),
        ]
    elif kind == "perf":
        rest += [
            asm.mov64_reg(R1, R6),
            asm.ld_map_fd(R2, out.fd.raw),
            asm.ld_imm64(R3, BPF_F_CURRENT_CPU),
            asm.mov64_reg(R4, R10),
            asm.alu64_imm(asm.ADD, R4, -72),
            asm.call(FUNC_PERF_OUTPUT),
        ]
    else:
        raise ValueError(kind)
    rest += [
        asm.jmp_imm(asm.JEQ, R0, 0, 2),
        asm.mov64_imm(R1, 1),
        asm.atomic_add(asm.DW, R7, R1, 8),  # drops++
    ]
    tail = [asm.mov64_imm(R0, 0), asm.exit_()]
    skip = sum(len(i) for i in rest) // 8
    insns = b"".join(body) + asm.jmp_imm(asm.JEQ, R0, 0, skip) + b"".join(rest) + b"".join(tail)
    return Program(ProgramSpec(f"ev_{kind}", prog_type, insns, license="GPL"))


PACKET = bytes(64)


def run(prog: Program, times: int) -> None:
    """Run a SCHED_CLS producer ``times`` times on this CPU (BPF_PROG_TEST_RUN)."""
    prog.test_run(PACKET, repeat=times)


@contextlib.contextmanager
def on_getppid(prog: Program):
    """Attach a TRACEPOINT program to syscalls/sys_enter_getppid (perf event + SET_BPF)."""
    attr = kperf.new_attr()
    attr.type = PerfType.TRACEPOINT
    attr.config = tracefs.event_id("syscalls", "sys_enter_getppid")
    attr.sample_period = 1
    attr.wakeup_events = 1
    fd = kperf.perf_event_open(attr, -1, 0, what="tracepoint syscalls/sys_enter_getppid")
    try:
        kperf.set_bpf(fd, prog.fd)
        kperf.enable(fd)
        yield
    finally:
        fd.close()


@dataclass
class SeqChecker:
    """Checks records per CPU: sequence numbers strictly increasing (gaps allowed and counted),
    never repeated, payload intact."""

    expect: dict[int, int] = field(default_factory=dict)
    received: int = 0
    gaps: int = 0
    problems: list[str] = field(default_factory=list)
    sizes: bool = False

    def add(self, rec: bytes | memoryview) -> None:
        rec = bytes(rec)
        seq, _ts, length, cpu, check = REC.unpack_from(rec.ljust(32, b"\0"))
        want_len = 32 + 8 * (seq % 4) if self.sizes else 32
        if length != want_len or len(rec) < want_len:
            self.problems.append(f"record seq {seq} cpu {cpu}: len field {length}, {len(rec)} bytes, want {want_len}")
            return
        if check != (~seq & (2**64 - 1)):
            self.problems.append(f"record seq {seq} cpu {cpu}: torn (check {check:#x})")
        if want_len > 32 and rec[32:want_len] != bytes(want_len - 32):
            self.problems.append(f"record seq {seq}: padding bytes changed")
        self.seq(seq, cpu)

    def seq(self, seq: int, cpu: int) -> None:
        self.received += 1
        want = self.expect.get(cpu, 0)
        if seq < want:
            self.problems.append(f"cpu {cpu}: seq {seq} after {want - 1} (duplicate or out of order)")
            return
        self.gaps += seq - want
        self.expect[cpu] = seq + 1


def pin_to(cpu: int) -> set[int]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    return before
