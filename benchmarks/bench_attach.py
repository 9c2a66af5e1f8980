#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Attach and detach uprobes on distinct library functions with bpfkit and with libbpf, the
same work on both sides in the same run, and print both against the targets of issue #8.

    python3 benchmarks/bench_attach.py [--quick] [--count 200] [--multi-count 1000]
                                       [--samples 3] [--workers N] [--resolve inside|outside]
                                       [--all-processes] [--no-libbpf] [--json]
    python3 benchmarks/bench_attach.py --scaling [--sizes 10,100,1000,10000] [--single-max 1000]
    python3 benchmarks/bench_attach.py --ioctl-only [--ioctl-count 275]

Equal work: both sides attach the same functions of the same binary (given by path) with the
same program, in the same pid; the object is loaded outside the timing on both. With
``--resolve inside`` (the default) the symbol lookup is inside the attach timing on both:
bpfkit parses the binary's symbols from a fresh ``Executable`` (its cache cleared) and looks
each name up, libbpf is given each name (``bpf_uprobe_opts.func_name``: it opens the binary
and searches its symbols for every probe). With ``--resolve outside`` both are given file
offsets computed before the timing. The output says which.

Every row is at least ``--samples`` samples (median, and min); the two tools alternate which
goes first from one sample to the next (the machine's load drifts, and a mass detach leaves
the kernel with grace-period work that slows whatever comes next).

Rows (seconds):

* one-by-one attach of ``--count`` functions: bpfkit ``link.attach_many(names, lambda s:
  exe.uprobe(s, prog))`` (one perf-event uprobe from the uprobe PMU + BPF_LINK_CREATE per
  function), libbpf ``bpf_program__attach_uprobe_opts`` per function. Target: bpfkit within
  1.5x of libbpf.
* sequential detach: bpfkit ``close_links(group, workers=1)``, libbpf ``bpf_link__destroy`` of
  each link in order.
* concurrent detach: bpfkit ``group.close()`` (LinkGroup, ``--workers`` threads: the bpf_links
  released from a pool, the perf events destroyed after, see bpfkit/link/group.py); libbpf's
  best, ``bpf_link__destroy`` from ``--workers`` threads. Targets: bpfkit faster than libbpf's
  sequential detach (issue #8), and not slower than libbpf's threaded one.
* uprobe_multi attach+detach of ``--multi-count`` functions (one link;
  ``exe.uprobe_multi(names, prog, mode="multi")`` / ``bpf_program__attach_uprobe_multi``),
  measured first (a grace period takes far longer while the kernel works off what a mass
  detach queued). Target: well under 0.2 s (met at 0.15 s or less). libbpf 1.4 cannot resolve
  names in a binary without .symtab (a stripped libc): then both sides are given offsets for
  these rows, and the output says so.

Detaching dominates the run: on Linux 6.18 each perf-event uprobe close waits for RCU grace
periods (about 0.1 s), most of it under a kernel-wide mutex (event_mutex), so the detach of N
single uprobes takes about N x 0.1 s however many threads close them. That is why the default
``--count`` is 200 (about 4 minutes in all: 12 attach+detach rounds), not the 1,000 of issue #8
(``--count 1000``: about 20 minutes); the per-probe cost does not change with the count (see
``--scaling``). ``--quick``: 50 functions, about a minute.

``--scaling``: attach and detach time against the probe count (``--sizes``), bpfkit and libbpf
side by side: single perf-event uprobes (bpfkit's concurrent close, libbpf's threaded destroy)
up to ``--single-max`` (default 1,000; above that the detach alone would take N x the
per-probe cost, which the table prints instead), and one uprobe_multi link at every size.
Functions from the first binary with enough of them (libLLVM, libcrypto, libc; or
``--binary``); offsets resolved outside the timing unless ``--resolve inside``; three samples
per size below 1,000, one from 1,000 up.

``--ioctl-only`` (issue #19): the first ``--ioctl-count`` functions attached with
``mode="ioctl"`` (PERF_EVENT_IOC_SET_BPF, the fallback before 5.15), then closed one by one and
concurrently.

The functions: STT_FUNC symbols with a size, each the only name at its address (no aliases),
defined once (no symbol-versioned twins), no IFUNC, no leading underscore (except C++'s
mangled ``_Z`` names), not starting with an instruction the kernel cannot probe (x86: a LOCK
prefix, int3, hlt ...), in name order. Probes fire only in an idle ``sleep`` child (a pid
filter) unless ``--all-processes``: a uprobe on a libc function otherwise traps in every
process on the machine that calls it.

libbpf: benchmarks/c/attach_bench.c, linked statically against libbpf >= 1.3
(bookworm-backports' libbpf-dev, fetched by benchmarks/c/fetch_libbpf.sh into
~/.cache/bpfkit/libbpf-backports/root without touching the system; or $BPFKIT_LIBBPF_DIR), built
in this run (benchmarks/c_harness.py). Needs root; prints the load average, which moves the
detach figures a lot on a shared machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from c_harness import CACHE, build, libbpf_dir  # noqa: E402

from bpfkit import link  # noqa: E402
from bpfkit.link._binary import STT_FUNC, STT_GNU_IFUNC, BinaryImage  # noqa: E402
from bpfkit.link.group import DEFAULT_CLOSE_WORKERS, close_links  # noqa: E402

OBJ = REPO / "bpf/.output/group_uprobe.bpf.o"
# Where --scaling looks for many functions, best first.
SCALING_BINARIES = ("libLLVM", "libLLVM-19", "libcrypto", "libc")


def probe_targets(exe: link.Executable, count: int) -> list[str]:
    """``count`` functions of ``exe`` that are safe and unambiguous to probe by name (see above)."""
    ok = suitable_functions(exe)
    if len(ok) < count:
        sys.exit(f"only {len(ok)} suitable functions in {exe.path}, asked for {count}")
    return ok[:count]


def suitable_functions(exe: link.Executable) -> list[str]:
    addrs: dict[str, set[int]] = collections.defaultdict(set)
    names_at: dict[int, set[str]] = collections.defaultdict(set)
    ifuncs = set()
    for sym in exe.image.symbols:
        name = sym.name.split("@", 1)[0]
        if not sym.defined:
            continue
        if sym.type == STT_GNU_IFUNC:
            ifuncs.add(name)
        elif sym.type == STT_FUNC and sym.value and sym.size:
            addrs[name].add(sym.value)
            names_at[sym.value].add(name)
    with open(exe.path, "rb") as f:
        data = f.read()
    ok = []
    for names in names_at.values():
        (name,) = names if len(names) == 1 else ("_",)
        if (name.startswith("_") and not name.startswith("_Z")) or name in ifuncs or len(addrs[name]) != 1:
            continue
        # The kernel's x86 instruction check refuses some first instructions with ENOTSUPP:
        # a LOCK prefix (pthread_spin_lock's "lock decl"), int3/int/into, int1, hlt.
        off = exe.symbol_offset(name)
        if os.uname().machine == "x86_64" and data[off] in (0xF0, 0xCC, 0xCD, 0xCE, 0xF1, 0xF4):
            continue
        ok.append(name)
    ok.sort()
    return ok


@dataclass
class Targets:
    """The functions probed: names, their file offsets, and the binary's path."""

    path: str
    names: list[str]
    offsets: list[int]

    @classmethod
    def of(cls, exe: link.Executable, count: int) -> Targets:
        names = probe_targets(exe, count)
        return cls(exe.path, names, [exe.symbol_offset(n) for n in names])

    def head(self, count: int) -> Targets:
        return Targets(self.path, self.names[:count], self.offsets[:count])


@dataclass
class Samples:
    """Seconds per sample of each (side, row)."""

    runs: dict[tuple[str, str], list[float]] = field(default_factory=lambda: collections.defaultdict(list))

    def add(self, side: str, row: str, secs: float) -> None:
        self.runs[side, row].append(secs)

    def median(self, side: str, row: str) -> float | None:
        runs = self.runs.get((side, row))
        return statistics.median(runs) if runs else None

    def text(self, side: str, row: str) -> str:
        runs = self.runs.get((side, row))
        if not runs:
            return "-"
        return f"{statistics.median(runs):.3f} ({min(runs):.3f})"


# ------------------------------------------------------------------------ libbpf side
def run_libbpf(loader: Path, t: Targets, pid: int, mode: str, resolve: str, threads: int = 1) -> dict[str, Any]:
    """One run of benchmarks/c/attach_bench.c: attach ``t`` (``mode`` single or multi), detach."""
    symfile = CACHE / "bench" / f"symbols-{os.getpid()}.txt"
    symfile.write_text("".join(f"{n} {o:x}\n" for n, o in zip(t.names, t.offsets)))
    by = "names" if resolve == "inside" else "offsets"
    try:
        out = subprocess.run([str(loader), str(OBJ), t.path, str(symfile), mode, str(pid), by, str(threads)],
                             check=True, capture_output=True, text=True)
    finally:
        symfile.unlink()
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------------ bpfkit side
def bpfkit_single(prog: Any, t: Targets, pid: int, resolve: str, workers: int, mode: str = "auto") -> tuple[float, float]:
    """(attach, detach) seconds of one perf-event uprobe per function, then close_links."""
    if resolve == "inside":
        BinaryImage._CACHE.clear()  # parse the symbols inside the timing, as libbpf does
        start = time.perf_counter()
        exe = link.Executable(t.path)
        group = link.attach_many(t.names, lambda s: exe.uprobe(s, prog, pid=pid, mode=mode))
    else:
        exe = link.Executable(t.path)
        start = time.perf_counter()
        group = link.attach_many(t.offsets, lambda o: exe.uprobe(None, prog, file_offset=o, pid=pid, mode=mode))
    attach = time.perf_counter() - start
    start = time.perf_counter()
    close_links(group, workers=workers)
    return attach, time.perf_counter() - start


def bpfkit_multi(prog: Any, t: Targets, pid: int, resolve: str) -> tuple[float, float]:
    """(attach, detach) seconds of one uprobe_multi link on every function."""
    if resolve == "inside":
        BinaryImage._CACHE.clear()
        start = time.perf_counter()
        multi = link.Executable(t.path).uprobe_multi(t.names, prog, pid=pid, mode="multi")
    else:
        exe = link.Executable(t.path)
        start = time.perf_counter()
        multi = exe.uprobe_multi(None, prog, offsets=t.offsets, pid=pid, mode="multi")
    attach = time.perf_counter() - start
    start = time.perf_counter()
    multi.close()
    return attach, time.perf_counter() - start


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text} ...", file=sys.stderr, flush=True)


def alternating(k: int) -> tuple[str, str]:
    """The order of the two sides in sample ``k``."""
    return ("libbpf", "bpfkit") if k % 2 == 0 else ("bpfkit", "libbpf")


class Bench:
    """The loaded object, the libbpf harness and the pid both sides probe."""

    def __init__(self, coll: Any, loader: Path | None, pid: int, workers: int) -> None:
        self.prog, self.mprog = coll.programs["group_uprobe"], coll.programs["group_uprobe_multi"]
        self.loader, self.pid, self.workers = loader, pid, workers
        self.order = 0  # samples taken so far: who goes first alternates

    def sides(self) -> tuple[str, ...]:
        order = alternating(self.order)
        self.order += 1
        return order if self.loader else ("bpfkit",)

    def warm(self, t: Targets) -> None:
        """One probe attached and closed, untimed: what bpfkit learns about the kernel once per
        process (the uprobe PMU's type, link support) as the libbpf harness does before its
        timing (an object's first attach probes FEAT_PERF_LINK)."""
        bpfkit_single(self.prog, t.head(1), self.pid, "outside", 1)

    def multi_resolve(self, t: Targets, resolve: str) -> str:
        """How both sides name the functions in the uprobe_multi rows: offsets when libbpf
        cannot resolve the names in this binary (one warm-up run, untimed, tells)."""
        if resolve == "outside" or self.loader is None:
            return resolve
        warm = run_libbpf(self.loader, t, self.pid, "multi", resolve)
        return "inside" if warm["resolve"] == "names" else "outside"

    def multi(self, s: Samples, t: Targets, resolve: str, samples: int, row: str = "multi") -> None:
        for _ in range(samples):
            for side in self.sides():
                if side == "libbpf":
                    assert self.loader is not None
                    r = run_libbpf(self.loader, t, self.pid, "multi", resolve)
                    attach, detach = r["attach"], r["detach"]
                else:
                    attach, detach = bpfkit_multi(self.mprog, t, self.pid, resolve)
                s.add(side, f"{row} attach", attach)
                s.add(side, f"{row} detach", detach)
                s.add(side, row, attach + detach)

    def single(self, s: Samples, t: Targets, resolve: str, workers: int, detach_row: str, attach_row: str = "attach") -> None:
        for side in self.sides():
            step(f"{side}: {len(t.names)} uprobes, attach, then detach "
                 + ("one by one" if workers == 1 else f"from {workers} threads"))
            if side == "libbpf":
                assert self.loader is not None
                r = run_libbpf(self.loader, t, self.pid, "single", resolve, workers)
                attach, detach = r["attach"], r["detach"]
            else:
                attach, detach = bpfkit_single(self.prog, t, self.pid, resolve, workers)
            s.add(side, attach_row, attach)
            s.add(side, detach_row, detach)


def run_ioctl(prog: Any, t: Targets, pid: int, workers: int, rounds: int) -> Samples:
    """Attach ``t`` in ioctl mode and close them one by one, and again concurrently;
    ``rounds`` times, the order swapped every round."""
    s = Samples()
    for r in range(rounds):
        for w in ([1, workers] if r % 2 == 0 else [workers, 1]):
            step(f"bpfkit: {len(t.names)} uprobes in ioctl mode, round {r + 1}: attach, then close "
                 + ("one by one" if w == 1 else f"from {w} threads"))
            attach, detach = bpfkit_single(prog, t, pid, "outside", w, mode="ioctl")
            s.add("bpfkit", "attach", attach)
            s.add("bpfkit", "detach seq" if w == 1 else "detach conc", detach)
            time.sleep(2)
    return s


def load_text() -> str:
    load = os.getloadavg()
    return f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 functions (about a minute)")
    ap.add_argument("--count", type=int, help="single uprobes per sample (default 200; --quick 50)")
    ap.add_argument("--multi-count", type=int, default=1000, help="functions of the uprobe_multi rows")
    ap.add_argument("--samples", type=int, default=3, help="samples per row (at least 3 for the comparison)")
    ap.add_argument("--workers", type=int, default=DEFAULT_CLOSE_WORKERS)
    ap.add_argument("--resolve", choices=("inside", "outside"),
                    help="symbol resolution inside the attach timing on both sides, or outside on both "
                         "(default: inside; outside for --scaling)")
    ap.add_argument("--all-processes", action="store_true", help="probe every process (pid -1)")
    ap.add_argument("--no-libbpf", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="attach and detach against the probe count")
    ap.add_argument("--sizes", default="10,100,1000,10000", help="--scaling's probe counts")
    ap.add_argument("--single-max", type=int, default=1000, help="--scaling: single uprobes up to this count")
    ap.add_argument("--binary", help="--scaling: the binary whose functions are probed")
    ap.add_argument("--ioctl-only", action="store_true", help="only the ioctl-mode rows (issue #19)")
    ap.add_argument("--ioctl-count", type=int, default=275, help="uprobes for the ioctl-mode rows")
    ap.add_argument("--ioctl-rounds", type=int, default=2, help="ioctl-mode rounds, the order swapped each round")
    args = ap.parse_args()
    if args.count is None:
        args.count = 50 if args.quick else 200
    if args.resolve is None:
        args.resolve = "outside" if args.scaling else "inside"
    if args.samples < 1:
        ap.error("--samples must be at least 1")

    import bpfkit

    # Two fds a single probe (perf event and bpf_link): 10,000 probes need more than 1,024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 1 << 16)), hard))
    subprocess.run(["make", "-s", "-C", str(REPO / "bpf"), f".output/{OBJ.name}"], check=True)
    loader = None
    if not (args.no_libbpf or args.ioctl_only):
        root = libbpf_dir()
        loader = build(REPO / "benchmarks/c/attach_bench.c", root) if root else None
    child = None if args.all_processes else subprocess.Popen(["sleep", "3600"])
    pid = -1 if child is None else child.pid
    where = "every process" if args.all_processes else "a sleep child (pid filter)"
    try:
        with bpfkit.Collection(bpfkit.load_spec(str(OBJ))) as coll:
            bench = Bench(coll, loader, pid, args.workers)
            if args.ioctl_only:
                t = Targets.of(link.Executable("libc"), args.ioctl_count)
                report_ioctl(args, t, where, run_ioctl(bench.prog, t, pid, args.workers, args.ioctl_rounds))
            elif args.scaling:
                scaling(args, bench, where)
            else:
                compare(args, bench, where)
    finally:
        if child:
            child.kill()
            child.wait()
    return 0


# ------------------------------------------------------------------------ the comparison
def compare(args: argparse.Namespace, bench: Bench, where: str) -> None:
    exe = link.Executable("libc")
    every = Targets.of(exe, max(args.count, args.multi_count))
    t, mt = every.head(args.count), every.head(args.multi_count)
    s = Samples()
    bench.warm(t)
    multi_resolve = bench.multi_resolve(mt, args.resolve)
    step(f"uprobe_multi of {len(mt.names)} functions x{args.samples}")
    bench.multi(s, mt, multi_resolve, args.samples)
    time.sleep(2)  # let the kernel free the multi links' uprobes (same offsets, deferred)
    methods = [(1, "detach seq"), (args.workers, "detach conc")]
    for k in range(args.samples):
        # The methods swap each sample too, so that each sees both tools go first.
        for workers, row in (methods if k % 2 == 0 else methods[::-1]):
            bench.single(s, t, args.resolve, workers, row)
    if args.json:
        print(json.dumps({"count": len(t.names), "multi_count": len(mt.names), "resolve": args.resolve,
                          "multi_resolve": multi_resolve, "runs": {f"{a}: {b}": v for (a, b), v in s.runs.items()},
                          "loadavg": os.getloadavg(), "kernel": os.uname().release}))
        return
    version = ""
    if bench.loader:
        version = run_libbpf(bench.loader, t.head(1), bench.pid, "multi", "outside")["libbpf"]
    resolve_text = {"inside": "symbol resolution inside the attach timing on both sides",
                    "outside": "symbol resolution outside the timing on both sides (file offsets given)"}
    print(f"{len(t.names)} single uprobes and one uprobe_multi of {len(mt.names)} on distinct functions of {t.path}, "
          f"probes in {where}; kernel {os.uname().release}, {load_text()}")
    print(f"single: {resolve_text[args.resolve]}; uprobe_multi: {resolve_text[multi_resolve]}"
          + (" (libbpf cannot resolve names in a binary without .symtab)" if multi_resolve != args.resolve else ""))
    sides = f"bpfkit and libbpf {version} alternating which goes first" if bench.loader else "bpfkit alone (no libbpf)"
    print(f"median (min) of {args.samples}+ samples, {sides}; concurrent = {args.workers} threads on both sides")
    print(f"{'':34} {'bpfkit':>17}  {'libbpf':>17}  {'ratio':>6}  target")

    def row(label: str, ours: str, theirs: str | None = None, target: str = "",
            met: Callable[[float, float], bool] | None = None) -> None:
        theirs = theirs or ours
        o, l_ = s.median("bpfkit", ours), s.median("libbpf", theirs)
        ratio = f"{o / l_:5.2f}x" if o is not None and l_ else "     -"
        verdict = ""
        if met is not None and o is not None and l_:
            verdict = "  met" if met(o, l_) else "  NOT met"
        print(f"{label:34} {s.text('bpfkit', ours):>17}  {s.text('libbpf', theirs):>17}  {ratio:>6}  {target}{verdict}")

    row("one-by-one attach", "attach", target="<= 1.5x libbpf", met=lambda o, l_: o <= 1.5 * l_)
    row("sequential detach", "detach seq")
    row("concurrent detach", "detach conc", target="vs libbpf threaded: not slower",
        met=lambda o, l_: o <= l_)
    row("concurrent vs libbpf sequential", "detach conc", "detach seq", target="< libbpf sequential (#8)",
        met=lambda o, l_: o < l_)
    n = len(t.names)
    for side in ("bpfkit", "libbpf"):
        per = [s.median(side, r) for r in ("detach seq", "detach conc")]
        if per[0] is not None and per[1] is not None:
            print(f"  {side} detach per probe: {1000 * per[0] / n:.0f} ms sequential, {1000 * per[1] / n:.0f} ms concurrent")
    multi = s.median("bpfkit", "multi")
    row("uprobe_multi attach+detach", "multi", target="well under 0.2 s (<= 0.15 s)",
        met=lambda o, _l: o <= 0.15)
    if not bench.loader and multi is not None:
        print(f"  (no libbpf) bpfkit uprobe_multi: {'met' if multi <= 0.15 else 'NOT met'}")
    row("  uprobe_multi attach", "multi attach")
    row("  uprobe_multi detach", "multi detach")


def report_ioctl(args: argparse.Namespace, t: Targets, where: str, s: Samples) -> None:
    n = len(t.names)
    print(f"{n} uprobes on distinct libc functions in ioctl mode, probes in {where}; kernel "
          f"{os.uname().release}, {load_text()}")
    for label, row in (("attach", "attach"), ("sequential detach (before)", "detach seq"),
                       (f"concurrent detach ({args.workers} threads)", "detach conc")):
        med = s.median("bpfkit", row) or 0.0
        runs = ", ".join(f"{x:.1f}" for x in s.runs["bpfkit", row])
        print(f"bpfkit ioctl mode: {label:34} {med:8.3f} s  {1000 * med / n:4.0f} ms/probe  runs: {runs}")


# ------------------------------------------------------------------------ scaling
def scaling_binary(wanted: str | None, count: int) -> link.Executable:
    """``wanted``, or the first of SCALING_BINARIES with ``count`` suitable functions (else the
    one with the most)."""
    if wanted:
        return link.Executable(wanted)
    best: tuple[int, link.Executable] | None = None
    for name in SCALING_BINARIES:
        try:
            exe = link.Executable(name)
            n = len(suitable_functions(exe))
        except Exception:
            continue
        if n >= count:
            return exe
        if best is None or n > best[0]:
            best = (n, exe)
    if best is None:
        sys.exit(f"none of {', '.join(SCALING_BINARIES)} found")
    return best[1]


def scaling(args: argparse.Namespace, bench: Bench, where: str) -> None:
    sizes = sorted(int(x) for x in args.sizes.split(","))
    exe = scaling_binary(args.binary, sizes[-1])
    available = len(suitable_functions(exe))
    if available < sizes[-1]:
        print(f"note: {exe.path} has {available} suitable functions; sizes above are cut to it", file=sys.stderr)
        sizes = sorted({min(n, available) for n in sizes})
    every = Targets.of(exe, sizes[-1])
    bench.warm(every)
    multi_resolve = bench.multi_resolve(every.head(sizes[0]), args.resolve)
    s = Samples()
    rounds = {n: (args.samples if n < 1000 else 1) for n in sizes}
    for n in sizes:
        step(f"uprobe_multi of {n} functions x{rounds[n]}")
        bench.multi(s, every.head(n), multi_resolve, rounds[n], row=f"multi {n}")
    time.sleep(2)
    for n in sizes:
        if n > args.single_max:
            continue
        for _ in range(rounds[n]):
            bench.single(s, every.head(n), args.resolve, args.workers, f"detach {n}", f"attach {n}")
    if args.json:
        print(json.dumps({"binary": every.path, "sizes": sizes, "resolve": args.resolve, "multi_resolve": multi_resolve,
                          "runs": {f"{a}: {b}": v for (a, b), v in s.runs.items()},
                          "loadavg": os.getloadavg(), "kernel": os.uname().release}))
        return
    print(f"uprobes on distinct functions of {every.path} against their count, probes in {where}; kernel "
          f"{os.uname().release}, {load_text()}")
    print(f"symbol resolution {args.resolve} the timing on both sides (uprobe_multi: {multi_resolve}); "
          f"median of {args.samples} samples below 1,000 probes, 1 sample from 1,000; seconds; detach: bpfkit "
          f"group.close(), libbpf bpf_link__destroy, both from {args.workers} threads")
    print(f"{'probes':>8}  {'single attach':>23}  {'ms/probe':>9}  {'single detach':>23}  {'ms/probe':>9}  "
          f"{'uprobe_multi attach+detach':>27}")
    print(f"{'':8}  {'bpfkit':>11} {'libbpf':>11}  {'bpfkit':>4} {'lib':>4}  {'bpfkit':>11} {'libbpf':>11}  "
          f"{'bpfkit':>4} {'lib':>4}  {'bpfkit':>13} {'libbpf':>13}")
    per_probe: dict[str, list[float]] = collections.defaultdict(list)
    for n in sizes:
        cells = []
        for row in (f"attach {n}", f"detach {n}"):
            meds = [s.median(side, row) for side in ("bpfkit", "libbpf")]
            cells.append(" ".join(f"{m:11.3f}" if m is not None else f"{'-':>11}" for m in meds))
            cells.append(" ".join(f"{1000 * m / n:4.1f}" if m is not None else f"{'-':>4}" for m in meds))
            if row.startswith("detach"):
                for side, m in zip(("bpfkit", "libbpf"), meds):
                    if m is not None and n >= 100:
                        per_probe[side].append(m / n)
        multi = " ".join(f"{m:13.4f}" if m is not None else f"{'-':>13}"
                         for m in (s.median(side, f"multi {n}") for side in ("bpfkit", "libbpf")))
        print(f"{n:8}  {cells[0]:>23}  {cells[1]:>9}  {cells[2]:>23}  {cells[3]:>9}  {multi:>27}")
    skipped = [n for n in sizes if n > args.single_max]
    for n in skipped:
        for side, costs in per_probe.items():
            cost = statistics.median(costs)
            print(f"  {n} single uprobes not measured (--single-max {args.single_max}): {side}'s detach would take "
                  f"about {n * cost:.0f} s at the {1000 * cost:.0f} ms per probe measured from 100 probes up")


if __name__ == "__main__":
    sys.exit(main())
