// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An off-CPU profile object written the way libbpf-tools' offcputime.bpf.c is
// (tests/test_profile_keys.py, integration/test_profile_keys.py): key_t {pid (the thread),
// tgid, user_stack_id, kern_stack_id} with the task name in the value, val_t {delta, comm},
// delta in microseconds; a 4-byte-key hash `start` declared first; a stack-trace map with only
// its key_size (value_size and max_entries are set by offcputime.c); and the sched_switch
// program as a tp_btf/raw_tp pair. Records only the process target_tgid (0: every process).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define TASK_COMM_LEN 16
#define PF_KTHREAD 0x00200000

struct key_t {
	__u32 pid;
	__u32 tgid;
	int user_stack_id;
	int kern_stack_id;
};

struct val_t {
	__u64 delta;
	char comm[TASK_COMM_LEN];
};

struct internal_key {
	u64 start_ts;
	struct key_t key;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, u32);
	__type(value, struct internal_key);
	__uint(max_entries, 10240);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(u32));
} stackmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct key_t);
	__type(value, struct val_t);
	__uint(max_entries, 10240);
} info SEC(".maps");

const volatile __u32 target_tgid = 0;
const volatile __u64 min_block_us = 1;

static int handle_sched_switch(void *ctx, struct task_struct *prev, struct task_struct *next)
{
	struct internal_key *i_keyp, i_key = {};
	struct val_t *valp, val = {};
	s64 delta;
	u32 pid;

	if (!target_tgid || BPF_CORE_READ(prev, tgid) == target_tgid) {
		pid = BPF_CORE_READ(prev, pid);
		if (!pid)
			pid = bpf_get_smp_processor_id();
		i_key.key.pid = pid;
		i_key.key.tgid = BPF_CORE_READ(prev, tgid);
		i_key.start_ts = bpf_ktime_get_ns();
		if (BPF_CORE_READ(prev, flags) & PF_KTHREAD)
			i_key.key.user_stack_id = -1;
		else
			i_key.key.user_stack_id = bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
		i_key.key.kern_stack_id = bpf_get_stackid(ctx, &stackmap, 0);
		bpf_map_update_elem(&start, &pid, &i_key, 0);
		bpf_probe_read_kernel_str(&val.comm, sizeof(prev->comm), BPF_CORE_READ(prev, comm));
		val.delta = 0;
		bpf_map_update_elem(&info, &i_key.key, &val, BPF_NOEXIST);
	}

	pid = BPF_CORE_READ(next, pid);
	i_keyp = bpf_map_lookup_elem(&start, &pid);
	if (!i_keyp)
		return 0;
	delta = (s64)(bpf_ktime_get_ns() - i_keyp->start_ts);
	if (delta < 0)
		goto cleanup;
	delta /= 1000U;
	if (delta < min_block_us)
		goto cleanup;
	valp = bpf_map_lookup_elem(&info, &i_keyp->key);
	if (!valp)
		goto cleanup;
	__sync_fetch_and_add(&valp->delta, delta);
cleanup:
	bpf_map_delete_elem(&start, &pid);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return handle_sched_switch(ctx, prev, next);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return handle_sched_switch(ctx, prev, next);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
