#!/usr/bin/env python3
"""execsnoop: trace every execve(2) with its arguments (bcc's execsnoop).

    python examples/execsnoop/execsnoop.py
    python examples/execsnoop/execsnoop.py --ppid 1234 --fails --count 5

Needs root (CAP_BPF, CAP_PERFMON) and bpf/.output/examples/execsnoop.bpf.o (`make -C bpf`).
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import bpfkit
from bpfkit import events, link
from bpfkit.errors import BPFKitError

OBJECT = Path(__file__).resolve().parents[2] / "bpf/.output/examples/execsnoop.bpf.o"
MAXARGS, ARGLEN = 16, 64
EVENT = struct.Struct(f"<IIIiI16s{MAXARGS * ARGLEN}s")  # struct event


def text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description="Trace exec() calls with their arguments.")
    parser.add_argument("--ppid", type=int, default=0, help="only children of this process")
    parser.add_argument("-x", "--fails", action="store_true", help="include failed execs")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many events")
    args = parser.parse_args()

    spec = bpfkit.load_spec(OBJECT)
    spec.variables["targ_ppid"].value = args.ppid
    spec.variables["ignore_failed"].value = not args.fails
    with bpfkit.Collection(spec) as coll, \
            link.tracepoint("syscalls", "sys_enter_execve", coll.programs["enter_execve"]), \
            link.tracepoint("syscalls", "sys_exit_execve", coll.programs["exit_execve"]), \
            events.RingBuffer(coll.maps["events"]) as ring:
        print("Tracing exec() calls... Ctrl-C to stop.", flush=True)
        print(f"{'TIME':<8} {'PCOMM':<16} {'PID':>7} {'PPID':>7} {'RET':>4} ARGS", flush=True)
        seen = 0
        while not args.count or seen < args.count:
            for record in ring.read(timeout=0.5):
                pid, ppid, _uid, retval, argc, comm, argv = EVENT.unpack(bytes(record))
                words = [text(argv[i * ARGLEN : (i + 1) * ARGLEN]) for i in range(argc)]
                more = " ..." if argc == MAXARGS else ""
                print(f"{time.strftime('%H:%M:%S'):<8} {text(comm):<16} {pid:>7} {ppid:>7} {retval:>4} "
                      f"{' '.join(words)}{more}", flush=True)
                seen += 1
                if seen == args.count:
                    break


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BPFKitError) as exc:  # Ctrl-C while starting; or what the kernel refused
        sys.exit(f"execsnoop: {exc}" if isinstance(exc, BPFKitError) else 0)
