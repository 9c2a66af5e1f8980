#!/usr/bin/env python3
"""funclatency: time a user-space function, as a log2 histogram (bcc's funclatency, uprobes).

    python examples/funclatency/funclatency.py --func malloc              # libc's malloc
    python examples/funclatency/funclatency.py --func getppid --pid 1234 -u -i 1 -c 3

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/funclatency.bpf.o (`make -C bpf`).
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import bpfkit
from bpfkit import hist, link
from bpfkit.errors import BPFKitError

OBJECT = Path(__file__).resolve().parents[2] / "bpf/.output/examples/funclatency.bpf.o"
MAX_SLOTS = 32
UNITS = {"nsecs": 0, "usecs": 1, "msecs": 2}  # enum units


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

    unit = "msecs" if args.milliseconds else "usecs" if args.microseconds else "nsecs"
    spec = bpfkit.load_spec(OBJECT)
    spec.variables["targ_tgid"].value = args.pid
    spec.variables["units"].value = UNITS[unit]
    exe = link.Executable(args.lib)
    pid = args.pid or None  # also a perf-event filter: the probes fire in that process only
    with bpfkit.Collection(spec) as coll, \
            exe.uprobe(args.func, coll.programs["func_entry"], pid=pid), \
            exe.uretprobe(args.func, coll.programs["func_exit"], pid=pid):
        bss = coll.maps[".bss"]

        def report() -> None:
            slots = list(struct.unpack(f"<{MAX_SLOTS}I", bss[0]))  # __u32 hist[MAX_SLOTS], at offset 0
            bss[0] = bytes(4 * MAX_SLOTS)
            if args.interval:
                print(f"\n{time.strftime('%H:%M:%S')}")
            print(hist.log2_hist(slots, unit), flush=True)

        print(f"Tracing {args.lib}:{args.func}... Ctrl-C to stop.", flush=True)
        reports = 0
        try:
            while not args.count or reports < args.count:
                time.sleep(args.interval or 1e9)
                report()
                reports += 1
        except KeyboardInterrupt:
            report()


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"funclatency: {exc}" if isinstance(exc, BPFKitError) else 0)
