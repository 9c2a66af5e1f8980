#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""execsnoop_varlen: trace every execve(2) with its arguments, from libbpf-tools' execsnoop record.

    python examples/execsnoop/execsnoop_varlen.py
    python examples/execsnoop/execsnoop_varlen.py -x -T -U --ppid 1234 --max-args 5 --count 3

The BPF side sends struct event cut where its NUL-separated arguments end (execsnoop.bpf.c's
way); bpfkit decodes the short record and splits args into argv (char_arrays "strings").
Needs root and bpf/.output/examples/execsnoop_varlen.bpf.o (`make -C bpf`);
execsnoop_varlen_skel.py is its typed skeleton (`bpfkit gen skeleton`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import cast

from execsnoop_varlen_skel import ExecsnoopVarlen, event

from bpfkit import events
from bpfkit.errors import BPFKitError


def main() -> None:
    parser = argparse.ArgumentParser(description="Trace exec syscalls.")
    parser.add_argument("-T", "--time", action="store_true", help="include a time column (HH:MM:SS)")
    parser.add_argument("-t", "--timestamp", action="store_true", help="include seconds since start")
    parser.add_argument("-x", "--fails", action="store_true", help="include failed exec()s")
    parser.add_argument("-u", "--uid", type=int, default=-1, help="trace this UID only")
    parser.add_argument("-U", "--print-uid", action="store_true", help="print a UID column")
    parser.add_argument("-n", "--name", default="", help="only print commands whose name contains this")
    parser.add_argument("--max-args", type=int, default=20, choices=range(1, 61), metavar="1..60",
                        help="arguments read and printed (default 20)")
    parser.add_argument("--ppid", type=int, default=0, help="only children of this process")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many events")
    args = parser.parse_args()
    start, seen = time.monotonic(), 0

    def show(cpu: int, e: event) -> None:  # struct event decoded: the fields the skeleton's event types
        nonlocal seen
        if args.name not in str(e.comm) or (args.count and seen >= args.count):
            return
        argv = cast("list[str]", e.args)  # char_arrays "strings": the NUL-separated args, split
        more = " ..." if e.args_count == args.max_args + 1 else ""
        print((f"{time.strftime('%H:%M:%S'):<8} " if args.time else "")
              + (f"{time.monotonic() - start:<8.3f}" if args.timestamp else "")
              + (f"{e.uid:<6}" if args.print_uid else "")
              + f"{e.comm!s:<16} {e.pid:<6} {e.ppid:<6} {e.retval:>3} {' '.join(argv)}{more}", flush=True)
        seen += 1

    with ExecsnoopVarlen.open() as skel:
        skel.ignore_failed, skel.max_args, skel.targ_ppid = not args.fails, args.max_args, args.ppid
        skel.targ_uid = args.uid & 0xFFFFFFFF  # -1 (every user): the C's INVALID_UID
        skel.load()
        skel.attach()  # syscalls:sys_enter_execve and sys_exit_execve
        with events.PerfBuffer(skel.events, show, record="struct event", char_arrays={"args": "strings"}) as perf:
            print(("TIME     " if args.time else "") + ("TIME(s)  " if args.timestamp else "")
                  + ("UID    " if args.print_uid else "") + f"{'PCOMM':<16} {'PID':<6} {'PPID':<6} RET ARGS", flush=True)
            while not args.count or seen < args.count:
                perf.poll(timeout=0.1)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C; or what the kernel refused
        sys.exit(f"execsnoop_varlen: {exc}" if isinstance(exc, BPFKitError) else 0)
