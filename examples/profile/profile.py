#!/usr/bin/env python3
"""profile: sample stacks on every CPU (99 Hz by default) and write a flame graph, pprof,
folded stacks or speedscope JSON -- bcc's profile, with bpfkit.

    sudo python3 examples/profile/profile.py --duration 10 --output profile.svg
    sudo python3 examples/profile/profile.py --pid 1234 --output profile.pprof

The BPF side (profile.bpf.c, built by ``make -C bpf`` into
bpf/.output/examples/profile/profile.bpf.o) counts (pid, user stack id, kernel stack id,
comm) in a hash map; at the end the stacks are read from the stack-trace map and named by
bpfkit.symbols (kallsyms; binaries, their debug files by build id, MiniDebugInfo; perf maps),
while the sampled processes still run.
"""

from __future__ import annotations

import argparse
import os
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

OBJECT = REPO / "bpf" / ".output" / "examples" / "profile" / "profile.bpf.o"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Sample stacks on every CPU and write a profile.")
    ap.add_argument("--pid", "-p", type=int, default=0, help="only this process (default: all)")
    ap.add_argument("--duration", "-d", type=float, default=10.0, help="seconds to sample (Ctrl-C stops early)")
    ap.add_argument("--freq", "-F", type=int, default=99, help="samples a second on each CPU (default 99)")
    ap.add_argument("--output", "-o", default="profile.svg",
                    help="FILE.svg, FILE.pprof, FILE.folded or FILE.speedscope.json; '-' prints folded stacks")
    ap.add_argument("--idle", action="store_true", help="include the idle task")
    ap.add_argument("--debug-root", default=DEFAULT_DEBUG_ROOT, help="separate debug files (by build id)")
    ap.add_argument("--object", default=str(OBJECT), help="the compiled profile.bpf.o")
    ap.add_argument("--top", type=int, default=5, help="print the N functions with most samples")
    args = ap.parse_args(argv)
    if args.output != "-":
        format_for(args.output)  # refuse an unknown suffix before sampling

    spec = bpfkit.load_spec(args.object)
    spec.variables["target_tgid"].value = args.pid
    spec.variables["include_idle"].value = args.idle
    sym = Symbolizer(debug_root=args.debug_root)
    with bpfkit.Collection(spec) as coll:
        start = time.monotonic()
        with link.perf_event_sample(coll.programs["profile"], "cpu-clock", freq=args.freq):
            print(f"sampling {'pid ' + str(args.pid) if args.pid else 'every process'} at {args.freq} Hz "
                  f"for {args.duration:g} s", file=sys.stderr)
            try:
                time.sleep(args.duration)
            except KeyboardInterrupt:
                pass
        elapsed = time.monotonic() - start
        prof = from_maps(coll.maps["counts"], coll.maps["stacks"], symbolizer=sym)
    prof.name = f"profile {'pid ' + str(args.pid) if args.pid else 'all'} {args.freq} Hz"
    prof.period = 1_000_000_000 // args.freq  # cpu-clock: one sample per period of CPU time, in ns
    prof.duration_ns = int(elapsed * 1e9)
    save(prof, args.output, top=args.top, title=prof.name)
    return 0


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("profile: needs root (CAP_BPF and CAP_PERFMON)", file=sys.stderr)
    sys.exit(main())
