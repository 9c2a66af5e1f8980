#!/usr/bin/env python3
"""offcputime: time spent off CPU (blocked, sleeping, preempted), by stack -- bcc's
offcputime, with bpfkit.

    sudo python3 examples/offcputime/offcputime.py --duration 10 --output offcpu.svg
    sudo python3 examples/offcputime/offcputime.py --pid 1234 --min-us 1000 --output offcpu.folded

The BPF side (offcputime.bpf.c, a raw tracepoint on sched_switch; built by ``make -C bpf`` into
bpf/.output/examples/offcputime/offcputime.bpf.o) keeps the stacks of the task leaving the CPU
and adds the time until it comes back, in microseconds, to counts[pid, user stack, kernel
stack, comm]. The profile's values are microseconds (pprof: sample type off_cpu/microseconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

import bpfkit  # noqa: E402
from bpfkit import link  # noqa: E402
from bpfkit.profile import format_for, from_maps, save  # noqa: E402
from bpfkit.symbols import Symbolizer  # noqa: E402
from bpfkit.symbols.elf import DEFAULT_DEBUG_ROOT  # noqa: E402

OBJECT = REPO / "bpf" / ".output" / "examples" / "offcputime" / "offcputime.bpf.o"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Time spent off CPU, by stack.")
    ap.add_argument("--pid", "-p", type=int, default=0, help="only this process (default: all)")
    ap.add_argument("--duration", "-d", type=float, default=10.0, help="seconds to trace (Ctrl-C stops early)")
    ap.add_argument("--min-us", type=int, default=1, help="ignore off-CPU spells shorter than this (µs)")
    ap.add_argument("--output", "-o", default="offcpu.svg",
                    help="FILE.svg, FILE.pprof, FILE.folded or FILE.speedscope.json; '-' prints folded stacks")
    ap.add_argument("--debug-root", default=DEFAULT_DEBUG_ROOT, help="separate debug files (by build id)")
    ap.add_argument("--object", default=str(OBJECT), help="the compiled offcputime.bpf.o")
    ap.add_argument("--top", type=int, default=5, help="print the N functions with most time off CPU")
    args = ap.parse_args(argv)
    if args.output != "-":
        format_for(args.output)

    spec = bpfkit.load_spec(args.object)
    spec.variables["target_tgid"].value = args.pid
    spec.variables["min_us"].value = args.min_us
    with bpfkit.Collection(spec) as coll:
        start = time.monotonic()
        with link.raw_tracepoint("sched_switch", coll.programs["on_switch"]):
            print(f"tracing off-CPU time of {'pid ' + str(args.pid) if args.pid else 'every process'} "
                  f"for {args.duration:g} s", file=sys.stderr)
            try:
                time.sleep(args.duration)
            except KeyboardInterrupt:
                pass
        prof = from_maps(coll.maps["counts"], coll.maps["stacks"], symbolizer=Symbolizer(debug_root=args.debug_root))
    prof.name = f"offcputime {'pid ' + str(args.pid) if args.pid else 'all'}"
    prof.sample_type, prof.unit = "off_cpu", "microseconds"
    prof.duration_ns = int((time.monotonic() - start) * 1e9)
    save(prof, args.output, top=args.top, title=prof.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
