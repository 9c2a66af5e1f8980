#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach bpf/.output/cli_first_event.bpf.o --events events`` written with bcc, for
benchmarks/bench_startup.py's time to first event: one tracepoint program on
syscalls:sys_enter_openat sending the pid of each openat(2) through a ring buffer, each record
printed as it arrives (``events: pid=N``) until SIGINT. bcc compiles the C when it starts,
which is part of the job. Runs where ``import bcc`` works (python3-bpfcc).
"""

from __future__ import annotations

import ctypes

from bcc import BPF

TEXT = r"""
BPF_RINGBUF_OUTPUT(events, 16);

TRACEPOINT_PROBE(syscalls, sys_enter_openat)
{
    u32 pid = bpf_get_current_pid_tgid() >> 32;

    events.ringbuf_output(&pid, sizeof(pid), 0);
    return 0;
}
"""


def main() -> None:
    bpf = BPF(text=TEXT)  # compiles, loads and attaches the tracepoint (TRACEPOINT_PROBE)

    def on_event(ctx: object, data: int, size: int) -> None:
        pid = ctypes.cast(data, ctypes.POINTER(ctypes.c_uint32)).contents.value
        print(f"events: pid={pid}", flush=True)

    bpf["events"].open_ring_buffer(on_event)
    try:
        while True:
            bpf.ring_buffer_poll()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
