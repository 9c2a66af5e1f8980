#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The kernel's BTF as a CO-RE load uses it, against libbpf's ``btf__parse`` timed in a small C
harness (benchmarks/c/btf_bench.c, built against libbpf in this run).

    python benchmarks/bench_btf.py [--rounds 7] [--btf /sys/kernel/btf/vmlinux] [--object OBJ]

Rows (wall time, median and best of ROUNDS, and median CPU time; the two sides alternating
which goes first; the targets are judged on the wall-time medians):
  libbpf btf__parse   read, check and index every type (what libbpf does before CO-RE)
  bpfkit lazy+CO-RE   read (mapped in place on 6.16+, as bpfkit reads vmlinux) +
                      BTF.from_bytes(lazy=True) + every CO-RE relocation of OBJ resolved
                      (default bpf/.output/core_task.bpf.o): the vmlinux work of a CO-RE load.
                      Target: <= 2x libbpf.
  bpfkit lazy parse   read + BTF.from_bytes(lazy=True) alone (types found, none decoded)
  bpfkit lookup       task_struct by name on a fresh lazy parse (builds the name offsets)
  bpfkit full parse   read + BTF.from_bytes(): every type built, every name offset and type
                      reference checked (members, params and enum values, checked too,
                      are decoded when first read). Target: <= 10x libbpf.

With --scaling, instead: how the lazy parse and the first lookup by kind (which builds the
name index CO-RE searches) grow with the type count, on prefixes of the same BTF (the first N
types and the whole string section; a prefix is valid for a lazy parse, which checks
references when a type is decoded).

No root needed (/sys/kernel/btf/vmlinux is world-readable); the libbpf rows need a compiler and
libbpf (see benchmarks/c_harness.py), and are left out, saying so, without them.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from c_harness import harness  # noqa: E402

from bpfkit.btf import BTF, Kind  # noqa: E402


def libbpf_parse(exe: Path, btf: str) -> tuple[float, float]:
    """Wall and CPU seconds of one btf__parse (the harness's own clocks)."""
    out = subprocess.run([str(exe), btf, "1"], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[3])


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clocks()
    return wall - start[0], cpu - start[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--btf", default="/sys/kernel/btf/vmlinux")
    parser.add_argument("--object", default=str(REPO / "bpf" / ".output" / "core_task.bpf.o"))
    parser.add_argument("--no-full", action="store_true", help="skip the (slow) full parse")
    parser.add_argument("--scaling", action="store_true", help="time against the type count instead")
    args = parser.parse_args()
    if args.scaling:
        return scaling(args.btf, args.rounds)

    import mmap

    import bpfkit
    from bpfkit._kernel import sysfs_btf as _sysfs_btf
    from bpfkit.btf.core import CORERelocator

    spec = bpfkit.load_spec(args.object)
    relos = [(p.name, i, r) for p in spec.programs.values() for i, r in p.core_relos]

    def read() -> bytes | mmap.mmap:
        """The blob as bpfkit gets it (bpfkit._kernel.sysfs_btf.vmlinux_btf, without its per-process
        cache): a read-only mapping of the file where the kernel allows one (6.16+), read in
        place; else read(2). libbpf's btf__parse read(2)s it (into fresh memory: its page
        faults are part of its time, as they would be of ours)."""
        with open(args.btf, "rb") as f:
            return _sysfs_btf._mapped(f.fileno()) or f.read()

    # The kernel's own BTF cannot change: read in place, as bpfkit.kernel_btf reads it (a
    # mapping of another file is copied, since the file could change under it).
    kernels_own = os.path.realpath(args.btf).startswith("/sys/kernel/btf/")

    # Each keeps what it built until the clock is read: freeing it is not part of the work
    # (the C harness frees its BTF outside its timing too).
    def lazy() -> tuple[float, float]:
        start = clocks()
        btf = BTF.from_bytes(read(), lazy=True, name="vmlinux", unchanging=kernels_own)
        elapsed = since(start)
        del btf
        return elapsed

    def lazy_core() -> tuple[float, float]:
        start = clocks()
        target = BTF.from_bytes(read(), lazy=True, name="vmlinux", unchanging=kernels_own)
        relocator = CORERelocator(spec.btf, [target])
        relocator.prefetch(r for _, _, r in relos)  # as bpfkit.kernelfit does
        for index, (prog, insn, relo) in enumerate(relos):
            relocator.resolve(relo, prog, insn, index)
        elapsed = since(start)
        del relocator, target
        return elapsed

    def lookup() -> tuple[float, float]:
        fresh = BTF.from_bytes(read(), lazy=True, unchanging=kernels_own)
        start = clocks()
        fresh.lookup("task_struct", Kind.STRUCT)
        return since(start)

    def full() -> tuple[float, float]:
        gc.collect()  # the previous round's objects are not this round's cost
        start = clocks()
        btf = BTF.from_bytes(read())
        elapsed = since(start)
        del btf
        return elapsed

    exe = harness("btf_bench")
    rows: dict[str, Callable[[], tuple[float, float]]] = {}
    if exe is not None:
        rows["libbpf btf__parse"] = lambda: libbpf_parse(exe, args.btf)
    else:
        print("libbpf reference left out: no libbpf to build benchmarks/c/btf_bench.c against", file=sys.stderr)
    rows.update({"bpfkit lazy+CO-RE": lazy_core, "bpfkit lazy parse": lazy, "bpfkit lookup": lookup})
    if not args.no_full:
        rows["bpfkit full parse"] = full
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    order = list(rows)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            if name == "bpfkit full parse" and r >= 3:
                continue  # slow: three samples are enough
            times[name].append(rows[name]())

    load = os.getloadavg()
    print(f"{args.btf}: {len(BTF.from_bytes(read(), lazy=True)) - 1} types; {args.object}: {len(relos)} CO-RE relocations")
    print(f"{args.rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    # Wall time decides the targets; CPU time (median) is given too: on a loaded machine it
    # is what the load cannot inflate as much.
    ref = ref_cpu = None
    if "libbpf btf__parse" in times:
        ref = statistics.median(w for w, _ in times["libbpf btf__parse"])
        ref_cpu = statistics.median(c for _, c in times["libbpf btf__parse"])
    targets = {"bpfkit lazy+CO-RE": 2.0, "bpfkit full parse": 10.0}
    print(f"  {'step':<20}{'median':>10}{'best':>10}{'vs libbpf':>11}{'CPU':>10}{'vs libbpf':>11}  target (wall)")
    for name, samples in times.items():
        med, cpu = statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)
        ratio = f"{med / ref:.2f}x" if ref else "-"
        cpu_ratio = f"{cpu / ref_cpu:.2f}x" if ref_cpu else "-"
        goal = ""
        if name in targets and ref:
            goal = f"<= {targets[name]:g}x: " + ("met" if med <= targets[name] * ref else "NOT met")
        best = min(w for w, _ in samples)
        print(f"  {name:<20}{med * 1000:>8.1f}ms{best * 1000:>8.1f}ms{ratio:>11}{cpu * 1000:>8.1f}ms{cpu_ratio:>11}  {goal}")
    return 0


def scaling(path: str, rounds: int) -> int:
    """Lazy parse, and lazy parse + a struct lookup, on prefixes of ``path``'s BTF."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    full = BTF.from_bytes(data, lazy=True)
    assert full._starts is not None
    magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data)
    types = data[hdr_len + type_off : hdr_len + type_off + type_len]
    strings = data[hdr_len + str_off : hdr_len + str_off + str_len]
    total = len(full) - 1
    counts = [n for n in (1_000, 4_000, 16_000, 32_000, 64_000) if n < total] + [total]
    rows: dict[int, tuple[list[float], list[float]]] = {}
    for n in counts:
        end = 4 * full._starts[n] if n < total else len(types)
        blob = struct.pack("<HBBIIIII", magic, version, flags, 24, 0, end, end, len(strings)) + types[:end] + strings
        lazy, indexed = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            btf = BTF.from_bytes(blob, lazy=True)
            lazy.append(time.perf_counter() - start)
            btf.find("task_struct", Kind.STRUCT)  # builds the index of named kinds, searches it
            indexed.append(time.perf_counter() - start)
            del btf
        rows[n] = (lazy, indexed)
    load = os.getloadavg()
    print(f"{path}: prefixes of its {total} types; {rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"  {'types':>8}{'lazy parse':>14}{'ns/type':>9}{'+ lookup':>12}")
    for n, (lazy, indexed) in rows.items():
        med = statistics.median(lazy)
        print(f"  {n:>8}{med * 1000:>12.2f}ms{med / n * 1e9:>9.0f}{statistics.median(indexed) * 1000:>10.2f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
