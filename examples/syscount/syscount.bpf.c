// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// syscount: system calls counted by process, like bcc's `syscount -P`.
// Every system call enters through the raw_syscalls:sys_enter tracepoint (one tracepoint for
// all of them, its `id` field is the syscall number); the count goes to `counts`, keyed by the
// calling process (tgid). examples/syscount/syscount.py prints the top N every interval.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TASK_COMM_LEN 16

struct data_t {
	__u64 count;
	char comm[TASK_COMM_LEN];
};

/* Filters, set before load (.rodata): a process, a syscall number (-1: all). */
const volatile __u32 targ_pid = 0;
const volatile __s32 targ_syscall = -1;

/* System calls seen by the filters above (a global in .bss, read after load). */
__u64 total_calls = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);  /* tgid */
	__type(value, struct data_t);
} counts SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct data_t zero = {}, *val;

	if (targ_pid && pid != targ_pid)
		return 0;
	if (targ_syscall >= 0 && ctx->id != targ_syscall)
		return 0;
	val = bpf_map_lookup_elem(&counts, &pid);
	if (!val) {
		bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&counts, &pid, &zero, BPF_NOEXIST);
		val = bpf_map_lookup_elem(&counts, &pid);
		if (!val)
			return 0;
	}
	__sync_fetch_and_add(&val->count, 1);
	__sync_fetch_and_add(&total_calls, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
