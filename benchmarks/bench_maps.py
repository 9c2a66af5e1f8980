#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dumping a 100,000-entry BPF hash of a struct value: bpfkit against bcc and bpftool (root):

    .venv/bin/python benchmarks/bench_maps.py [-r RUNS] [-n ENTRIES]

Loads bpf/.output/bench_maps.bpf.o (``struct bench_value {u64 count; u64 bytes; u32 pid; s32 err;
char comm[16];}`` by ``u32``), pins its map, fills it once, then times whole processes, each
RUNS times (median, and every run), side by side:

* ``bpfkit map dump --json P`` (bpftool's JSON, decoded through BTF) and ``bpfkit map dump P``;
* the Python API in a fresh interpreter: ``list(m.items())``, typed through the map's BTF
  (records; BPF_MAP_LOOKUP_BATCH, docs/maps.md);
* bcc (``/usr/bin/python3``, Debian's python3-bpfcc): ``BPF(text=...)`` with
  ``BPF_TABLE_PINNED`` opens the pinned map, then ``items()`` (GET_NEXT_KEY + LOOKUP per key,
  ctypes values whose fields are read only when used), ``items()`` reading every field, and
  ``items_lookup_batch()``; the compile step is part of bcc's process and printed apart;
* ``bpftool -j map dump pinned P`` and ``bpftool map dump pinned P``.

Targets (issue #21): bpfkit >= 2x faster than bcc's ``items()``, within 3x of bpftool.

bcc is not installed by this script. ``BPFKIT_BENCH_BCC=1 scripts/setup.sh`` installs
python3-bpfcc and Debian's kernel headers (bcc compiles C at run time and needs headers; for a
kernel without its own, setup merges Debian's header packages into .venv/bcc-kernel-src and
this script passes it as BCC_KERNEL_SOURCE). Without bcc the bcc rows say why and are skipped.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OBJ = REPO / "bpf/.output/bench_maps.bpf.o"
BCC_PYTHON = "/usr/bin/python3"
BCC_SRC = REPO / ".venv/bcc-kernel-src"

API_ITEMS = """
import sys
from bpfkit.maps import Map
with Map.load_pinned(sys.argv[1]) as m:
    items = list(m.items())
k, v = items[0]
print(len(items), type(k).__name__, type(v).__name__)
"""

BCC = """
import sys, time
t0 = time.perf_counter()
from bcc import BPF
b = BPF(text='''
struct bench_value { u64 count; u64 bytes; u32 pid; s32 err; char comm[16]; };
BPF_TABLE_PINNED("hash", u32, struct bench_value, bench, %(n)d, "%(path)s");
''')
t1 = time.perf_counter()
table = b["bench"]
if sys.argv[1] == "batch":
    items = list(table.items_lookup_batch())
elif sys.argv[1] == "fields":  # what a tool printing the values reads
    items = [(k.value, (v.count, v.bytes, v.pid, v.err, v.comm)) for k, v in table.items()]
else:
    items = table.items()
print(len(items), t1 - t0)
"""


def bpfkit_command() -> list[str]:
    venv = REPO / ".venv/bin/bpfkit"
    if venv.exists():
        return [str(venv)]
    found = shutil.which("bpfkit")
    return [found] if found else [sys.executable, "-m", "bpfkit.cli"]


def run(cmd: list[str], env: dict[str, str] | None = None, capture: bool = True) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds (user + system), stdout) of one whole process. The dumps
    write to /dev/null (``capture`` False): reading 40 MB of JSON here is not the tool's cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=env, check=False)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, proc.stdout or ""


def bcc_env() -> tuple[dict[str, str] | None, str]:
    """(environment for bcc, '') or (None, why bcc is skipped)."""
    if not os.path.exists(BCC_PYTHON):
        return None, f"{BCC_PYTHON} is missing"
    probe = subprocess.run([BCC_PYTHON, "-c", "import bcc"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return None, ("`import bcc` fails in /usr/bin/python3: install python3-bpfcc "
                      "(BPFKIT_BENCH_BCC=1 scripts/setup.sh, or apt install python3-bpfcc)")
    env = dict(os.environ)
    if "BCC_KERNEL_SOURCE" not in env and not os.path.isdir(f"/lib/modules/{os.uname().release}/build") \
            and BCC_SRC.is_dir():
        env["BCC_KERNEL_SOURCE"] = str(BCC_SRC)
    return env, ""


def fill(path: str, entries: int) -> None:
    import struct

    from bpfkit.maps import Map

    value = struct.Struct("<QQIi16s")
    with Map.load_pinned(path) as m:
        for start in range(0, entries, 10_000):
            batch = [(i.to_bytes(4, "little"), value.pack(i * 3, i * 4096, 1000 + i % 30000, -(i % 5),
                                                           f"proc-{i % 977}".encode()))
                     for i in range(start, min(start + 10_000, entries))]
            m.update_batch(batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--runs", type=int, default=5, help="runs of each command (median printed)")
    parser.add_argument("-n", "--entries", type=int, default=100_000, help="entries to fill (at most 100000)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_maps: needs root (loads a BPF object)", file=sys.stderr)
        return 2
    if not OBJ.exists():
        print(f"bench_maps: {OBJ} is missing: run `make -C bpf` (scripts/setup.sh does)", file=sys.stderr)
        return 2
    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    pin_dir = f"/sys/fs/bpf/bpfkit-bench-maps-{os.getpid()}"
    path = f"{pin_dir}/bench"
    bpfkit = bpfkit_command()
    try:
        run([*bpfkit, "load", str(OBJ), pin_dir])
        fill(path, min(args.entries, 100_000))
        env, why_not_bcc = bcc_env()
        legs: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("bpfkit map dump --json", [*bpfkit, "map", "dump", path, "--json"], None),
            ("bpfkit map dump (text)", [*bpfkit, "map", "dump", path], None),
            ("bpfkit API list(m.items())", [sys.executable, "-c", API_ITEMS, path], None),
            ("bpftool -j map dump", [bpftool, "-j", "map", "dump", "pinned", path], None),
            ("bpftool map dump", [bpftool, "map", "dump", "pinned", path], None),
        ]
        if env is not None:
            code = BCC % {"n": 100_000, "path": path}
            legs += [("bcc items()", [BCC_PYTHON, "-c", code, "items"], env),
                     ("bcc items() + read every field", [BCC_PYTHON, "-c", code, "fields"], env),
                     ("bcc items_lookup_batch()", [BCC_PYTHON, "-c", code, "batch"], env)]
        print(f"{min(args.entries, 100_000)} entries of struct bench_value (40 bytes) by u32; "
              f"{args.runs} runs each, whole process: median wall seconds, median CPU seconds "
              "(user + system: on a loaded machine wall time is mostly the wait for a CPU), each run\n")
        medians: dict[str, float] = {}
        cpus: dict[str, float] = {}
        for name, cmd, leg_env in legs:
            times, cpu_times, note = [], [], ""
            try:
                for _ in range(args.runs):
                    took, cpu, out = run(cmd, leg_env, capture=not name.startswith(("bpfkit map", "bpftool")))
                    times.append(took)
                    cpu_times.append(cpu)
            except RuntimeError as exc:
                print(f"{name:34} failed: {exc}")
                continue
            if name.startswith("bcc"):
                _, compile_s = out.split()
                note = f"  (of which BPF(text=) compile {float(compile_s):.2f})"
            elif name.startswith("bpfkit API"):
                note = f"  ({out.strip()})"
            medians[name] = statistics.median(times)
            cpus[name] = statistics.median(cpu_times)
            print(f"{name:34} {medians[name]:6.2f} wall {cpus[name]:6.2f} cpu   runs "
                  f"{' '.join(f'{t:.2f}' for t in times)}{note}")
        if env is None:
            print(f"{'bcc':34} skipped: {why_not_bcc}")
        print("\nratios of wall time:")
        ratios(medians)
        print("\nratios of CPU time:")
        ratios(cpus)
    finally:
        shutil.rmtree(pin_dir, ignore_errors=True)
    return 0


def ratios(m: dict[str, float]) -> None:
    def show(label: str, slow: str, fast: str, target: float | None, within: bool = False) -> None:
        if slow not in m or fast not in m:
            return
        ratio = m[slow] / m[fast]
        if target is None:
            verdict = ""
        elif within:
            verdict = f"  (target: within {target:g}x: {'met' if ratio <= target else 'MISSED'})"
        else:
            verdict = f"  (target: >= {target:g}x: {'met' if ratio >= target else 'MISSED'})"
        print(f"{label:58} {ratio:5.2f}x{verdict}")

    show("bcc items() / bpfkit map dump --json", "bcc items()", "bpfkit map dump --json", 2)
    show("bcc items() / bpfkit API list(m.items())", "bcc items()", "bpfkit API list(m.items())", 2)
    show("bcc items() + fields / bpfkit API list(m.items())", "bcc items() + read every field",
         "bpfkit API list(m.items())", 2)
    show("bcc items_lookup_batch() / bpfkit API list(m.items())", "bcc items_lookup_batch()",
         "bpfkit API list(m.items())", None)
    show("bpfkit map dump --json / bpftool -j map dump", "bpfkit map dump --json", "bpftool -j map dump", 3, True)
    show("bpfkit map dump (text) / bpftool map dump", "bpfkit map dump (text)", "bpftool map dump", 3, True)


if __name__ == "__main__":
    sys.exit(main())
