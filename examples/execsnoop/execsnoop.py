#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""execsnoop: trace every execve(2) with its arguments (bcc's execsnoop).

    python examples/execsnoop/execsnoop.py
    python examples/execsnoop/execsnoop.py --ppid 1234 --fails --count 5

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/execsnoop.bpf.o (`make -C bpf`).
execsnoop_skel.py is its typed skeleton (`bpfkit gen skeleton`).
"""

from __future__ import annotations

import argparse
import sys
import time

from execsnoop_skel import Execsnoop, event

from bpfkit import events
from bpfkit.errors import BPFKitError

MAXARGS = 16  # as execsnoop.bpf.c: more arguments than this are cut


def main() -> None:
    parser = argparse.ArgumentParser(description="Trace exec() calls with their arguments.")
    parser.add_argument("--ppid", type=int, default=0, help="only children of this process")
    parser.add_argument("-x", "--fails", action="store_true", help="include failed execs")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many events")
    args = parser.parse_args()

    with Execsnoop.open() as skel:
        skel.targ_ppid = args.ppid
        skel.ignore_failed = not args.fails
        skel.load()
        skel.attach()  # syscalls:sys_enter_execve and sys_exit_execve
        with events.RingBuffer(skel.events) as ring:
            print("Tracing exec() calls... Ctrl-C to stop.", flush=True)
            print(f"{'TIME':<8} {'PCOMM':<16} {'PID':>7} {'PPID':>7} {'RET':>4} ARGS", flush=True)
            seen = 0
            while not args.count or seen < args.count:
                for record in ring.read(timeout=0.5):
                    e = skel.decode(event, record)
                    argv = " ".join(str(a) for a in e.args[: e.args_count]) + (" ..." if e.args_count == MAXARGS else "")
                    print(f"{time.strftime('%H:%M:%S'):<8} {e.comm!s:<16} {e.pid:>7} {e.ppid:>7} {e.retval:>4} {argv}",
                          flush=True)
                    seen += 1
                    if seen == args.count:
                        break


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"execsnoop: {exc}" if isinstance(exc, BPFKitError) else 0)
