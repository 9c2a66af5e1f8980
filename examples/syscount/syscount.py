#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""syscount: system calls by process, top N every interval (bcc's `syscount -P`).

    python examples/syscount/syscount.py --interval 1 --count 2
    python examples/syscount/syscount.py --pid 1234 --syscall getppid

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/syscount.bpf.o (`make -C bpf`).
syscount_skel.py is its typed skeleton (`bpfkit gen skeleton`).
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
import time
from pathlib import Path

from syscount_skel import Syscount

from bpfkit.errors import BPFKitError


def syscall_number(name: str) -> int:
    """A syscall's number on this machine: given as a number, or looked up by name in the
    UAPI header (asm/unistd_64.h, linux-libc-dev)."""
    if name.isdigit():
        return int(name)
    # This machine's multiarch directory first: Debian 13's linux-libc-dev has every
    # architecture's asm/ (/usr/include/powerpc-linux-gnu/asm/unistd_64.h says getppid is 64).
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    for header in (f"/usr/include/{multiarch}/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"):
        if not Path(header).exists():
            continue
        found = re.search(rf"^#define __NR_{re.escape(name)}\s+(\d+)", Path(header).read_text(), re.M)
        if found:
            return int(found.group(1))
    raise SystemExit(f"syscount: unknown system call {name!r} (give its number, or install linux-libc-dev)")


def main() -> None:
    parser = argparse.ArgumentParser(description="Count system calls by process.")
    parser.add_argument("-p", "--pid", type=int, default=0, help="only this process")
    parser.add_argument("-s", "--syscall", help="only this system call (name or number)")
    parser.add_argument("-i", "--interval", type=float, default=1.0, help="seconds between reports")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many reports")
    parser.add_argument("-T", "--top", type=int, default=10, help="processes per report")
    args = parser.parse_args()

    with Syscount.open() as skel:
        skel.targ_pid = args.pid  # const volatile knobs: set before load
        if args.syscall is not None:
            skel.targ_syscall = syscall_number(args.syscall)
        skel.load()
        skel.attach()  # tracepoint/raw_syscalls/sys_enter
        print("Tracing system calls by process... Ctrl-C to stop.", flush=True)
        for _ in iter(int, 1) if not args.count else range(args.count):
            time.sleep(args.interval)
            counts = list(skel.counts.items())  # {tgid: data_t(count, comm)}: read all, then clear
            for pid, _value in counts:
                del skel.counts[pid]
            counts.sort(key=lambda kv: kv[1].count, reverse=True)
            print(f"[{time.strftime('%H:%M:%S')}] {skel.total_calls} system calls so far")
            print(f"{'PID':<8} {'COMM':<16} {'SYSCALLS':>10}")
            for pid, value in counts[: args.top]:
                print(f"{pid:<8} {value.comm!s:<16} {value.count:>10}")
            print(flush=True)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"syscount: {exc}" if isinstance(exc, BPFKitError) else 0)
