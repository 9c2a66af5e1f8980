#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Symbolization speed: bpfkit.symbols against bcc's BPF.ksym / BPF.sym, in the same run.

    python3 benchmarks/bench_symbolize.py [--lookups 1000000] [--runs 2] [--passes 2]

Like for like on both sides (each row says what it includes):

* kallsyms load: /proc/kallsyms read and indexed, then the first kernel lookup (bpfkit:
  KernelSymbols.load + Symbolizer.kernel_frame; bcc: its first BPF.ksym after dropping its
  symbol caches, which is when it reads /proc/kallsyms);
* kernel lookups: ``--lookups`` addresses drawn (seeded) from the text symbols plus an offset
  of 0-63 bytes; bpfkit's Symbolizer.kernel_frame (name, offset, module: a Frame) against
  BPF.ksym (bcc resolves name, offset and module too, and returns the name);
* user first lookups: for each file mapped executable by a running ``sleep`` (its binary,
  libc, ld.so), the first lookup of one address in it with every cache empty: both sides
  read /proc/PID/maps and that one file's symbols (bcc loads a separate debug file with them;
  bpfkit reads one when an address misses the binary's own tables: the libc rows take one
  address that .dynsym names and one that only the debug file does);
* user lookups from cold: the first 1,000 of those addresses with every cache empty (maps,
  ELF files, and the sorting bpfkit leaves until a file has had a few lookups, which it
  answers by scanning the file's functions);
* user lookups: ``--lookups`` addresses drawn from those mappings; Symbolizer.user_frame
  against BPF.sym(addr, pid), caches warm.

bcc runs in /usr/bin/python3 (Debian's python3-bpfcc) in a subprocess given the same
addresses; when ``import bcc`` fails there the reason is printed instead of its figures. The
two sides alternate ``--passes`` times (bcc, bpfkit, bcc, ...) and each figure is the best
of all its runs (ten times as many for the first user lookups, which take about a millisecond),
timed as the CPU time of the thread doing the work (time.thread_time: user
and system time, so the kernel's reading of /proc/kallsyms counts; waiting for a CPU on a
shared machine does not; bcc symbolizes in the calling thread too). Ratios are bcc's time / bpfkit's
(above 1: bpfkit is faster); each row ends with its verdict: at least as fast as bcc. The target
line is issue #27's (the kallsyms load and the million kernel and user lookups); the first-lookup
rows are cold-start detail with their own verdicts, summed up on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BCC_PYTHON = "/usr/bin/python3"
TARGET = 1.0  # bcc's time / bpfkit's: at least as fast
FIRSTS = 10  # first user lookups take ~1 ms: ten times the runs, both sides (as in BCC_WORKER)

BCC_WORKER = r"""
import json, sys, time
from array import array
try:
    from bcc import BPF
    from bcc.libbcc import lib
except Exception as exc:
    print(json.dumps({"error": f"import bcc failed under {sys.executable}: {exc!r}"})); sys.exit(0)
kaddrs, uaddrs = array("Q"), array("Q")
with open(sys.argv[1], "rb") as f: kaddrs.frombytes(f.read())
with open(sys.argv[2], "rb") as f: uaddrs.frombytes(f.read())
pid, runs = int(sys.argv[3]), int(sys.argv[4])
FIRSTS = 10  # first user lookups take ~1 ms: ten times the runs, both sides
firsts = json.loads(sys.argv[5])
def best(fn):
    b = None
    for _ in range(runs):
        t = time.thread_time(); fn(); d = time.thread_time() - t
        b = d if b is None else min(b, d)
    return b
def drop():
    # Free bcc's symbol caches (untimed, as bpfkit's are freed after their timing): the next
    # call makes a new SymbolCache and loads its symbols again. Only dropped, they would leak
    # (SymbolCache has no destructor) and slow the later runs down.
    for key, cache in BPF._sym_caches.items():
        lib.bcc_free_symcache(cache.cache, key)
    BPF._sym_caches.clear()
def fresh(fn, times=1):
    b = None
    for _ in range(runs * times):
        drop()
        t = time.thread_time(); fn(); d = time.thread_time() - t
        b = d if b is None else min(b, d)
    drop()
    return b
out = {"kload": fresh(lambda: BPF.ksym(kaddrs[0]))}
def kernel():
    for a in kaddrs: BPF.ksym(a)
BPF.ksym(kaddrs[0])  # loaded before the timing, as bpfkit's table is
out["kernel"] = best(kernel)
out["ufirst"] = {label: fresh(lambda a=a: BPF.sym(a, pid), FIRSTS) for label, a in firsts.items()}
def cold():
    for a in uaddrs[:1000]: BPF.sym(a, pid)
out["ucold"] = fresh(cold)
BPF.sym(uaddrs[0], pid)
def user():
    for a in uaddrs: BPF.sym(a, pid)
out["user"] = best(user)
out["ksample"] = [BPF.ksym(a).decode() for a in kaddrs[:5]]
out["usample"] = [BPF.sym(a, pid).decode() for a in uaddrs[:5]]
print(json.dumps(out))
"""


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """The least CPU time of ``runs`` calls; what a call returns is freed after its timing
    (as the bcc worker frees its symbol caches between its timed calls)."""
    best = float("inf")
    for _ in range(runs):
        t = time.thread_time()
        kept = fn()
        best = min(best, time.thread_time() - t)
        del kept
    return best


def run_bcc(kf: Path, uf: Path, pid: int, runs: int, firsts: dict[str, int]) -> dict[str, object]:
    if not Path(BCC_PYTHON).exists():
        return {"error": f"{BCC_PYTHON} does not exist (python3-bpfcc not installed)"}
    run = subprocess.run([BCC_PYTHON, "-c", BCC_WORKER, str(kf), str(uf), str(pid), str(runs), json.dumps(firsts)],
                         capture_output=True, text=True, check=False)
    try:
        out: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
        return out
    except (IndexError, ValueError):
        return {"error": f"bcc worker failed: {run.stderr.strip()[-300:]}"}


def merge_best(into: dict[str, object], new: dict[str, object]) -> dict[str, object]:
    """Per figure, the lower of two passes (nested dicts of figures likewise)."""
    if not into or "error" in new:
        return into if into else new
    for key, val in new.items():
        old = into.get(key)
        if isinstance(val, float) and isinstance(old, float):
            into[key] = min(old, val)
        elif isinstance(val, dict) and isinstance(old, dict):
            into[key] = {k: min(old[k], v) for k, v in val.items()}
    return into


def main() -> None:
    from bpfkit.symbols import FileSymbols, KernelSymbols, Symbolizer

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--lookups", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2, help="runs of each measurement per pass")
    ap.add_argument("--passes", type=int, default=2, help="alternations of bcc and bpfkit")
    args = ap.parse_args()
    rng = random.Random(27)

    ksyms = KernelSymbols.load()
    text = [i for i in range(len(ksyms)) if ksyms._lines[i][ksyms._width + 1] in "tTwW"]
    print(f"kallsyms: {len(text):,} text symbols of {len(ksyms):,}, {len(ksyms.modules) - 1} modules")
    kaddrs = array("Q", (ksyms.address_at(text[rng.randrange(len(text))]) + rng.randrange(64)
                         for _ in range(args.lookups)))

    target = subprocess.Popen(["sleep", "600"])
    try:
        time.sleep(0.2)
        pid = target.pid
        maps = [m for m in Symbolizer().process_maps(pid) if m.path.startswith("/")]
        spans = [(m.start, m.end) for m in maps]
        # Drawn as offsets into the mappings (seeded): the same file offsets in every run,
        # wherever address-space randomization put the files.
        uaddrs = array("Q", (lo + rng.randrange(hi - lo) for lo, hi in (spans[rng.randrange(len(spans))]
                                                                         for _ in range(args.lookups))))
        # The first lookups: the first drawn address in each file; in libc, the first in an
        # exported function (.dynsym names it) and the first in a local one (only its debug
        # file does, when one is installed).
        firsts = {os.path.basename(m.path): next(a for a in uaddrs if m.start <= a < m.end) for m in maps}
        libc = next((m for m in maps if "/libc.so" in m.path), None)
        if libc is not None:
            own = FileSymbols.load(libc.path, debug_root="/nonexistent")
            full = FileSymbols.load(libc.path)
            for label, in_own in (("libc, exported function", True), ("libc, local (debug file)", False)):
                pick = next((a for a in uaddrs if libc.start <= a < libc.end and full.lookup(libc.file_offset(a))
                             and bool(own.lookup(libc.file_offset(a))) == in_own), None)
                if pick is not None:
                    firsts[label] = pick
            if len(firsts) == len(maps) + 2:  # libc's first drawn address is one of the two
                del firsts[os.path.basename(libc.path)]

        def ours() -> dict[str, object]:
            def kload() -> Symbolizer:
                s = Symbolizer()
                s._kernel = KernelSymbols.load()
                s.kernel_frame(kaddrs[0])
                return s

            sym = Symbolizer()
            sym._kernel = ksyms  # the table loaded above: lookups timed apart from the load
            kernel_frame, user_frame = sym.kernel_frame, sym.user_frame

            def kernel_frames() -> None:
                for a in kaddrs:
                    kernel_frame(a)

            def user_frames() -> None:
                for a in uaddrs:
                    user_frame(pid, a)

            def cold() -> Symbolizer:
                fresh = Symbolizer()
                for a in uaddrs[:1000]:
                    fresh.user_frame(pid, a)
                return fresh

            def first(a: int) -> Symbolizer:
                fresh = Symbolizer()
                fresh.user_frame(pid, a)
                return fresh

            user_frame(pid, uaddrs[0])
            return {"kload": best_of(args.runs, kload), "kernel": best_of(args.runs, kernel_frames),
                    "ufirst": {label: best_of(args.runs * FIRSTS, lambda a=a: first(a))
                               for label, a in firsts.items()},
                    "ucold": best_of(args.runs, cold), "user": best_of(args.runs, user_frames)}

        mine: dict[str, object] = {}
        bcc: dict[str, object] = {}
        with tempfile.TemporaryDirectory() as tmp:
            kf, uf = Path(tmp) / "k", Path(tmp) / "u"
            kf.write_bytes(kaddrs.tobytes())
            uf.write_bytes(uaddrs.tobytes())
            for _ in range(args.passes):
                bcc = merge_best(bcc, run_bcc(kf, uf, pid, args.runs, firsts))
                mine = merge_best(mine, ours())
        check = Symbolizer()
        named = sum(1 for a in uaddrs[:10000] if check.user_frame(pid, a).name)
        mine_k = [check.kernel_frame(a).name for a in kaddrs[:5]]
    finally:
        target.kill()
        target.wait()

    n = args.lookups
    load = os.getloadavg()
    print(f"user addresses: {len(spans)} file mappings of sleep (pid {pid}); {named / 100:.0f}% named by bpfkit "
          "(the rest: between functions, or files without symbols)")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; best of {args.runs} runs x {args.passes} passes")
    print(f"{'':44}{'bpfkit':>11}{'bcc':>11}{'bcc/bpfkit':>11}  target (>= {TARGET:.2f}x)")
    verdicts: list[tuple[str, bool, bool]] = []  # (row, met, one of the issue's target rows)

    def row(label: str, ours_s: object, theirs: object, per: int = 0, issue: bool = False) -> None:
        assert isinstance(ours_s, float)
        fmt = (lambda s: f"{s / per * 1e9:7.0f} ns") if per else (lambda s: f"{s * 1e3:7.2f} ms")
        if isinstance(theirs, float):
            ratio = theirs / ours_s
            verdict = "met" if ratio >= TARGET else "NOT met"
            verdicts.append((label, verdict == "met", issue))
            print(f"{label:44}{fmt(ours_s):>11}{fmt(theirs):>11}{ratio:10.2f}x  {verdict}")
        else:
            print(f"{label:44}{fmt(ours_s):>11}{'-':>11}{'-':>11}  -")

    ufirst_mine = mine["ufirst"]
    ufirst_bcc = bcc.get("ufirst", {})
    assert isinstance(ufirst_mine, dict) and isinstance(ufirst_bcc, dict)
    row("kallsyms load + first lookup", mine["kload"], bcc.get("kload"), issue=True)
    row(f"kernel lookup (x{n:,}), per call", mine["kernel"], bcc.get("kernel"), n, issue=True)
    for label in ufirst_mine:
        row(f"user first lookup: {label}", ufirst_mine[label], ufirst_bcc.get(label))
    row("user: 1,000 lookups from cold", mine["ucold"], bcc.get("ucold"))
    row(f"user lookup (x{n:,}), per call", mine["user"], bcc.get("user"), n, issue=True)
    if "error" in bcc:
        print(f"bcc: not measured: {bcc['error']}")
        print("target (issue #27): not measured (no bcc)")
        return
    print(f"same names (first 5 kernel addresses): {mine_k == bcc['ksample']} ({mine_k} / {bcc['ksample']})")
    # Issue #27's target names the kallsyms load and the lookups; the first-lookup rows are
    # cold-start detail this benchmark adds, reported with their own verdicts.
    target = [met for _, met, issue in verdicts if issue]
    print(f"target (issue #27: kallsyms load, {n:,} kernel and user lookups at least as fast as bcc): "
          f"{'met' if all(target) else 'NOT met'} ({sum(target)}/{len(target)} rows)")
    slower = [label for label, met, _ in verdicts if not met]
    print(f"all rows: {len(verdicts) - len(slower)}/{len(verdicts)} at least as fast as bcc"
          + (f"; slower: {', '.join(slower)}" if slower else ""))


if __name__ == "__main__":
    main()
