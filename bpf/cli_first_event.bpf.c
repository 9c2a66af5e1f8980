// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// benchmarks/bench_startup.py: the smallest useful tracepoint object, one program sending one
// `struct event` (the pid) per openat(2) through a ring buffer.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct event {
	__u32 pid;
};

struct event *unused_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_openat")
int first_event(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	bpf_ringbuf_output(&events, &pid, sizeof(pid), 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
