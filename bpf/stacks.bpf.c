// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Stack tests (bpfkit.symbols, typed stack-trace maps): a SEC("perf_event") program sampling
// one process (target_tgid; 0: every process). Per sample it counts (pid, user stack id,
// kernel stack id, comm) in `counts` (include/stack_counts.h: the convention `bpfkit attach
// --stacks` reads, as bcc's profile keys its counts), records the user stack by build id in
// `build_ids`, and copies the user stack with bpf_get_stack into a ring-buffer record.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define STACK_MAX_DEPTH 64
#include "stack_counts.h"
#define MAX_DEPTH STACK_MAX_DEPTH

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_STACK_BUILD_ID);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_DEPTH * sizeof(struct bpf_stack_build_id));
} build_ids SEC(".maps");

struct ustack_record {
	__u32 pid;
	__s32 size;  /* bytes bpf_get_stack wrote, or its error */
	__u64 ips[MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} records SEC(".maps");

const volatile __u32 target_tgid = 0;

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct stack_key key = {};
	struct ustack_record *rec;

	if (target_tgid && tgid != target_tgid)
		return 0;
	stack_key_current(ctx, &key, tgid);
	stack_count(&key, 1);
	bpf_get_stackid(ctx, &build_ids, BPF_F_USER_STACK);
	rec = bpf_ringbuf_reserve(&records, sizeof(*rec), 0);
	if (rec) {
		rec->pid = tgid;
		rec->size = bpf_get_stack(ctx, rec->ips, sizeof(rec->ips), BPF_F_USER_STACK);
		bpf_ringbuf_submit(rec, 0);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
