// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Iterators: every task as "pid tgid comm" lines, and the elements of a map given at attach
// time as "key value" lines (bpf_map_elem, 5.9).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("iter/task")
int dump_task(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;

	if (!task)
		return 0;
	if (ctx->meta->seq_num == 0)
		BPF_SEQ_PRINTF(seq, "pid tgid comm\n");
	BPF_SEQ_PRINTF(seq, "%d %d %s\n", task->pid, task->tgid, task->comm);
	return 0;
}

SEC("iter/bpf_map_elem")
int dump_elem(struct bpf_iter__bpf_map_elem *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	__u32 *key = ctx->key;
	__u64 *value = ctx->value;

	if (!key || !value)
		return 0;
	BPF_SEQ_PRINTF(seq, "%u %llu\n", *key, *value);
	return 0;
}

/* for the map iterator's tests: a hash of u32 -> u64 the test fills */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} numbers SEC(".maps");

char LICENSE[] SEC("license") = "Dual BSD/GPL";
