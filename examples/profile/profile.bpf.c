// SPDX-License-Identifier: GPL-2.0
// examples/profile: sample every CPU (perf_event, cpu-clock at 99 Hz by default) and count
// the (process, user stack, kernel stack) seen, as bcc's profile does. The key is the
// convention bpfkit.profile reads (docs/stacks.md): pid, user_stack_id, kernel_stack_id, comm.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define MAX_DEPTH 127  /* PERF_MAX_STACK_DEPTH */

struct stack_key {
	__u32 pid;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stack_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

const volatile __u32 target_tgid = 0;  /* 0: every process */
const volatile bool include_idle = false;

SEC("perf_event")
int profile(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct stack_key key = {};
	__u64 one = 1, *value;

	if (!include_idle && (__u32)id == 0)
		return 0;  /* the idle task */
	if (target_tgid && tgid != target_tgid)
		return 0;
	key.pid = tgid;
	/* -EFAULT when there is no user stack (kernel threads) or no kernel one (user mode) */
	key.user_stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	key.kernel_stack_id = bpf_get_stackid(ctx, &stacks, 0);
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	value = bpf_map_lookup_elem(&counts, &key);
	if (value)
		__sync_fetch_and_add(value, 1);
	else if (bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST)) {
		value = bpf_map_lookup_elem(&counts, &key);  /* another CPU made it first */
		if (value)
			__sync_fetch_and_add(value, 1);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
