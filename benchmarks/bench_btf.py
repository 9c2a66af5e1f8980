#!/usr/bin/env python3
"""Time parsing the kernel's BTF and resolving an object's CO-RE relocations against it.

    python benchmarks/bench_btf.py [--rounds 5] [--btf /sys/kernel/btf/vmlinux] [--object OBJ]

Prints, best and median of ROUNDS (wall time, this process):
  read          reading the blob (sysfs)
  lazy parse    BTF.from_bytes(lazy=True): what bpfkit.btf.kernel does; types decoded on use
  first lookup  task_struct by name (builds the name-offset array once)
  CO-RE         resolving every relocation of OBJ (default bpf/.output/core_task.bpf.o)
  eager parse   BTF.from_bytes(): every type decoded and checked (what object files get)
  bpftool       `bpftool btf dump file BTF format raw > /dev/null`, for scale (C, and it prints)

No root needed (/sys/kernel/btf/vmlinux is world-readable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bpfkit.btf import BTF, Kind  # noqa: E402


def timed(fn, rounds: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--btf", default="/sys/kernel/btf/vmlinux")
    parser.add_argument("--object", default=str(REPO / "bpf" / ".output" / "core_task.bpf.o"))
    parser.add_argument("--no-eager", action="store_true", help="skip the (slow) eager parse")
    args = parser.parse_args()

    rows = []
    best, med, data = timed(lambda: open(args.btf, "rb").read(), args.rounds)
    rows.append(("read", best, med, f"{len(data) / 1e6:.1f} MB"))  # type: ignore[arg-type]
    best, med, btf = timed(lambda: BTF.from_bytes(data, lazy=True, name="vmlinux"), args.rounds)  # type: ignore[arg-type]
    rows.append(("lazy parse", best, med, f"{len(btf) - 1} types"))  # type: ignore[arg-type]

    def first_lookup():
        fresh = BTF.from_bytes(data, lazy=True)  # type: ignore[arg-type]
        start = time.perf_counter()
        fresh.lookup("task_struct", Kind.STRUCT)
        return time.perf_counter() - start

    lookups = [first_lookup() for _ in range(args.rounds)]
    rows.append(("first lookup", min(lookups), statistics.median(lookups), "task_struct"))

    if os.path.exists(args.object):
        import bpfkit
        from bpfkit.btf.core import CORERelocator

        spec = bpfkit.load_spec(args.object)
        relos = [(p.name, i, r) for p in spec.programs.values() for i, r in p.core_relos]

        def resolve():
            target = BTF.from_bytes(data, lazy=True, name="vmlinux")  # type: ignore[arg-type]
            relocator = CORERelocator(spec.btf, [target])
            start = time.perf_counter()
            for index, (prog, insn, relo) in enumerate(relos):
                relocator.resolve(relo, prog, insn, index)
            return time.perf_counter() - start

        cores = [resolve() for _ in range(args.rounds)]
        rows.append(("CO-RE", min(cores), statistics.median(cores), f"{len(relos)} relocations"))

    if not args.no_eager:
        best, med, _ = timed(lambda: BTF.from_bytes(data), max(1, min(args.rounds, 2)))  # type: ignore[arg-type]
        rows.append(("eager parse", best, med, "every type decoded"))

    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    if os.path.exists(bpftool):
        def dump():
            subprocess.run([bpftool, "btf", "dump", "file", args.btf, "format", "raw"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

        best, med, _ = timed(dump, max(1, min(args.rounds, 3)))
        rows.append(("bpftool", best, med, "dump format raw"))

    print(f"{args.btf}, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"  {'step':<14}{'best':>10}{'median':>10}  note")
    for name, best, med, note in rows:
        print(f"  {name:<14}{best * 1000:>8.1f}ms{med * 1000:>8.1f}ms  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
