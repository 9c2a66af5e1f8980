#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where does the first event reader's set-up go? One command (root):

    python3 benchmarks/bench_reader_setup.py [-r RUNS] [--json]

Each run is a fresh interpreter (the one running this script) that creates its maps first,
untimed (three BPF_MAP_TYPE_RINGBUF of 64 KiB, three BPF_MAP_TYPE_PERF_EVENT_ARRAY of one slot
per CPU), then times, in this order:

* reference: what libbpf's ring_buffer__new / ring_buffer__add does for one ring buffer,
  written with the standard library (two mmaps of the map fd and an epoll_ctl): the floor any
  reader pays, measured in the same process;
* first RingBuffer (or PerfBuffer): ``from bpfkit.events import RingBuffer`` (the reader's
  modules, when the tool has not imported them yet) and the constructor, each timed apart;
* second: another reader of the same kind, every module loaded.

RingBuffer and PerfBuffer are timed in separate interpreters (the second shares most
modules). A last interpreter runs the first RingBuffer's import under ``-X importtime`` and
lists the modules it loads by their own time (the median over the runs), largest first.

What it showed (issue 38 item 6): the constructor itself takes 0.1-0.3 ms the first time as
the second; the rest of the 6.6-6.9 ms a tool saw was importing bpfkit.events' reader modules
(decoding, record formats, perf constants) on first use. A tool that imports its reader at the
top and opens it before printing "Tracing..." pays that before it announces (docs/events.md).
With the perf record classes loaded on first use (bpfkit.events._perf_records) and the readers'
typing for the type checker only, the first RingBuffer took 3.7 ms (was 30.0) and the first
PerfBuffer 10.9 (was 32.1) on the same loaded host: medians of seven alternating runs, with
bytecode caches (leave PYTHONDONTWRITEBYTECODE unset, as an installed package has its .pyc
files, or every run compiles). The import breakdown leaves out the reader module itself:
bpfkit.events imports it with importlib.import_module, which -X importtime does not report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, mmap, os, select, sys, time
from bpfkit.maps import Map, MapSpec
from bpfkit.spec.consts import MapType

kind = sys.argv[1]
cpus = os.cpu_count() or 1
def ringbuf(i):
    return Map(MapSpec(name=f"bench_rs_rb{i}", type=MapType.RINGBUF, key_size=0, value_size=0, max_entries=1 << 16))
def perfarray(i):
    return Map(MapSpec(name=f"bench_rs_pb{i}", type=MapType.PERF_EVENT_ARRAY, key_size=4, value_size=4,
                       max_entries=cpus))
make = ringbuf if kind == "ringbuf" else perfarray
maps = [make(i) for i in range(2)]
ref_map = ringbuf(9)

page = mmap.PAGESIZE
t0 = time.perf_counter()
fd = int(ref_map.fd)
consumer = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
producer = mmap.mmap(fd, page + 2 * (1 << 16), mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
ep = select.epoll()
ep.register(fd, select.EPOLLIN)
t1 = time.perf_counter()

if kind == "ringbuf":
    from bpfkit.events import RingBuffer as Reader
    t2 = time.perf_counter()
    first = Reader(maps[0], lambda data: None)
    t3 = time.perf_counter()
    second = Reader(maps[1], lambda data: None)
else:
    from bpfkit.events import PerfBuffer as Reader
    t2 = time.perf_counter()
    first = Reader(maps[0], lambda cpu, data: None)
    t3 = time.perf_counter()
    second = Reader(maps[1], lambda cpu, data: None)
t4 = time.perf_counter()
first.close(); second.close()
ep.close(); consumer.close(); producer.close()
print(json.dumps({"reference": t1 - t0, "import": t2 - t1, "set_up": t3 - t2, "first": t3 - t1,
                  "second": t4 - t3}))
"""

IMPORT_CHILD = "import bpfkit.maps, bpfkit.spec.consts, sys; sys.stderr.write('MARK\\n'); from bpfkit.events import RingBuffer"


def run_child(kind: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, check=True)
    data: dict[str, float] = json.loads(out.stdout)
    return data


def import_breakdown(runs: int) -> list[tuple[str, float]]:
    """Modules the first RingBuffer import loads, by self time (median over runs), in ms."""
    times: dict[str, list[float]] = {}
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORT_CHILD], capture_output=True,
                              text=True, check=True)
        lines = proc.stderr.split("MARK\n", 1)[-1].splitlines()
        for line in lines:
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _cum, name = (part.strip() for part in line[len("import time:"):].split("|"))
            times.setdefault(name, []).append(int(self_us) / 1000)
    rows = [(name, statistics.median(v)) for name, v in times.items()]
    return sorted(rows, key=lambda r: -r[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_reader_setup: needs root (BPF maps, perf events)", file=sys.stderr)
        return 2
    results: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.runs):
        for kind in ("ringbuf", "perf"):
            for key, value in run_child(kind).items():
                results.setdefault(kind, {}).setdefault(key, []).append(value * 1000)
    breakdown = import_breakdown(args.runs)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    if args.json:
        print(json.dumps({"runs": args.runs, "load": load, "results": results,
                          "import_breakdown_ms": dict(breakdown[:15])}, indent=1))
        return 0
    print(f"reader set-up, {args.runs} fresh interpreters each, ms (median / min); load average {load:.2f}")
    print(f"{'':10} {'reference':>13} {'first':>13} {'of it import':>13} {'of it set-up':>13} {'second':>13}")
    for kind, cols in results.items():
        cells = [f"{statistics.median(cols[k]):6.2f} /{min(cols[k]):5.2f}"
                 for k in ("reference", "first", "import", "set_up", "second")]
        print(f"{kind:10} " + " ".join(f"{c:>13}" for c in cells))
    print("\nreference: two mmaps and an epoll_ctl of a ring buffer map with the standard library (libbpf's work)")
    print("\nmodules the first RingBuffer import loads, self time (median ms):")
    for name, ms in breakdown[:12]:
        print(f"  {ms:6.2f}  {name}")
    total = sum(ms for _, ms in breakdown)
    print(f"  {total:6.2f}  all {len(breakdown)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
