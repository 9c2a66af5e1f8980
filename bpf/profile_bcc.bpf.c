// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A profile object keyed as bcc's tools/profile.py keys its counts (integration/
// test_profile_keys.py): struct key_t {u32 pid; u64 kernel_ip; int user_stack_id; int
// kernel_stack_id; char name[16];}, where kernel_ip is the sampled instruction pointer when
// the sample hit the kernel (bcc adds it as the kernel stack's innermost frame), and the
// stack-trace map `stack_traces` sized at build time as bcc does. Samples only target_tgid.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "profile_maps.bpf.h"
#include <bpf/bpf_tracing.h>

#define TASK_COMM_LEN 16

struct key_t {
	u32 pid;
	u64 kernel_ip;
	int user_stack_id;
	int kernel_stack_id;
	char name[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct key_t);
	__type(value, u64);
	__uint(max_entries, 40960);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(u32));
	__uint(value_size, 127 * sizeof(u64));
	__uint(max_entries, 16384);
} stack_traces SEC(".maps");

const volatile __u32 target_tgid = 0;

SEC("perf_event")
int do_perf_event(struct bpf_perf_event_data *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct key_t key = {.pid = tgid};
	u64 zero = 0, *val, ip;

	if (target_tgid && tgid != target_tgid)
		return 0;
	bpf_get_current_comm(&key.name, sizeof(key.name));
	key.user_stack_id = bpf_get_stackid(&ctx->regs, &stack_traces, BPF_F_USER_STACK);
	key.kernel_stack_id = bpf_get_stackid(&ctx->regs, &stack_traces, 0);
	if (key.kernel_stack_id >= 0) {
		ip = PT_REGS_IP(&ctx->regs);
		if (ip >> 63)  /* a kernel address (x86-64, arm64: the upper half) */
			key.kernel_ip = ip;
	}
	val = lookup_or_try_init(&counts, &key, &zero);
	if (val)
		__sync_fetch_and_add(val, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
