#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""funclatency: time a user-space function, as a log2 histogram (bcc's funclatency, uprobes).

    python examples/funclatency/funclatency.py --func malloc              # libc's malloc
    python examples/funclatency/funclatency.py --func getppid --pid 1234 -u -i 1 -c 3

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/funclatency.bpf.o (`make -C bpf`).
funclatency_skel.py is its typed skeleton (`bpfkit gen skeleton`).
"""

from __future__ import annotations

import argparse
import sys
import time

from funclatency_skel import Funclatency, units_enum

from bpfkit import hist, link
from bpfkit.errors import BPFKitError


def main() -> None:
    parser = argparse.ArgumentParser(description="Time a function of a binary or library.")
    parser.add_argument("-f", "--func", required=True, help="function name (e.g. malloc)")
    parser.add_argument("-l", "--lib", default="libc", help="binary or library (default libc)")
    parser.add_argument("-p", "--pid", type=int, default=0, help="only this process")
    parser.add_argument("-u", "--microseconds", action="store_true", help="in microseconds")
    parser.add_argument("-m", "--milliseconds", action="store_true", help="in milliseconds")
    parser.add_argument("-i", "--interval", type=float, default=0.0, help="seconds between histograms")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many")
    args = parser.parse_args()

    units = units_enum.MSEC if args.milliseconds else units_enum.USEC if args.microseconds else units_enum.NSEC
    with Funclatency.open() as skel:
        skel.targ_tgid = args.pid
        skel.units = units
        skel.load()
        # The sections name no function: attach at --func, in --pid only (a perf-event filter too).
        exe, pid = link.Executable(args.lib), args.pid or None
        with exe.uprobe(args.func, skel.func_entry, pid=pid), exe.uretprobe(args.func, skel.func_exit, pid=pid):
            print(f"Tracing {args.lib}:{args.func}... Ctrl-C to stop.", flush=True)
            unit = units.name.lower() + "s"
            for _ in iter(int, 1) if not args.count else range(args.count):
                try:
                    time.sleep(args.interval or 1e9)  # no interval: one histogram, at Ctrl-C
                except KeyboardInterrupt:
                    print(hist.log2_hist(skel.hist, unit), flush=True)
                    return
                print(f"\n{time.strftime('%H:%M:%S')}")
                print(hist.log2_hist(skel.hist, unit), flush=True)  # a __u32[32] global in .bss
                skel.hist = []  # zeroed: the next interval starts from nothing


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"funclatency: {exc}" if isinstance(exc, BPFKitError) else 0)
