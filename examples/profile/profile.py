#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""profile: sample stacks on every CPU (99 Hz by default) and write a flame graph, pprof,
folded stacks or speedscope JSON -- bcc's profile, with bpfkit.

    sudo python3 examples/profile/profile.py --duration 10 --output profile.svg
    sudo python3 examples/profile/profile.py --pid 1234 --output profile.pprof

The BPF side (profile.bpf.c, built by ``make -C bpf`` into
bpf/.output/examples/profile.bpf.o) counts (pid, user stack id, kernel stack id,
comm) in a hash map; at the end the stacks are read from the stack-trace map and named by
bpfkit.symbols (kallsyms; binaries, their debug files by build id, MiniDebugInfo; perf maps),
while the sampled processes still run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import stacktool

from bpfkit import link


def main(argv: list[str] | None = None) -> int:
    ap = stacktool.parser("Sample stacks on every CPU and write a profile.", "profile", "profile.svg")
    ap.add_argument("--freq", "-F", type=int, default=99, help="samples a second on each CPU (default 99)")
    ap.add_argument("--idle", action="store_true", help="include the idle task")
    args = ap.parse_args(argv)
    prof = stacktool.run(
        args, lambda coll: link.perf_event_sample(coll.programs["profile"], "cpu-clock", freq=args.freq),
        f"sampling at {args.freq} Hz:", {"include_idle": args.idle})
    prof.period = 1_000_000_000 // args.freq  # cpu-clock: one sample per period of CPU time, in ns
    return stacktool.finish(prof, args)


if __name__ == "__main__":
    sys.exit(main())
