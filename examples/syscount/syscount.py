#!/usr/bin/env python3
"""syscount: system calls by process, top N every interval (bcc's `syscount -P`).

    python examples/syscount/syscount.py --interval 1 --count 2
    python examples/syscount/syscount.py --pid 1234 --syscall getppid

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/syscount.bpf.o (`make -C bpf`).
"""

from __future__ import annotations

import argparse
import glob
import re
import sys
import time
from pathlib import Path

import bpfkit
from bpfkit import link
from bpfkit.errors import BPFKitError

OBJECT = Path(__file__).resolve().parents[2] / "bpf/.output/examples/syscount.bpf.o"


def syscall_number(name: str) -> int:
    """A syscall's number on this machine: given as a number, or looked up by name in the
    UAPI header (asm/unistd_64.h, linux-libc-dev)."""
    if name.isdigit():
        return int(name)
    for header in glob.glob("/usr/include/*/asm/unistd_64.h") + glob.glob("/usr/include/asm/unistd_64.h"):
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

    spec = bpfkit.load_spec(OBJECT)
    spec.variables["targ_pid"].value = args.pid
    spec.maps["counts"].key_format = "<I"  # tgid
    spec.maps["counts"].value_format = "<Q16s"  # struct data_t
    if args.syscall is not None:
        spec.variables["targ_syscall"].value = syscall_number(args.syscall)
    with bpfkit.Collection(spec) as coll, \
            link.tracepoint("raw_syscalls", "sys_enter", coll.programs["sys_enter"]):
        counts = coll.maps["counts"]
        print("Tracing system calls by process... Ctrl-C to stop.", flush=True)
        reports = 0
        while not args.count or reports < args.count:
            time.sleep(args.interval)
            rows = []
            for pid, (count, comm) in list(counts.items()):  # read all, then clear
                rows.append((count, pid, comm.split(b"\0", 1)[0].decode(errors="replace")))
                counts.delete(pid)
            rows.sort(reverse=True)
            print(f"[{time.strftime('%H:%M:%S')}]")
            print(f"{'PID':<8} {'COMM':<16} {'SYSCALLS':>10}")
            for count, pid, comm in rows[: args.top]:
                print(f"{pid:<8} {comm:<16} {count:>10}")
            print(flush=True)
            reports += 1


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"syscount: {exc}" if isinstance(exc, BPFKitError) else 0)
