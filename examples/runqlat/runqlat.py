#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""runqlat: run-queue (scheduler) latency as a log2 histogram (bcc's runqlat).

    python examples/runqlat/runqlat.py 1 5          # five 1-second histograms
    python examples/runqlat/runqlat.py --pid 1234   # one process, drawn at Ctrl-C

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/runqlat.bpf.o (`make -C bpf`).
runqlat_skel.py is its typed skeleton (`bpfkit gen skeleton`).
"""

from __future__ import annotations

import argparse
import sys
import time

from runqlat_skel import Runqlat, hist

from bpfkit import hist as histogram
from bpfkit.errors import BPFKitError


def main() -> None:
    parser = argparse.ArgumentParser(description="Summarize run-queue latency as a histogram.")
    parser.add_argument("interval", nargs="?", type=float, default=0.0, help="seconds between histograms")
    parser.add_argument("count", nargs="?", type=int, default=0, help="stop after this many")
    parser.add_argument("-p", "--pid", type=int, default=0, help="only this process")
    parser.add_argument("-m", "--milliseconds", action="store_true", help="in milliseconds")
    args = parser.parse_args()

    with Runqlat.open() as skel:
        skel.targ_tgid = args.pid
        skel.targ_ms = args.milliseconds
        skel.load()
        skel.attach()  # raw_tp/sched_wakeup, sched_wakeup_new, sched_switch
        print("Tracing run queue latency... Ctrl-C to stop.", flush=True)
        reports = 0
        try:
            while not args.count or reports < args.count:
                time.sleep(args.interval or 1e9)  # no interval: one histogram, at Ctrl-C
                reports += 1
                print(f"\n{time.strftime('%H:%M:%S')}")
                print(histogram.log2_hist(skel.hists[0], "msecs" if args.milliseconds else "usecs"), flush=True)
                skel.hists[0] = hist(slots=[])  # the next interval starts from zero
        except KeyboardInterrupt:
            print(histogram.log2_hist(skel.hists[0], "msecs" if args.milliseconds else "usecs"), flush=True)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"runqlat: {exc}" if isinstance(exc, BPFKitError) else 0)
