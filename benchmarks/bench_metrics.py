#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Prometheus scrape of a 100,000-entry BPF hash (root), as ``bpfkit attach --metrics`` serves it:

    .venv/bin/python benchmarks/bench_metrics.py [-r RUNS] [-n ENTRIES]

Loads bpf/.output/bench_maps.bpf.o (``struct bench_value {u64 count; u64 bytes; u32 pid; s32 err;
char comm[16];}`` by ``u32``: four numeric fields, so four samples an entry, labelled ``key``),
fills the hash with ENTRIES entries, serves it with bpfkit.metrics (the collector and
prometheus_client's HTTP server on 127.0.0.1) and times, RUNS times each (median, min, max):

* ``GET /metrics``: the whole scrape as Prometheus makes it (read the map with batch lookups,
  build the samples, write the text format, send it), wall time;
* its parts in this process: ``list(m.items())`` (the batch read, typed through BTF), the
  collector's ``collect()`` (read + samples) and ``generate_latest`` (+ the text format).

Target (issue #24): a scrape of 100,000 entries under 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OBJ = REPO / "bpf/.output/bench_maps.bpf.o"


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU time (this process: the server's thread included) of each run."""
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def row(what: str, times: tuple[list[float], list[float]]) -> None:
    wall, cpu = times
    print(f"  {what:<55} wall median {statistics.median(wall):6.3f} s (min {min(wall):6.3f})   "
          f"CPU median {statistics.median(cpu):6.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("-n", "--entries", type=int, default=100_000)
    args = ap.parse_args()

    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    import bpfkit
    from bpfkit.metrics.collector import MapCollector
    from bpfkit.metrics.plan import plan_collection
    from bpfkit.metrics.server import MetricsServer

    spec = bpfkit.load_spec(str(OBJ))
    spec.maps["bench"].max_entries = max(args.entries, 1)
    with bpfkit.Collection(spec) as coll:
        m = coll.maps["bench"]
        pairs = [(i, {"count": i, "bytes": i * 100, "pid": i % 32768, "err": -(i % 5), "comm": f"task{i % 97}"})
                 for i in range(args.entries)]
        for start in range(0, len(pairs), 10_000):
            m.update_batch(pairs[start:start + 10_000])
        plans = plan_collection({"bench": m}, "bench_maps")
        collector = MapCollector(plans)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        with MetricsServer("127.0.0.1:0", [collector]) as server:
            body = urllib.request.urlopen(server.url, timeout=60).read()
            samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
            print(f"{args.entries} entries, {samples} samples, {len(body) / 1e6:.1f} MB of text a scrape; "
                  f"{args.runs} runs, Python {sys.version.split()[0]}")
            scrape = timed(lambda: urllib.request.urlopen(server.url, timeout=60).read(), args.runs)
        row("GET /metrics (whole scrape, wall)", scrape)
        row("list(m.items()) (batch read, typed)", timed(lambda: list(m.items()), args.runs))
        row("collector.collect() (read + samples)", timed(lambda: list(collector.collect()), args.runs))
        row("collector.render() (read + samples + text)", timed(collector.render, args.runs))
        row("prometheus_client generate_latest (the same samples)", timed(lambda: generate_latest(registry), 1))
        wall, cpu = scrape
        verdict = "met" if statistics.median(wall) < 1.0 else "NOT met"
        print(f"target: a scrape of {args.entries} entries under 1 s: {verdict} "
              f"(wall median {statistics.median(wall):.3f} s, CPU {statistics.median(cpu):.3f} s; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
