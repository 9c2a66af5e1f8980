// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// examples/profile: sample every CPU (perf_event, cpu-clock at 99 Hz by default) and count
// the (process, user stack, kernel stack) seen, as bcc's profile does, in the maps of
// bpf/include/stack_counts.h: the convention bpfkit.profile reads (docs/stacks.md).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "stack_counts.h"

const volatile __u32 target_tgid = 0;  /* 0: every process */
const volatile bool include_idle = false;

SEC("perf_event")
int profile(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct stack_key key = {};

	if (!include_idle && (__u32)id == 0)
		return 0;  /* the idle task */
	if (target_tgid && tgid != target_tgid)
		return 0;
	stack_key_current(ctx, &key, tgid);
	stack_count(&key, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
