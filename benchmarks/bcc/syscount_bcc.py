#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/syscount written with bcc: the same tool (system calls by process, top N every
interval, --pid, --syscall), the same output, for benchmarks/bench_syscount.py to compare
lines of code, start-up time and memory. Runs with Debian's python3-bpfcc (/usr/bin/python3).
"""

from __future__ import annotations

import argparse
import sys
import time

from bcc import BPF
from bcc.syscall import syscalls

TEXT = r"""
#include <linux/sched.h>
struct data_t {
    u64 count;
    char comm[TASK_COMM_LEN];
};

BPF_HASH(counts, u32, struct data_t, 10240);
BPF_ARRAY(total_calls, u64, 1);

TRACEPOINT_PROBE(raw_syscalls, sys_enter)
{
    u32 pid = bpf_get_current_pid_tgid() >> 32, zero_key = 0;
    struct data_t zero = {}, *val;
    u64 *total;

    if (TARG_PID && pid != TARG_PID)
        return 0;
    if (TARG_SYSCALL >= 0 && args->id != TARG_SYSCALL)
        return 0;
    val = counts.lookup(&pid);
    if (!val) {
        bpf_get_current_comm(&zero.comm, sizeof(zero.comm));
        counts.insert(&pid, &zero);
        val = counts.lookup(&pid);
        if (!val)
            return 0;
    }
    __sync_fetch_and_add(&val->count, 1);
    total = total_calls.lookup(&zero_key);
    if (total)
        __sync_fetch_and_add(total, 1);
    return 0;
}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="Count system calls by process.")
    parser.add_argument("-p", "--pid", type=int, default=0, help="only this process")
    parser.add_argument("-s", "--syscall", help="only this system call (name or number)")
    parser.add_argument("-i", "--interval", type=float, default=1.0, help="seconds between reports")
    parser.add_argument("-c", "--count", type=int, default=0, help="stop after this many reports")
    parser.add_argument("-T", "--top", type=int, default=10, help="processes per report")
    args = parser.parse_args()

    nr = -1
    if args.syscall is not None:
        names = {name.decode(): number for number, name in syscalls.items()}
        nr = int(args.syscall) if args.syscall.isdigit() else names[args.syscall]
    bpf = BPF(text=TEXT, cflags=[f"-DTARG_PID={args.pid}", f"-DTARG_SYSCALL={nr}"])
    counts, total = bpf["counts"], bpf["total_calls"]
    print("Tracing system calls by process... Ctrl-C to stop.", flush=True)
    for _ in iter(int, 1) if not args.count else range(args.count):
        time.sleep(args.interval)
        rows = sorted(((v.count, k.value, v.comm.decode(errors="replace")) for k, v in counts.items()), reverse=True)
        counts.clear()
        print(f"[{time.strftime('%H:%M:%S')}] {total[0].value} system calls so far")
        print(f"{'PID':<8} {'COMM':<16} {'SYSCALLS':>10}")
        for count, pid, comm in rows[: args.top]:
            print(f"{pid:<8} {comm:<16} {count:>10}")
        print(flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
