#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""offcputime: time spent off CPU (blocked, sleeping, preempted), by stack -- bcc's
offcputime, with bpfkit.

    sudo python3 examples/offcputime/offcputime.py --duration 10 --output offcpu.svg
    sudo python3 examples/offcputime/offcputime.py --pid 1234 --min-us 1000 --output offcpu.folded

The BPF side (offcputime.bpf.c, a raw tracepoint on sched_switch; built by ``make -C bpf`` into
bpf/.output/examples/offcputime.bpf.o) keeps the stacks of the task leaving the CPU
and adds the time until it comes back, in microseconds, to counts[pid, user stack, kernel
stack, comm]. The profile's values are microseconds (pprof: sample type off_cpu/microseconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import stacktool

from bpfkit import link


def main(argv: list[str] | None = None) -> int:
    ap = stacktool.parser("Time spent off CPU, by stack.", "offcputime", "offcpu.svg")
    ap.add_argument("--min-us", type=int, default=1, help="ignore off-CPU spells shorter than this (µs)")
    args = ap.parse_args(argv)
    prof = stacktool.run(args, lambda coll: link.raw_tracepoint("sched_switch", coll.programs["on_switch"]),
                         "tracing off-CPU time of", {"min_us": args.min_us})
    prof.sample_type, prof.unit = "off_cpu", "microseconds"
    return stacktool.finish(prof, args)


if __name__ == "__main__":
    sys.exit(main())
