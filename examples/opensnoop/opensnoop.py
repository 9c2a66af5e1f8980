#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""opensnoop: trace openat(2) and openat2(2) calls with their results (libbpf-tools' opensnoop).

    python examples/opensnoop/opensnoop.py
    python examples/opensnoop/opensnoop.py -x -p 1234 -n python -T -U -d 10 -E

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/opensnoop.bpf.o (`make -C bpf`).
opensnoop_skel.py is its typed skeleton (`bpfkit gen skeleton`); its struct event, which the
object's BTF lacks, comes from the object's DWARF.
"""

from __future__ import annotations

import argparse
import sys
import time

from opensnoop_skel import Opensnoop, event

from bpfkit import events, syscalls
from bpfkit.errors import BPFKitError


def main() -> None:
    parser = argparse.ArgumentParser(description="Trace open family syscalls.")
    parser.add_argument("-p", "--pid", type=int, default=0, help="process ID to trace")
    parser.add_argument("-t", "--tid", type=int, default=0, help="thread ID to trace")
    parser.add_argument("-u", "--uid", type=int, default=-1, help="user ID to trace")
    parser.add_argument("-x", "--failed", action="store_true", help="failed opens only")
    parser.add_argument("-n", "--name", default="", help="trace process names containing this")
    parser.add_argument("-d", "--duration", type=float, default=0, help="duration to trace (seconds)")
    parser.add_argument("-T", "--timestamp", action="store_true", help="print a timestamp")
    parser.add_argument("-U", "--print-uid", action="store_true", help="print the UID")
    parser.add_argument("-E", "--errno-names", action="store_true", help="ERR as a name (ENOENT), not a number")
    args = parser.parse_args()

    def show(raw: memoryview) -> None:
        e = skel.decode(event, raw)  # struct event as its DWARF describes it
        comm, err = str(e.comm), -e.ret if e.ret < 0 else 0
        if args.name not in comm:  # libbpf-tools filters names in user space too
            return
        ts = f"{time.strftime('%H:%M:%S'):<8} " if args.timestamp else ""
        uid = f"{e.uid:<7} " if args.print_uid else ""
        shown = (syscalls.errno_name(err) or err) if args.errno_names and err else err
        print(f"{ts}{uid}{e.pid:<6} {comm:<16} {e.ret if e.ret >= 0 else -1:>3} {shown:>3} {e.fname.pathes!s}", flush=True)

    with Opensnoop.open() as skel:
        skel.targ_tgid, skel.targ_pid, skel.targ_failed = args.pid, args.tid, args.failed
        skel.targ_uid = args.uid & 0xFFFFFFFF  # -1 (every user): the C's INVALID_UID
        if syscalls.tracepoint_exists("syscalls", "sys_enter_openat2"):  # Linux 5.6+
            skel.load()
        else:
            skel.load(programs=["enter_openat", "exit_openat"])
        skel.attach()
        with events.RingBuffer(skel.events, show) as ring:
            print(("TIME     " if args.timestamp else "") + ("UID     " if args.print_uid else "")
                  + f"{'PID':<6} {'COMM':<16} {'FD':>3} {'ERR':>3} PATH", flush=True)
            end = time.monotonic() + args.duration
            while not args.duration or time.monotonic() < end:
                ring.poll(timeout=0.1)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C; or what the kernel refused
        sys.exit(f"opensnoop: {exc}" if isinstance(exc, BPFKitError) else 0)
