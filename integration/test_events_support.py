# SPDX-License-Identifier: Apache-2.0
"""Helpers for the event reader tests (no tests here): loading bpf/events_seq.bpf.c, a driver
process that calls getppid() on chosen CPUs, and the checker of sequence-numbered records.

The record every producer sends starts with::

    struct { u64 seq; u64 ts; u32 len; u32 cpu; u64 check; }

``seq`` counts output attempts per CPU (from the PERCPU_ARRAY ``stats`` = {produced, drops,
discards}), so a failed output shows up as a gap; ``check`` is ``~seq`` so a torn record is
detected. The "sizes" programs send 32..56 bytes (zeros after the first 32) so rings wrap at
every alignment.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass, field

REC = struct.Struct("<QQIIQ")


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


# ----------------------------------------------------------------- compiled producers
def load_seq(path, programs: list[str], rb_size: int | None = None, target_tgid: int = 0, discard_every: int = 0):
    """The events_seq object loaded with only ``programs`` (a Collection)."""
    import bpfkit

    spec = bpfkit.load_spec(path)
    if rb_size is not None:
        spec.maps["rb"].max_entries = rb_size
        spec.maps["rb2"].max_entries = rb_size
    spec.variables["target_tgid"].value = target_tgid
    spec.variables["discard_every"].value = discard_every
    return bpfkit.Collection(spec, programs=programs)


def stats_of(coll) -> tuple[int, int, int]:
    """(produced, drops, discards) of the events_seq stats map, summed over CPUs."""
    per_cpu = coll.maps["stats"].lookup(0)  # struct stats per CPU, typed through the map's BTF
    return (sum(v.produced for v in per_cpu), sum(v.drops for v in per_cpu), sum(v.discards for v in per_cpu))


@contextlib.contextmanager
def attached_getppid(prog):
    """The program on syscalls/sys_enter_getppid (bpfkit.link: a bpf_link, else SET_BPF)."""
    from bpfkit import link

    with link.tracepoint("syscalls", "sys_enter_getppid", prog):
        yield


DRIVER = r"""
import os, sys
n = int(sys.argv[1]); cpus = [int(c) for c in sys.argv[2].split(",")]
sys.stdin.readline()
for cpu in cpus:
    os.sched_setaffinity(0, {cpu})
    for _ in range(n):
        os.getppid()
print("done", flush=True)
"""


class Driver:
    """A child process that calls getppid() ``n`` times on each of ``cpus`` once released."""

    def __init__(self, n: int, cpus: list[int]) -> None:
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(n), ",".join(map(str, cpus))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.pid = self.proc.pid

    def run(self, timeout: float = 60) -> None:
        self.proc.communicate("go\n", timeout=timeout)
        assert self.proc.returncode == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
