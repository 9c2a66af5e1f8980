#!/usr/bin/env python3
"""runqlat: run-queue (scheduler) latency as a log2 histogram (bcc's runqlat).

    python examples/runqlat/runqlat.py 1 5          # five 1-second histograms
    python examples/runqlat/runqlat.py --pid 1234   # one process, drawn at Ctrl-C

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/runqlat.bpf.o (`make -C bpf`).
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import bpfkit
from bpfkit import hist
from bpfkit.errors import BPFKitError

OBJECT = Path(__file__).resolve().parents[2] / "bpf/.output/examples/runqlat.bpf.o"
MAX_SLOTS = 26


def main() -> None:
    parser = argparse.ArgumentParser(description="Summarize run-queue latency as a histogram.")
    parser.add_argument("interval", nargs="?", type=float, default=0.0, help="seconds between histograms")
    parser.add_argument("count", nargs="?", type=int, default=0, help="stop after this many")
    parser.add_argument("-p", "--pid", type=int, default=0, help="only this process")
    parser.add_argument("-m", "--milliseconds", action="store_true", help="in milliseconds")
    args = parser.parse_args()

    spec = bpfkit.load_spec(OBJECT)
    spec.variables["targ_tgid"].value = args.pid
    spec.variables["targ_ms"].value = args.milliseconds
    unit = "msecs" if args.milliseconds else "usecs"
    with bpfkit.Collection(spec) as coll, coll.attach_all():  # raw_tp/sched_* from the sections
        hists = coll.maps["hists"]

        def report() -> None:
            slots = list(struct.unpack(f"<{MAX_SLOTS}I", hists[0]))
            hists[0] = bytes(4 * MAX_SLOTS)  # start the next interval from zero
            if args.interval:
                print(f"\n{time.strftime('%H:%M:%S')}")
            print(hist.log2_hist(slots, unit), flush=True)

        print("Tracing run queue latency... Ctrl-C to stop.", flush=True)
        reports = 0
        try:
            while not args.count or reports < args.count:
                time.sleep(args.interval or 1e9)
                report()
                reports += 1
        except KeyboardInterrupt:
            report()  # what was counted until Ctrl-C, as bcc's runqlat does


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"runqlat: {exc}" if isinstance(exc, BPFKitError) else 0)
