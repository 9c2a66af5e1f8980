// SPDX-License-Identifier: GPL-2.0
// examples/offcputime: time spent off CPU, by stack (bcc's and libbpf-tools' offcputime).
// At sched_switch (a raw tracepoint: it runs in the task leaving the CPU, before the switch)
// the leaving task's stacks and the time are kept by thread id; when that thread is switched
// in again, the time it was off is added to counts[stack key]. The key is the convention
// bpfkit.profile reads (docs/stacks.md); the values are microseconds.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define MAX_DEPTH 127

struct stack_key {
	__u32 pid;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	char comm[16];
};

struct start {
	__u64 ts;
	struct stack_key key;
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);  /* thread id */
	__type(value, struct start);
} starts SEC(".maps");

const volatile __u32 target_tgid = 0;  /* 0: every process */
const volatile __u64 min_us = 1;

SEC("raw_tp/sched_switch")
int on_switch(struct bpf_raw_tracepoint_args *ctx)
{
	/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, ...) */
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u32 prev_tid = BPF_CORE_READ(prev, pid), prev_tgid = BPF_CORE_READ(prev, tgid);
	__u32 next_tid = BPF_CORE_READ(next, pid);
	__u64 now = bpf_ktime_get_ns(), zero = 0, delta, *value;
	struct start s = {}, *st;

	if (prev_tid && (!target_tgid || prev_tgid == target_tgid)) {
		s.ts = now;
		s.key.pid = prev_tgid;
		s.key.user_stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		s.key.kernel_stack_id = bpf_get_stackid(ctx, &stacks, 0);
		bpf_get_current_comm(s.key.comm, sizeof(s.key.comm));  /* current is prev */
		bpf_map_update_elem(&starts, &prev_tid, &s, BPF_ANY);
	}
	st = bpf_map_lookup_elem(&starts, &next_tid);
	if (!st)
		return 0;
	delta = (now - st->ts) / 1000;
	s.key = st->key;
	bpf_map_delete_elem(&starts, &next_tid);
	if (delta < min_us)
		return 0;
	value = bpf_map_lookup_elem(&counts, &s.key);
	if (!value) {
		bpf_map_update_elem(&counts, &s.key, &zero, BPF_NOEXIST);
		value = bpf_map_lookup_elem(&counts, &s.key);
	}
	if (value)
		__sync_fetch_and_add(value, delta);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
