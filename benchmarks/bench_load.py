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

``--scaling``: load time against the number of programs (``--scaling-programs``, at
``--loop`` iterations each) and against the instructions per program (``--scaling-loops``: the
loop fully unrolled, so the instruction count grows with it, at ``--scaling-programs-fixed``
programs), each object generated here; per object, whole processes (``bpfkit load`` against
``bpftool prog loadall``) and in process (``Collection(spec)`` against ``bpf_object__load``,
wall and CPU), medians of ``--scaling-rounds`` alternating rounds, then the per-program and
per-instruction slopes (least squares) of each side, and bpfkit's above libbpf's.
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

UNROLL = "\t#pragma clang loop unroll(full)\n"

RINGBUF_TAIL = """{ __u64 *e = bpf_ringbuf_reserve(&events, 8, 0); if (e) { *e = acc; bpf_ringbuf_submit(e, 0); } }"""


def generate(path: Path, programs: int, loop: int, unroll: bool = False) -> None:
    parts = [HEADER]
    for i in range(programs):
        section = SECTIONS[i % len(SECTIONS)]
        body = BODY.format(section=section, i=i, loop=loop, tail=RINGBUF_TAIL if i % 3 == 0 else "")
        if unroll:  # straight-line code: the instruction count grows with the loop
            body = body.replace("\tfor (j = 0;", UNROLL + "\tfor (j = 0;", 1)
        parts.append(body)
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
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
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
    parser.add_argument("--scaling", action="store_true", help="load time against programs and instructions")
    parser.add_argument("--scaling-programs", default="1,10,30,60,120", help="--scaling: programs per object")
    parser.add_argument("--scaling-loops", default="1,8,32,128", help="--scaling: unrolled iterations per program")
    parser.add_argument("--scaling-programs-fixed", type=int, default=10, help="--scaling: programs at each loop size")
    parser.add_argument("--scaling-rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (loading BPF programs)")
    bpftool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    sys.path.insert(0, str(REPO))
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if args.scaling:
        return scaling(args, bpftool, env)
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
        ours, theirs, startup = whole_processes(obj, args.rounds, bpftool, env, startup=True)
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


Runs = list[tuple[float, float]]


def whole_processes(obj: Path, rounds: int, bpftool: str, env: dict[str, str],
                    startup: bool = False) -> tuple[Runs, Runs, Runs]:
    """(wall, CPU) of ``bpfkit load`` and of ``bpftool prog loadall`` of ``obj``, ``rounds``
    times each, alternating; and of importing bpfkit alone when ``startup``."""
    root = f"/sys/fs/bpf/bpfkit-bench-{uuid.uuid4().hex[:8]}"
    os.mkdir(root)
    ours: Runs = []
    theirs: Runs = []
    started: Runs = []
    try:
        for _ in range(rounds):
            # Alternate the order so neither tool always runs on a warmer kernel.
            for tool in ("bpftool", "bpfkit") if len(ours) % 2 == 0 else ("bpfkit", "bpftool"):
                target = os.path.join(root, tool)
                if tool == "bpftool":
                    theirs.append(timed([bpftool, "prog", "loadall", str(obj), target, "pinmaps", target + "-maps"]))
                else:
                    ours.append(timed([sys.executable, "-m", "bpfkit.cli", "load", str(obj), target], env))
                shutil.rmtree(target, ignore_errors=True)
                shutil.rmtree(target + "-maps", ignore_errors=True)
            if startup:
                started.append(timed([sys.executable, "-c", "import bpfkit.cli.main, bpfkit.collection, bpfkit._kernel.bpf"], env))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return ours, theirs, started


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def scaling(args: argparse.Namespace, bpftool: str, env: dict[str, str]) -> int:
    """Load time against programs per object, then against instructions per program."""
    import bpfkit

    rounds = args.scaling_rounds
    configs = [("programs", int(n), args.loop, False) for n in args.scaling_programs.split(",")]
    configs += [("instructions", args.scaling_programs_fixed, int(n), True) for n in args.scaling_loops.split(",")]
    rows: list[tuple[str, int, int, list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, programs, loop, unroll in configs:
            src, obj = Path(tmp) / f"scale_{programs}_{loop}.bpf.c", Path(tmp) / f"scale_{programs}_{loop}.bpf.o"
            generate(src, programs, loop, unroll)
            compile_object(src, obj)
            insns = sum(p.insn_count for p in bpfkit.load_spec(obj).programs.values())
            print(f"[{time.strftime('%H:%M:%S')}] {kind}: {programs} programs, {insns} instructions ...",
                  file=sys.stderr, flush=True)
            ours, theirs, _ = whole_processes(obj, rounds, bpftool, env)
            (ow, oc), (tw, tc) = compare_in_process(obj, rounds)
            med = statistics.median
            rows.append((kind, programs, insns, [med(r[0] for r in theirs), med(r[0] for r in ours),
                                                 med(tw) if tw else 0.0, med(ow), med(tc) if tc else 0.0, med(oc),
                                                 med(r[1] for r in theirs), med(r[1] for r in ours)]))
    load = os.getloadavg()
    print(f"load time against the object's size; medians of {rounds} alternating rounds; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; kernel {os.uname().release}")
    print("whole process: bpftool prog loadall / bpfkit load, wall and CPU; in process: bpf_object__load / "
          "Collection(spec), wall and CPU; ms")
    head = (f"{'programs':>8} {'insns':>7}  {'bpftool':>8} {'bpfkit':>8}  {'bpftool':>8} {'bpfkit':>8}  "
            f"{'libbpf':>8} {'bpfkit':>8} {'ratio':>6}  {'libbpf':>8} {'bpfkit':>8} {'ratio':>6}")
    for kind, xname in (("programs", "program"), ("instructions", "instruction")):
        sel = [r for r in rows if r[0] == kind]
        what = f"{args.loop} loop iterations each" if kind == "programs" else \
            f"{args.scaling_programs_fixed} programs, loop unrolled"
        print(f"\nagainst {kind} ({what}):")
        print(f"{'':17}  {'whole process wall':>17}  {'whole process CPU':>17}  {'in process wall':>24}  "
              f"{'in process CPU':>24}")
        print(head)
        for _, programs, insns, v in sel:
            ratio_w = f"{v[3] / v[2]:5.2f}x" if v[2] else "     -"
            ratio_c = f"{v[5] / v[4]:5.2f}x" if v[4] else "     -"
            print(f"{programs:8} {insns:7}  {v[0] * 1000:8.1f} {v[1] * 1000:8.1f}  {v[6] * 1000:8.1f} {v[7] * 1000:8.1f}  "
                  f"{v[2] * 1000:8.1f} {v[3] * 1000:8.1f} "
                  f"{ratio_w:>6}  {v[4] * 1000:8.1f} {v[5] * 1000:8.1f} {ratio_c:>6}")
        xs = [float(r[1] if kind == "programs" else r[2]) for r in sel]
        unit, scale = ("ms", 1000) if kind == "programs" else ("us", 1e6)
        slopes = [slope(xs, [r[3][i] for r in sel]) * scale for i in range(8)]
        print(f"per {xname} ({unit}, least squares): whole process wall bpftool {slopes[0]:.3f}, bpfkit {slopes[1]:.3f}, "
              f"CPU bpftool {slopes[6]:.3f}, bpfkit {slopes[7]:.3f}; "
              f"in process wall libbpf {slopes[2]:.3f}, bpfkit {slopes[3]:.3f}; CPU libbpf {slopes[4]:.3f}, "
              f"bpfkit {slopes[5]:.3f} (bpfkit's own: {slopes[5] - slopes[4]:+.3f} CPU)")
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
