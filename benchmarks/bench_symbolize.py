#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Symbolization speed: bpfkit.symbols against bcc's BPF.ksym / BPF.sym, in the same run.

    python3 benchmarks/bench_symbolize.py [--lookups 1000000] [--runs 3]

* kallsyms load: /proc/kallsyms parsed into sorted arrays (bpfkit: KernelSymbols.load; bcc:
  its first BPF.ksym call, which loads its KSyms);
* kernel lookups: ``--lookups`` addresses drawn (seeded) from the text symbols plus an offset
  of 0-63 bytes; bpfkit's Symbolizer.kernel_frame (name, offset, module) and
  KernelSymbols.name (the name only, what BPF.ksym returns);
* user lookups: as many addresses drawn from the executable mappings of a running ``sleep``
  (its binary, libc, ld.so); bpfkit's Symbolizer.user_frame against BPF.sym(addr, pid), the
  first call of each (reading the process's mappings and ELF files) timed apart.

bcc runs in /usr/bin/python3 (Debian's python3-bpfcc) in a subprocess given the same
addresses; when ``import bcc`` fails there the reason is printed instead of its figures.
Times are the best of ``--runs`` (a shared machine inflates the others).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BCC_PYTHON = "/usr/bin/python3"

BCC_WORKER = r"""
import json, sys, time
from array import array
try:
    from bcc import BPF
except Exception as exc:
    print(json.dumps({"error": f"import bcc failed under {sys.executable}: {exc!r}"})); sys.exit(0)
kaddrs, uaddrs = array("Q"), array("Q")
with open(sys.argv[1], "rb") as f: kaddrs.frombytes(f.read())
with open(sys.argv[2], "rb") as f: uaddrs.frombytes(f.read())
pid, runs = int(sys.argv[3]), int(sys.argv[4])
out = {}
t = time.perf_counter(); BPF.ksym(kaddrs[0]); out["kload"] = time.perf_counter() - t
best = None
for _ in range(runs):
    t = time.perf_counter()
    for a in kaddrs: BPF.ksym(a)
    d = time.perf_counter() - t; best = d if best is None else min(best, d)
out["kernel"] = best
t = time.perf_counter(); BPF.sym(uaddrs[0], pid); out["uload"] = time.perf_counter() - t
best = None
for _ in range(runs):
    t = time.perf_counter()
    for a in uaddrs: BPF.sym(a, pid)
    d = time.perf_counter() - t; best = d if best is None else min(best, d)
out["user"] = best
out["ksample"] = [BPF.ksym(a).decode() for a in kaddrs[:5]]
out["usample"] = [BPF.sym(a, pid).decode() for a in uaddrs[:5]]
print(json.dumps(out))
"""


def best_of(runs: int, fn: object) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    from bpfkit.symbols import KernelSymbols, Symbolizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lookups", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(27)

    load = best_of(args.runs, KernelSymbols.load)
    ksyms = KernelSymbols.load()
    print(f"kallsyms: {len(ksyms):,} text symbols, {len(ksyms.modules) - 1} modules")
    kaddrs = array("Q", (ksyms.address_at(rng.randrange(len(ksyms))) + rng.randrange(64)
                         for _ in range(args.lookups)))

    target = subprocess.Popen(["sleep", "600"])
    try:
        time.sleep(0.2)
        sym = Symbolizer()
        maps = sym.process_maps(target.pid)
        spans = [(m.start, m.end) for m in maps if m.path.startswith("/")]
        uaddrs = array("Q", (rng.randrange(*spans[rng.randrange(len(spans))]) for _ in range(args.lookups)))

        sym = Symbolizer()
        t = time.perf_counter()
        sym.user_frame(target.pid, uaddrs[0])
        uload = time.perf_counter() - t
        user_frame, kernel_frame, name = sym.user_frame, sym.kernel_frame, ksyms.name
        sym._kernel = ksyms  # the table loaded above: lookups timed apart from the load

        def kernel_frames() -> None:
            for a in kaddrs:
                kernel_frame(a)

        def kernel_names() -> None:
            for a in kaddrs:
                name(a)

        def user_frames() -> None:
            pid = target.pid
            for a in uaddrs:
                user_frame(pid, a)

        ours = {"kload": load, "kernel": best_of(args.runs, kernel_frames), "kname": best_of(args.runs, kernel_names),
                "uload": uload, "user": best_of(args.runs, user_frames)}
        named = sum(1 for a in uaddrs[:10000] if user_frame(target.pid, a).name)

        with tempfile.TemporaryDirectory() as tmp:
            kf, uf = Path(tmp) / "k", Path(tmp) / "u"
            kf.write_bytes(kaddrs.tobytes())
            uf.write_bytes(uaddrs.tobytes())
            if Path(BCC_PYTHON).exists():
                run = subprocess.run([BCC_PYTHON, "-c", BCC_WORKER, str(kf), str(uf), str(target.pid), str(args.runs)],
                                     capture_output=True, text=True, check=False)
                try:
                    bcc = json.loads(run.stdout.strip().splitlines()[-1])
                except (IndexError, ValueError):
                    bcc = {"error": f"bcc worker failed: {run.stderr.strip()[-300:]}"}
            else:
                bcc = {"error": f"{BCC_PYTHON} does not exist (python3-bpfcc not installed)"}
    finally:
        target.kill()
        target.wait()

    n = args.lookups
    print(f"user addresses: {len(spans)} file mappings of sleep (pid {target.pid}); "
          f"{named / 100:.0f}% named by bpfkit (the rest: between functions, or files without symbols)")
    print(f"{'':34}{'bpfkit':>14}{'bcc':>14}{'bcc/bpfkit':>12}")

    def row(label: str, mine: float, theirs: float | None, per: int = 0) -> None:
        fmt = (lambda s: f"{s / per * 1e9:10.0f} ns") if per else (lambda s: f"{s * 1e3:10.1f} ms")
        ratio = f"{theirs / mine:11.2f}x" if theirs else f"{'-':>12}"
        print(f"{label:34}{fmt(mine):>14}{fmt(theirs) if theirs else '-':>14}{ratio}")

    row("kallsyms load", ours["kload"], bcc.get("kload"))
    row(f"kernel lookup (x{n:,}), per call", ours["kernel"], bcc.get("kernel"), n)
    row("  name only (KernelSymbols.name)", ours["kname"], bcc.get("kernel"), n)
    row("user: first lookup (maps + ELF)", ours["uload"], bcc.get("uload"))
    row(f"user lookup (x{n:,}), per call", ours["user"], bcc.get("user"), n)
    print(f"totals for {n:,} lookups: bpfkit kernel {ours['kernel']:.2f} s, user {ours['user']:.2f} s"
          + (f"; bcc kernel {bcc['kernel']:.2f} s, user {bcc['user']:.2f} s" if "kernel" in bcc else ""))
    if "error" in bcc:
        print(f"bcc: not measured: {bcc['error']}")
    else:
        mine_k = [kernel_frame(a).name for a in kaddrs[:5]]
        print(f"same names (first 5 kernel addresses): {mine_k == bcc['ksample']} ({mine_k} / {bcc['ksample']})")


if __name__ == "__main__":
    main()
