#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How fast do bpfkit's event readers consume, next to libbpf's C consumer? One command:

    sudo python3 benchmarks/bench_events.py [--harness DIR] [-r RUNS] [-n N] [--quick]

It drives the event-consumption harness (``--harness``, default ``../shared/bench-events``
next to the repository, or $BPFKIT_BENCH_HARNESS): the harness builds its producer (a
tracepoint program on getppid sending 32-byte records into a 16 MiB RINGBUF or a perf event
array), its driver (N getppid calls pinned to one CPU) and libbpf's C consumer, and runs
every consumer pinned to the other CPU in two modes:

* drain: the driver fills the buffer first (16 MiB: 419,430 ringbuf or 349,525 perf records),
  then the consumer reads the backlog: how fast user space can read;
* live: the consumer runs while the driver produces N records as fast as it can: does the
  reader keep up (0 lost), at what rate, at what CPU cost. Live rates are bounded by the
  producer and its wakeups, not by the reader.

bpfkit plugs in through the harness's consumer protocol as ``benchmarks/bpfkit_consumer.py``
with the harness's pinned maps, in three styles: per record with a zero-copy memoryview
(``view``), per record with fields decoded by the reader (``decoded``), and whole-buffer
batches as numpy structured arrays (``batch``). bcc's consumers (the harness's
``consumer_bcc.py``: python3-bpfcc, decoding with ``table.event()`` or ctypes
``from_address``) run in the same run on the same interpreter as bpfkit's: bcc's package
directory (found through ``--bcc-python``, default /usr/bin/python3, where Debian installs it)
is put on that interpreter's PYTHONPATH for the bcc rows only. The table gives each bpfkit
row's rate, the ratio to the libbpf consumer doing the same job and the ratio to bcc's best
consumer for that reader, then the targets (issue #22) as met / NOT met.

Needs root, bpffs, clang, bpftool, gcc and libbpf-dev (what the harness needs); the bcc rows
need python3-bpfcc and kernel headers (``BPFKIT_BENCH_BCC=1 scripts/setup.sh`` installs both)
and are left out, saying why, without them (``--no-bcc`` leaves them out on purpose).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BCC_SRC = REPO / ".venv/bcc-kernel-src"  # Debian's headers merged by BPFKIT_BENCH_BCC=1 scripts/setup.sh

# (name, kind, env/args before the command, consumer command) -- the harness's conf format.
LIBBPF = [
    ("libbpf-rb-poll", "ringbuf", "{build}/consumer_libbpf ringbuf-poll"),
    ("libbpf-rb-busy-nowk", "ringbuf-nowakeup", "{build}/consumer_libbpf ringbuf-busy"),
    ("libbpf-perf-poll", "perf", "{build}/consumer_libbpf perf-poll"),
    ("libbpf-perf-poll-w64", "perf", "BENCH_PERF_WAKEUP=64 {build}/consumer_libbpf perf-poll"),
]
# bcc loads its own copy of the producer (it cannot open a pinned map): PRODUCER "self".
# {bccpath}: PYTHONPATH=<bcc's package directory>, so {py} (bpfkit's interpreter) imports bcc.
BCC = [
    ("bcc-rb-event", "ringbuf", "{bccpath} {py} {src}/consumer_bcc.py ringbuf event"),
    ("bcc-rb-fromaddr", "ringbuf", "{bccpath} {py} {src}/consumer_bcc.py ringbuf from_address"),
    ("bcc-perf-event", "perf", "{bccpath} {py} {src}/consumer_bcc.py perf event"),
    ("bcc-perf-fromaddr", "perf", "{bccpath} {py} {src}/consumer_bcc.py perf from_address"),
    ("bcc-perf-event-w64", "perf", "BENCH_PERF_WAKEUP=64 {bccpath} {py} {src}/consumer_bcc.py perf event"),
    ("bcc-perf-fromaddr-w64", "perf",
     "BENCH_PERF_WAKEUP=64 {bccpath} {py} {src}/consumer_bcc.py perf from_address"),
]
BCC_RB = ["bcc-rb-event", "bcc-rb-fromaddr"]
BCC_PERF = ["bcc-perf-event", "bcc-perf-fromaddr"]
BCC_PERF_W64 = ["bcc-perf-event-w64", "bcc-perf-fromaddr-w64"]
BPFKIT = [
    ("bpfkit-rb", "ringbuf", "{py} {consumer} ringbuf"),
    ("bpfkit-rb-dec", "ringbuf", "{py} {consumer} ringbuf --decoded"),
    ("bpfkit-rb-batch", "ringbuf", "{py} {consumer} ringbuf --batch"),
    ("bpfkit-rb-busy-nowk", "ringbuf-nowakeup", "{py} {consumer} ringbuf --decoded --busy"),
    ("bpfkit-rb-batch-busy-nowk", "ringbuf-nowakeup", "{py} {consumer} ringbuf --batch --busy"),
    ("bpfkit-perf", "perf", "{py} {consumer} perf"),
    ("bpfkit-perf-dec", "perf", "{py} {consumer} perf --decoded"),
    ("bpfkit-perf-batch", "perf", "{py} {consumer} perf --batch"),
    ("bpfkit-perf-w64", "perf", "BENCH_PERF_WAKEUP=64 {py} {consumer} perf --decoded"),
    ("bpfkit-perf-batch-w64", "perf", "BENCH_PERF_WAKEUP=64 {py} {consumer} perf --batch"),
    # wake when a quarter of the 64-page ring is waiting: fewer, larger batches
    ("bpfkit-perf-batch-wm", "perf", "BENCH_PERF_WATERMARK=65536 {py} {consumer} perf --batch"),
]
DRAIN = ["libbpf-rb-poll", "libbpf-perf-poll", "bpfkit-rb", "bpfkit-rb-dec", "bpfkit-rb-batch",
         "bpfkit-perf", "bpfkit-perf-dec", "bpfkit-perf-batch", *BCC_RB, *BCC_PERF]
# --quick: drain for all of DRAIN, live only where the reader (not the producer's per-record
# wakeups, ~7 us each on a VM) sets the pace.
QUICK_LIVE = ["libbpf-rb-poll", "libbpf-perf-poll-w64", "bpfkit-rb", "bpfkit-rb-dec", "bpfkit-rb-batch",
              "bpfkit-perf-w64", "bpfkit-perf-batch-w64", "bpfkit-perf-batch-wm", *BCC_RB, *BCC_PERF_W64]

# What each bpfkit row is compared with:
# (mode, bpfkit variant, libbpf variant, bcc variants (the best is the reference), reader, API).
ROWS = [
    ("drain", "bpfkit-rb", "libbpf-rb-poll", BCC_RB, "ringbuf", "per record, view"),
    ("drain", "bpfkit-rb-dec", "libbpf-rb-poll", BCC_RB, "ringbuf", "per record, decoded"),
    ("drain", "bpfkit-rb-batch", "libbpf-rb-poll", BCC_RB, "ringbuf", "batch (numpy)"),
    ("drain", "bpfkit-perf", "libbpf-perf-poll", BCC_PERF, "perf", "per record, view"),
    ("drain", "bpfkit-perf-dec", "libbpf-perf-poll", BCC_PERF, "perf", "per record, decoded"),
    ("drain", "bpfkit-perf-batch", "libbpf-perf-poll", BCC_PERF, "perf", "batch (numpy)"),
    ("live", "bpfkit-rb", "libbpf-rb-poll", BCC_RB, "ringbuf", "per record, view"),
    ("live", "bpfkit-rb-dec", "libbpf-rb-poll", BCC_RB, "ringbuf", "per record, decoded"),
    ("live", "bpfkit-rb-batch", "libbpf-rb-poll", BCC_RB, "ringbuf", "batch (numpy)"),
    ("live", "bpfkit-rb-busy-nowk", "libbpf-rb-busy-nowk", [], "ringbuf NO_WAKEUP, spin", "per record, decoded"),
    ("live", "bpfkit-rb-batch-busy-nowk", "libbpf-rb-busy-nowk", [], "ringbuf NO_WAKEUP, spin", "batch (numpy)"),
    ("live", "bpfkit-perf", "libbpf-perf-poll", BCC_PERF, "perf, wakeup 1", "per record, view"),
    ("live", "bpfkit-perf-dec", "libbpf-perf-poll", BCC_PERF, "perf, wakeup 1", "per record, decoded"),
    ("live", "bpfkit-perf-batch", "libbpf-perf-poll", BCC_PERF, "perf, wakeup 1", "batch (numpy)"),
    ("live", "bpfkit-perf-w64", "libbpf-perf-poll-w64", BCC_PERF_W64, "perf, wakeup 64", "per record, decoded"),
    ("live", "bpfkit-perf-batch-w64", "libbpf-perf-poll-w64", BCC_PERF_W64, "perf, wakeup 64", "batch (numpy)"),
    ("live", "bpfkit-perf-batch-wm", "libbpf-perf-poll-w64", BCC_PERF_W64, "perf, watermark 64K (libbpf: w64)",
     "batch (numpy)"),
]
# Issue #22's targets for the per-record memoryview callback.
PERF_VIEW_VS_BCC = 1.5  # drain: bpfkit-perf >= 1.5x bcc's best perf consumer
# live: bpfkit-rb loses nothing while the producer runs at its full rate: at least 90% of both
# the rate it reaches with libbpf's C reader and its rate alone (the harness's ceil-rb-fits: the
# driver with no reader, every output succeeding), both measured in the same run.
FULL_RATE = 0.9
BUSY_CPU_PCT = 80  # a draining consumer on the CPU less than this % of its wall time: a busy machine
CEILING = "ceil-rb-fits"


CONSUMER = Path(__file__).resolve().parent / "bpfkit_consumer.py"


def default_harness() -> str:
    return os.environ.get("BPFKIT_BENCH_HARNESS") or str(REPO.parent / "shared" / "bench-events")


def write_conf(path: Path, python: str, bccpath: str, names: set[str]) -> None:
    lines = ["# generated by benchmarks/bench_events.py"]
    for name, kind, cmd in LIBBPF + BPFKIT + BCC:
        if name in names:
            producer = "self" if name.startswith("bcc-") else "shared"
            line = cmd.replace("{py}", python).replace("{consumer}", str(CONSUMER)).replace("{bccpath}", bccpath)
            lines.append(f"{name:28} {kind:17} {producer:6} {line}")
    lines.append("@drain " + " ".join(n for n in DRAIN if n in names))
    path.write_text("\n".join(lines) + "\n")


def med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x:,.0f}"


def summary(results: dict[str, list[dict]], name: str) -> dict | None:
    rs = [r for r in results.get(name, []) if "evps" in r]
    if not rs:
        return None
    return {
        "evps": med(rs, "evps"), "lost": med(rs, "lost"), "ns": med(rs, "ns_per_ev"),
        "cpu": med(rs, "cpu_pct"), "drv": med(rs, "drv_rate"), "recv": med(rs, "received"),
        "ok": all(r.get("ok") for r in rs), "min": min(r["evps"] for r in rs),
        "max": max(r["evps"] for r in rs), "foreign": med(rs, "foreign_cpu_s"),
        "max_lost": max(r.get("lost") or 0 for r in rs), "name": name,
    }


def best_of(results: dict[str, list[dict]], names: list[str], suffix: str) -> dict | None:
    """The fastest (median ev/s) of ``names`` that ran: bcc's best consumer for a reader."""
    got = [s for s in (summary(results, n + suffix) for n in names) if s is not None]
    return max(got, key=lambda s: s["evps"]) if got else None


def print_table(results: dict[str, list[dict]], runs: int, n: int) -> list[str]:
    """Print the comparison table and the target lines; returns the bpfkit rows that failed."""
    print(f"\nbpfkit event readers vs libbpf 1.x (C) and bcc (Python), 32-byte records, median of {runs} run(s); "
          f"live runs produce N={n:,}.")
    print("ev/s = records received / consumer wall time (first record to last); ratio = bpfkit/libbpf,")
    print("bpfkit/bcc = bpfkit / bcc's best consumer (the variant named) for that reader, same interpreter.")
    print("drain rates are the readers' own speed. LIVE RATES ARE PRODUCER RATES: a reader that keeps up (0 lost)")
    print("receives at the rate the driver produces (driver calls/s), whatever it could do; compare readers live")
    print("by lost records and per CPU-s (records per second of consumer CPU time, meaningful on a busy machine:")
    print("foreign CPU s is what other processes used during the run).\n")
    print("| mode | reader | bpfkit API | bpfkit ev/s (min-max) | libbpf ev/s | ratio | bcc best ev/s | bpfkit/bcc "
          "| bpfkit per CPU-s | lost (bpfkit/libbpf) | driver calls/s | foreign CPU s | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    failed = []
    for mode, ours, ref, bcc, reader, api in ROWS:
        suffix = "@drain" if mode == "drain" else ""
        if ours + suffix not in results:
            continue
        o, r = summary(results, ours + suffix), summary(results, ref + suffix)
        if o is None:
            failed.append(ours + suffix)
            print(f"| {mode} | {reader} | {api} | (failed: see logs) | | | | | | | | | |")
            continue
        b = best_of(results, bcc, suffix)
        ratio = f"{o['evps'] / r['evps']:.3f}" if r and r["evps"] else "-"
        bcc_ev = (f"{fmt_rate(b['evps'])} ({b['name'].removesuffix(suffix)}; {per_cpu_s(b)} per CPU-s)"
                  if b else "-")
        bcc_ratio = f"{o['evps'] / b['evps']:.2f}" if b and b["evps"] else "-"
        lost = f"{o['lost']:.0f}/{r['lost']:.0f}" if r else f"{o['lost']:.0f}/-"
        if mode == "drain":
            lost = "(buffer full by design)"
        check = "ok" if o["ok"] else "MISMATCH"
        per_cpu = per_cpu_s(o)
        foreign = f"{o['foreign']:.1f}" if o["foreign"] is not None else "-"
        print(f"| {mode} | {reader} | {api} | {fmt_rate(o['evps'])} ({fmt_rate(o['min'])}-{fmt_rate(o['max'])}) "
              f"| {fmt_rate(r['evps'] if r else None)} | {ratio} | {bcc_ev} | {bcc_ratio} | {per_cpu} | {lost} | "
              f"{fmt_rate(o['drv'])} | {foreign} | {check} |")
    print_targets(results)
    return failed


def per_cpu_s(s: dict) -> str:
    return fmt_rate(1e9 / s["ns"]) if s["ns"] else "-"


def print_targets(results: dict[str, list[dict]]) -> None:
    print("\nTargets (issue #22):")
    o, b = summary(results, "bpfkit-perf@drain"), best_of(results, BCC_PERF, "@drain")
    if o and b:
        ratio = o["evps"] / b["evps"]
        cpu_ratio = b["ns"] / o["ns"] if o["ns"] and b["ns"] else None
        # A drain should keep its consumer on the CPU; when it did not (other processes took
        # the CPU: cpu% well below 100), wall rates measure the machine, CPU time the reader.
        busy = min(o["cpu"] or 0, b["cpu"] or 0) < BUSY_CPU_PCT and cpu_ratio is not None
        judged = cpu_ratio if busy and cpu_ratio is not None else ratio
        verdict = ("met" if judged >= PERF_VIEW_VS_BCC else "NOT met") + (
            f" (judged by CPU time: a consumer had the CPU only {min(o['cpu'], b['cpu']):.0f}% of its wall time)"
            if busy else "")
        print(f"  perf array, per record, memoryview callback, drain: bpfkit {fmt_rate(o['evps'])}/s = {ratio:.2f}x "
              f"bcc's best ({b['name'].removesuffix('@drain')}, {fmt_rate(b['evps'])}/s); by CPU time per record "
              f"{'-' if cpu_ratio is None else f'{cpu_ratio:.2f}x'}; target >= {PERF_VIEW_VS_BCC}x: {verdict}")
    else:
        print("  perf array, per record, memoryview callback, drain vs bcc: not measured "
              "(needs bpfkit-perf@drain and a bcc-perf-*@drain row)")
    o = summary(results, "bpfkit-rb")
    if o:
        ref = summary(results, "libbpf-rb-poll")
        ceil = [r["drv_rate"] for r in results.get(CEILING, []) if r.get("drv_rate")]
        alone = f"; alone (no reader, {CEILING}): {fmt_rate(statistics.median(ceil))}" if ceil else ""
        full = ref["drv"] if ref else None
        rate_alone = statistics.median(ceil) if ceil else None
        if o["max_lost"] or not o["ok"]:
            verdict = "NOT met"
        elif full is None or rate_alone is None:
            verdict = f"not judged (needs the libbpf-rb-poll and {CEILING} runs for the producer's full rate)"
        elif o["drv"] >= FULL_RATE * full and o["drv"] >= FULL_RATE * rate_alone:
            verdict = "met"
        else:
            verdict = (f"not shown: the producer ran at {o['drv'] / rate_alone:.0%} of its rate alone and "
                       f"{o['drv'] / full:.0%} of its rate with libbpf's reader (a busy machine, or wakeups)")
        print(f"  ring buffer, per record, memoryview callback, live: {o['max_lost']:.0f} lost in the worst run, "
              f"producer at {fmt_rate(o['drv'])} calls/s (with libbpf's reader: {fmt_rate(full)}{alone}); "
              f"the reader's own ceiling {per_cpu_s(o)} per CPU-s; target 0 lost at the producer's full rate: "
              f"{verdict}")
    else:
        print("  ring buffer, per record, memoryview callback, live: not measured (needs bpfkit-rb)")


def numpy_importable(python: str) -> bool:
    return subprocess.run([python, "-c", "import numpy"], check=False, capture_output=True).returncode == 0


def python_version(python: str) -> str:
    r = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], check=False, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def bcc_setup(python: str, bcc_python: str, build: Path, harness: Path) -> tuple[dict[str, str] | None, str, str]:
    """(environment additions, PYTHONPATH word for the conf, '') when ``python`` can import bcc
    from bcc's own package directory, else (None, '', why not)."""
    where = subprocess.run([bcc_python, "-c", "import bcc, os; print(os.path.dirname(os.path.dirname(bcc.__file__)))"],
                           check=False, capture_output=True, text=True)
    if where.returncode != 0:
        return None, "", (f"`import bcc` fails in {bcc_python}: install python3-bpfcc "
                          "(BPFKIT_BENCH_BCC=1 scripts/setup.sh), or give --bcc-python")
    bccdir = where.stdout.strip()
    env = dict(os.environ, PYTHONPATH=bccdir)
    probe = subprocess.run([python, "-c", "import bcc"], check=False, capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return None, "", f"{python} cannot import bcc from {bccdir}: {last}"
    extra: dict[str, str] = {}
    if "BCC_KERNEL_SOURCE" not in os.environ and not os.path.isdir(f"/lib/modules/{os.uname().release}/build"):
        if BCC_SRC.is_dir():
            extra["BCC_KERNEL_SOURCE"] = str(BCC_SRC)
        else:  # merge Debian's split headers the way the harness does
            kh = build / "kheaders"
            r = subprocess.run(["sh", str(harness / "bcc_headers.sh"), str(kh)], check=False, capture_output=True, text=True)
            if r.returncode != 0:
                return None, "", (f"no kernel headers for bcc ({r.stderr.strip()}): "
                                  "BPFKIT_BENCH_BCC=1 scripts/setup.sh installs them")
            extra["BCC_KERNEL_SOURCE"] = str(kh)
    return extra, f"PYTHONPATH={bccdir}", ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", default=default_harness(),
                    help="the bench-events harness directory (default: %(default)s)")
    ap.add_argument("--build", help="build/log directory (default: a new temporary directory)")
    ap.add_argument("-r", "--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=2_000_000, help="records per live run")
    ap.add_argument("--python", default=sys.executable, help="interpreter for bpfkit's and bcc's consumers")
    ap.add_argument("--bcc-python", default="/usr/bin/python3",
                    help="an interpreter that can import bcc: where bcc's package directory is found (default: %(default)s)")
    ap.add_argument("--no-bcc", action="store_true", help="leave out the bcc rows")
    ap.add_argument("--quick", action="store_true",
                    help="1 run each; live runs only for reader-bound variants (no wakeup-per-record perf)")
    ap.add_argument("--only", help="comma-separated variant names (as in the harness)")
    ap.add_argument("--modes", default="live,drain")
    ap.add_argument("--idle-wait", type=float, default=20.0,
                    help="max seconds to wait for an idle machine before each run")
    ap.add_argument("--results", help="reuse a results.json from an earlier run: just print the table")
    a = ap.parse_args()

    if a.results:
        data = json.loads(Path(a.results).read_text())
        failed = print_table(data["results"], data["runs"], data["n"])
        return 1 if failed else 0
    harness = Path(a.harness).resolve()
    run_py = harness / "run.py"
    if not run_py.exists():
        print(f"no harness at {harness} (give --harness DIR or set BPFKIT_BENCH_HARNESS)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("the benchmark loads BPF programs: run it as root", file=sys.stderr)
        return 2
    runs = a.runs
    only = a.only
    if a.quick:
        runs = 1
        modes = a.modes.split(",")
        picked = (QUICK_LIVE if "live" in modes else []) + ([n + "@drain" for n in DRAIN] if "drain" in modes else [])
        only = only or ",".join(picked)
    wanted = only.split(",") if only else [n for n, _, _ in BPFKIT + BCC]
    if any("batch" in n for n in wanted) and not numpy_importable(a.python):
        # Without numpy the batch readers would fall back to lists of tuples (3.2 M/s vs 62 M/s
        # measured): the "batch (numpy)" rows would silently measure the wrong code.
        print(f"the 'batch (numpy)' rows need numpy in {a.python}, which cannot import it (scripts/setup.sh "
              "installs it with the test extra; or pip install 'bpfkit[numpy]'), or leave them out with --only",
              file=sys.stderr)
        return 2
    build = Path(a.build or tempfile.mkdtemp(prefix="bpfkit-bench-events-")).resolve()
    build.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    names = {n for n, _, _ in LIBBPF + BPFKIT}
    bccpath = ""
    print(f"interpreter for bpfkit's consumers: {a.python} (Python {python_version(a.python)})")
    if a.no_bcc:
        print("bcc: left out (--no-bcc)")
    elif any(w.startswith("bcc-") for w in wanted):
        extra, bccpath, why = bcc_setup(a.python, a.bcc_python, build, harness)
        if extra is None:
            print(f"bcc: left out: {why}")
        else:
            names |= {n for n, _, _ in BCC}
            env.update(extra)
            print(f"bcc's consumers run on the same interpreter, {a.python}, with {bccpath} "
                  f"(bcc found through {a.bcc_python})")
    modes = a.modes.split(",")
    if only:
        picked = [w for w in only.split(",") if w.split("@")[0] in names or w.startswith("ceil-")]
    else:
        picked = ([n for n in names if "live" in modes]
                  + [n + "@drain" for n in DRAIN if n in names and "drain" in modes])
    if "bpfkit-rb" in picked and CEILING not in picked:
        picked.append(CEILING)  # the producer's full rate, for the ring buffer target
    only = ",".join(sorted(picked, key=lambda w: (w.startswith("ceil-"), w.endswith("@drain"), w)))
    load0 = os.getloadavg()
    conf = build / "consumers.conf"
    write_conf(conf, a.python, bccpath, names)
    results_json = build / "results.json"
    cmd = [sys.executable, str(run_py), "--build", str(build), "--conf", str(conf), "-r", str(runs),
           "-n", str(a.n), "--modes", a.modes, "--no-ceiling", "--json", str(results_json),
           "--idle-wait", str(a.idle_wait)]
    cmd += ["--only", only]
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    tables = build / "harness-tables.md"
    with open(tables, "w") as out:
        proc = subprocess.run(cmd, check=False, env=env, stdout=out)
    if proc.returncode != 0 or not results_json.exists():
        print(f"the harness failed (exit {proc.returncode}); logs in {build}/logs", file=sys.stderr)
        return 1
    data = json.loads(results_json.read_text())
    failed = print_table(data["results"], runs, a.n)
    load1 = os.getloadavg()
    print(f"\nload average: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} before, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} after")
    print(f"\nthe harness's own tables: {tables}; per-run results: {results_json}", file=sys.stderr)
    if failed:
        print(f"bpfkit rows failed: {', '.join(failed)}; each run's stderr is in {build}/logs/<variant>.<run>.stderr",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
