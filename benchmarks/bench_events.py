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
with the harness's pinned maps, in three styles: per record with a zero-copy memoryview (``view``), per record with fields decoded by the reader (``decoded``),
and whole-buffer batches as numpy structured arrays (``batch``). The table gives each bpfkit
row's rate and the ratio to the libbpf consumer doing the same job.

Needs root, bpffs, clang, bpftool, gcc and libbpf-dev (what the harness needs).
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

# (name, kind, env/args before the command, consumer command) -- the harness's conf format.
LIBBPF = [
    ("libbpf-rb-poll", "ringbuf", "{build}/consumer_libbpf ringbuf-poll"),
    ("libbpf-rb-busy-nowk", "ringbuf-nowakeup", "{build}/consumer_libbpf ringbuf-busy"),
    ("libbpf-perf-poll", "perf", "{build}/consumer_libbpf perf-poll"),
    ("libbpf-perf-poll-w64", "perf", "BENCH_PERF_WAKEUP=64 {build}/consumer_libbpf perf-poll"),
]
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
         "bpfkit-perf", "bpfkit-perf-dec", "bpfkit-perf-batch"]
# --quick: drain for all of DRAIN, live only where the reader (not the producer's per-record
# wakeups, ~7 us each on a VM) sets the pace.
QUICK_LIVE = ["libbpf-rb-poll", "libbpf-perf-poll-w64", "bpfkit-rb", "bpfkit-rb-dec", "bpfkit-rb-batch",
              "bpfkit-perf-w64", "bpfkit-perf-batch-w64", "bpfkit-perf-batch-wm"]

# What each bpfkit row is compared with: (mode, bpfkit variant, libbpf variant, reader, API).
ROWS = [
    ("drain", "bpfkit-rb", "libbpf-rb-poll", "ringbuf", "per record, view"),
    ("drain", "bpfkit-rb-dec", "libbpf-rb-poll", "ringbuf", "per record, decoded"),
    ("drain", "bpfkit-rb-batch", "libbpf-rb-poll", "ringbuf", "batch (numpy)"),
    ("drain", "bpfkit-perf", "libbpf-perf-poll", "perf", "per record, view"),
    ("drain", "bpfkit-perf-dec", "libbpf-perf-poll", "perf", "per record, decoded"),
    ("drain", "bpfkit-perf-batch", "libbpf-perf-poll", "perf", "batch (numpy)"),
    ("live", "bpfkit-rb", "libbpf-rb-poll", "ringbuf", "per record, view"),
    ("live", "bpfkit-rb-dec", "libbpf-rb-poll", "ringbuf", "per record, decoded"),
    ("live", "bpfkit-rb-batch", "libbpf-rb-poll", "ringbuf", "batch (numpy)"),
    ("live", "bpfkit-rb-busy-nowk", "libbpf-rb-busy-nowk", "ringbuf NO_WAKEUP, spin", "per record, decoded"),
    ("live", "bpfkit-rb-batch-busy-nowk", "libbpf-rb-busy-nowk", "ringbuf NO_WAKEUP, spin", "batch (numpy)"),
    ("live", "bpfkit-perf", "libbpf-perf-poll", "perf, wakeup 1", "per record, view"),
    ("live", "bpfkit-perf-dec", "libbpf-perf-poll", "perf, wakeup 1", "per record, decoded"),
    ("live", "bpfkit-perf-batch", "libbpf-perf-poll", "perf, wakeup 1", "batch (numpy)"),
    ("live", "bpfkit-perf-w64", "libbpf-perf-poll-w64", "perf, wakeup 64", "per record, decoded"),
    ("live", "bpfkit-perf-batch-w64", "libbpf-perf-poll-w64", "perf, wakeup 64", "batch (numpy)"),
    ("live", "bpfkit-perf-batch-wm", "libbpf-perf-poll-w64", "perf, watermark 64K (libbpf: w64)", "batch (numpy)"),
]


CONSUMER = Path(__file__).resolve().parent / "bpfkit_consumer.py"


def default_harness() -> str:
    return os.environ.get("BPFKIT_BENCH_HARNESS") or str(REPO.parent / "shared" / "bench-events")


def write_conf(path: Path, python: str, names: set[str]) -> None:
    lines = ["# generated by benchmarks/bench_events.py"]
    for name, kind, cmd in LIBBPF + BPFKIT:
        if name in names:
            lines.append(f"{name:28} {kind:17} shared {cmd.replace('{py}', python).replace('{consumer}', str(CONSUMER))}")
    lines.append("@drain " + " ".join(n for n in DRAIN if n in names))
    path.write_text("\n".join(lines) + "\n")


def med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x:,.0f}"


def print_table(results: dict[str, list[dict]], runs: int, n: int) -> None:
    def summary(name: str) -> dict | None:
        rs = [r for r in results.get(name, []) if "evps" in r]
        if not rs:
            return None
        return {
            "evps": med(rs, "evps"), "lost": med(rs, "lost"), "ns": med(rs, "ns_per_ev"),
            "cpu": med(rs, "cpu_pct"), "drv": med(rs, "drv_rate"), "recv": med(rs, "received"),
            "ok": all(r.get("ok") for r in rs), "min": min(r["evps"] for r in rs),
            "max": max(r["evps"] for r in rs), "foreign": med(rs, "foreign_cpu_s"),
        }

    print(f"\nbpfkit event readers vs libbpf 1.x (C), 32-byte records, median of {runs} run(s); "
          f"live runs produce N={n:,}.")
    print("ev/s = records received / consumer wall time (first record to last); ratio = bpfkit/libbpf.")
    print("per CPU-s = records per second of consumer CPU time (what the reader could do with a whole")
    print("CPU; meaningful when the machine is busy: foreign CPU s is what other processes used).\n")
    print("| mode | reader | bpfkit API | bpfkit ev/s (min-max) | libbpf ev/s | ratio | bpfkit per CPU-s "
          "| lost (bpfkit/libbpf) | driver calls/s | foreign CPU s | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode, ours, ref, reader, api in ROWS:
        key_o = ours + ("@drain" if mode == "drain" else "")
        key_r = ref + ("@drain" if mode == "drain" else "")
        if key_o not in results:
            continue
        o, r = summary(key_o), summary(key_r)
        if o is None:
            print(f"| {mode} | {reader} | {api} | (failed: see logs) | | | | | | | |")
            continue
        ratio = f"{o['evps'] / r['evps']:.3f}" if r and r["evps"] else "-"
        lost = f"{o['lost']:.0f}/{r['lost']:.0f}" if r else f"{o['lost']:.0f}/-"
        if mode == "drain":
            lost = "(buffer full by design)"
        check = "ok" if o["ok"] else "MISMATCH"
        per_cpu = fmt_rate(1e9 / o["ns"]) if o["ns"] else "-"
        foreign = f"{o['foreign']:.1f}" if o["foreign"] is not None else "-"
        print(f"| {mode} | {reader} | {api} | {fmt_rate(o['evps'])} ({fmt_rate(o['min'])}-{fmt_rate(o['max'])}) "
              f"| {fmt_rate(r['evps'] if r else None)} | {ratio} | {per_cpu} | {lost} | "
              f"{fmt_rate(o['drv'])} | {foreign} | {check} |")


def numpy_importable(python: str) -> bool:
    return subprocess.run([python, "-c", "import numpy"], capture_output=True).returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", default=default_harness(),
                    help="the bench-events harness directory (default: %(default)s)")
    ap.add_argument("--build", help="build/log directory (default: a new temporary directory)")
    ap.add_argument("-r", "--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=2_000_000, help="records per live run")
    ap.add_argument("--python", default=sys.executable, help="interpreter for bpfkit's consumers")
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
        print_table(data["results"], data["runs"], data["n"])
        return 0
    harness = Path(a.harness).resolve()
    run_py = harness / "run.py"
    if not run_py.exists():
        print(f"no harness at {harness} (give --harness DIR or set BPFKIT_BENCH_HARNESS)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("the benchmark loads BPF programs: run it as root", file=sys.stderr)
        return 2
    names = {n for n, _, _ in LIBBPF + BPFKIT}
    runs = a.runs
    only = a.only
    if a.quick:
        runs = 1
        modes = a.modes.split(",")
        picked = (QUICK_LIVE if "live" in modes else []) + ([n + "@drain" for n in DRAIN] if "drain" in modes else [])
        only = only or ",".join(picked)
    wanted = only.split(",") if only else [n for n, _, _ in BPFKIT]
    if any("batch" in n for n in wanted) and not numpy_importable(a.python):
        # Without numpy the batch readers fall back to lists of tuples (3.2 M/s vs 62 M/s
        # measured): the "batch (numpy)" rows would silently measure the wrong code.
        print(f"the 'batch (numpy)' rows need numpy in {a.python} (scripts/setup.sh installs it with "
              "the test extra; or pip install 'bpfkit[numpy]'), or leave them out with --only",
              file=sys.stderr)
        return 2
    build = Path(a.build or tempfile.mkdtemp(prefix="bpfkit-bench-events-")).resolve()
    build.mkdir(parents=True, exist_ok=True)
    conf = build / "consumers.conf"
    write_conf(conf, a.python, names)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results_json = build / "results.json"
    cmd = [sys.executable, str(run_py), "--build", str(build), "--conf", str(conf), "-r", str(runs),
           "-n", str(a.n), "--modes", a.modes, "--no-ceiling", "--json", str(results_json),
           "--idle-wait", str(a.idle_wait)]
    if only:
        cmd += ["--only", only]
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    tables = build / "harness-tables.md"
    with open(tables, "w") as out:
        proc = subprocess.run(cmd, env=env, stdout=out)
    if proc.returncode != 0 or not results_json.exists():
        print(f"the harness failed (exit {proc.returncode}); logs in {build}/logs", file=sys.stderr)
        return 1
    data = json.loads(results_json.read_text())
    print_table(data["results"], runs, a.n)
    print(f"\nthe harness's own tables: {tables}; per-run results: {results_json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
