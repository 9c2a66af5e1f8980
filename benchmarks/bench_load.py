#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load an object with many programs and maps with ``bpfkit load`` and ``bpftool prog loadall``
in the same run, and print both times.

    python benchmarks/bench_load.py [--programs 60] [--rounds 5] [--keep OBJ]

The object is generated and compiled here (clang, vmlinux.h-free): PROGRAMS programs of
several types, each looping over a map the way real tracing programs do, plus a dozen maps
(hash, array, per-CPU, ring buffer) and global data. Both tools run as separate processes,
load everything, pin programs and maps under a fresh bpffs directory and exit; the pins are
removed after each round. The kernel's verifier does the same work for both, so the
difference is each tool's own cost (bpfkit's includes starting Python). Needs root.

In process (``--in-process-rounds``, default 7; 0 skips): ``bpfkit.Collection(spec)`` of the
parsed spec against libbpf's ``bpf_object__load`` of the same object, timed in a small C harness
built against libbpf in this run (benchmarks/c/load_bench.c; bpf_object__open_file, the parse,
is outside its timing as load_spec is outside bpfkit's), alternating which goes first. Target:
<= 1.5x. The same rows for bpf/.output/minimal.bpf.o (1 program) and loader_core.bpf.o (CO-RE;
bpfkit's vmlinux BTF is parsed once per process, libbpf's once per bpf_object__load).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECTIONS = ["xdp", "tc", "socket", "tracepoint/syscalls/sys_enter_getpid", "raw_tp/sys_enter"]

HEADER = """\
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } counts SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 64); __type(key, __u32); __type(value, __u64); } table SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 64); __type(key, __u32); __type(value, __u64); } percpu SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 1 << 16); } events SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 256); __type(key, __u64); __type(value, __u64); } lru SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 128); __type(key, __u32); __type(value, __u32); } h1 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 128); __type(key, __u32); __type(value, __u32); } h2 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8); __type(key, __u32); __type(value, __u32); } a1 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8); __type(key, __u32); __type(value, __u32); } a2 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_STACK_TRACE); __uint(max_entries, 128); __uint(key_size, 4); __uint(value_size, 8 * 127); } stacks SEC(".maps");

const volatile __u32 filter = 0;
__u64 total;
__u64 seen[16];

static __noinline __u64 mix(__u64 x, __u32 salt)
{
	x ^= x >> 13;
	x *= 0x9E3779B97F4A7C15ULL + salt;
	return x ^ (x >> 29);
}
"""

BODY = """
SEC("{section}")
int prog_{i}(void *ctx)
{{
	__u64 acc = {i}, *v;
	__u32 key;
	int j;

	if (filter == {i} + 1000)
		return 0;
	for (j = 0; j < {loop}; j++) {{
		key = (j * 7 + {i}) & 63;
		v = bpf_map_lookup_elem(&table, &key);
		if (v)
			acc += *v + mix(acc, j);
		v = bpf_map_lookup_elem(&percpu, &key);
		if (v)
			*v += 1;
	}}
	key = {i};
	v = bpf_map_lookup_elem(&counts, &key);
	if (v)
		__sync_fetch_and_add(v, acc);
	else
		bpf_map_update_elem(&counts, &key, &acc, BPF_ANY);
	seen[{i} & 15] = acc;
	__sync_fetch_and_add(&total, 1);
	{tail}
	return 0;
}}
"""

RINGBUF_TAIL = """{ __u64 *e = bpf_ringbuf_reserve(&events, 8, 0); if (e) { *e = acc; bpf_ringbuf_submit(e, 0); } }"""


def generate(path: Path, programs: int, loop: int) -> None:
    parts = [HEADER]
    for i in range(programs):
        section = SECTIONS[i % len(SECTIONS)]
        parts.append(BODY.format(section=section, i=i, loop=loop, tail=RINGBUF_TAIL if i % 3 == 0 else ""))
    parts.append('char LICENSE[] SEC("license") = "GPL";\n')
    path.write_text("".join(parts))


def compile_object(src: Path, obj: Path) -> None:
    clang = shutil.which("clang-19") or shutil.which("clang")
    if clang is None:
        raise SystemExit("needs clang")
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    subprocess.run([clang, "-g", "-O2", "-target", "bpf", f"-I/usr/include/{multiarch}", "-c", str(src), "-o", str(obj)],
                   check=True)


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of running ``cmd`` to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=60)
    parser.add_argument("--loop", type=int, default=64,
                        help="loop iterations per program: the verifier's work per program, like a real tracer's")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", metavar="OBJ", help="also copy the generated object here")
    parser.add_argument("--in-process-rounds", type=int, default=7)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (loading BPF programs)")
    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    sys.path.insert(0, str(REPO))
    from bpfkit._kernel import bpf as _bpf

    _bpf.ensure_bpffs("/sys/fs/bpf")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = Path(tmp) / "bench_many.bpf.c", Path(tmp) / "bench_many.bpf.o"
        generate(src, args.programs, args.loop)
        compile_object(src, obj)
        if args.keep:
            shutil.copy(obj, args.keep)
        import bpfkit

        spec = bpfkit.load_spec(obj)
        print(f"object: {len(spec.programs)} programs, {len(spec.maps)} maps, "
              f"{sum(p.insn_count for p in spec.programs.values())} instructions")
        # In-process cost of parsing, for the record.
        start = time.perf_counter()
        for _ in range(10):
            bpfkit.load_spec(obj)
        parse_ms = (time.perf_counter() - start) / 10 * 1000
        root = f"/sys/fs/bpf/bpfkit-bench-{uuid.uuid4().hex[:8]}"
        os.mkdir(root)
        ours, theirs, startup = [], [], []
        try:
            for _ in range(args.rounds):
                # Alternate the order so neither tool always runs on a warmer kernel.
                for tool in ("bpftool", "bpfkit") if len(ours) % 2 == 0 else ("bpfkit", "bpftool"):
                    target = os.path.join(root, tool)
                    if tool == "bpftool":
                        theirs.append(timed([bpftool, "prog", "loadall", str(obj), target,
                                             "pinmaps", target + "-maps"]))
                    else:
                        ours.append(timed([sys.executable, "-m", "bpfkit.cli", "load", str(obj), target], env))
                    shutil.rmtree(target, ignore_errors=True)
                    shutil.rmtree(target + "-maps", ignore_errors=True)
                startup.append(timed([sys.executable, "-c", "import bpfkit.cli.main, bpfkit.collection, bpfkit._kernel.bpf"], env))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        in_process = []
        if args.in_process_rounds:
            for label, path in ((f"{len(spec.programs)} programs", obj), ("1 program", REPO / "bpf/.output/minimal.bpf.o"),
                                ("CO-RE", REPO / "bpf/.output/loader_core.bpf.o")):
                in_process.append((label, *compare_in_process(path, args.in_process_rounds)))
    med = lambda runs, i: statistics.median(r[i] for r in runs)  # noqa: E731
    w_ours, w_theirs, w_start = med(ours, 0), med(theirs, 0), med(startup, 0)
    c_ours, c_theirs, c_start = med(ours, 1), med(theirs, 1), med(startup, 1)
    print(f"                      {'wall':>9}  {'CPU':>9}   (medians of {args.rounds} rounds)")
    print(f"bpftool prog loadall: {w_theirs * 1000:7.0f}ms  {c_theirs * 1000:7.0f}ms")
    print(f"bpfkit load:          {w_ours * 1000:7.0f}ms  {c_ours * 1000:7.0f}ms")
    print(f"  of which starting Python and importing bpfkit: {w_start * 1000:.0f}ms wall, {c_start * 1000:.0f}ms CPU")
    print(f"ratio bpfkit/bpftool: {w_ours / w_theirs:8.2f}x {c_ours / c_theirs:8.2f}x  (aim: within 1.5x)")
    print(f"bpfkit parsing the object in process: {parse_ms:.1f}ms; load average {os.getloadavg()[0]:.1f}")
    if in_process:
        load = os.getloadavg()
        print(f"in process, medians (best) of {args.in_process_rounds}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}:")
        print(f"  {'object':<14}{'Collection(spec)':>20}{'bpf_object__load':>20}{'ratio':>8}  target <= 1.5x")
        for label, (ours_w, ours_c), (theirs_w, theirs_c) in in_process:
            for what, ours_s, theirs_s in (("wall", ours_w, theirs_w), ("CPU", ours_c, theirs_c)):
                name = f"{label} {what}"
                if not theirs_s:
                    print(f"  {name:<14}{_ms(ours_s):>20}{'(no libbpf)':>20}")
                    continue
                ratio = statistics.median(ours_s) / statistics.median(theirs_s)
                print(f"  {name:<14}{_ms(ours_s):>20}{_ms(theirs_s):>20}{ratio:>7.2f}x  {'met' if ratio <= 1.5 else 'NOT met'}")
    return 0


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ({min(samples) * 1000:.1f})ms"


def compare_in_process(obj: Path, rounds: int) -> tuple[tuple[list[float], list[float]], tuple[list[float], list[float]]]:
    """((wall, CPU) seconds of Collection(spec), (wall, CPU) of libbpf's bpf_object__load),
    alternating. CPU is user + system time of the process (the verifier runs in it), which
    other processes on a loaded machine cannot inflate the way they inflate wall time."""
    from c_harness import harness

    import bpfkit

    exe = harness("load_bench")
    spec = bpfkit.load_spec(obj)
    bpfkit.Collection(spec).close()  # warm: imports, and vmlinux BTF for CO-RE (cached per process)
    ours: tuple[list[float], list[float]] = ([], [])
    theirs: tuple[list[float], list[float]] = ([], [])
    for r in range(rounds):
        for side in ("libbpf", "bpfkit") if r % 2 == 0 else ("bpfkit", "libbpf"):
            if side == "libbpf" and exe is not None:
                out = subprocess.run([str(exe), str(obj), "1"], check=True, capture_output=True, text=True).stdout.split()
                theirs[0].append(float(out[1]))
                theirs[1].append(float(out[2]))
            elif side == "bpfkit":
                start, cpu = time.perf_counter(), time.process_time()
                coll = bpfkit.Collection(spec)
                ours[1].append(time.process_time() - cpu)
                ours[0].append(time.perf_counter() - start)
                coll.close()
    return ours, theirs

if __name__ == "__main__":
    raise SystemExit(main())
