// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// examples/offcputime: time spent off CPU, by stack (bcc's and libbpf-tools' offcputime).
// At sched_switch (a raw tracepoint: it runs in the task leaving the CPU, before the switch)
// the leaving task's stacks and the time are kept by thread id; when that thread is switched
// in again, the time it was off is added to counts[stack key] (bpf/include/stack_counts.h: the
// convention bpfkit.profile reads, docs/stacks.md); the values are microseconds.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "stack_counts.h"

struct start {
	__u64 ts;
	struct stack_key key;
};

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
	__u64 now = bpf_ktime_get_ns(), delta;
	struct start s = {}, *st;

	if (prev_tid && (!target_tgid || prev_tgid == target_tgid)) {
		s.ts = now;
		stack_key_current(ctx, &s.key, prev_tgid);  /* current is prev */
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
	stack_count(&s.key, delta);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
