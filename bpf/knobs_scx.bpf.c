// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An scx-style scheduler as scx's headers declare one (issue #39): its kfuncs are strong
// __ksym externs (scx's common.bpf.h does not mark them __weak), so on a kernel without
// sched_ext both the struct_ops type and the kfuncs are missing, and the load must say the
// type first. init() creates a DSQ; enqueue() inserts into it. Struct declared with only the
// members used, under a flavor (bpf/struct_ops_scx.bpf.c explains why).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define KNOBS_DSQ 7
#define KNOBS_SLICE 20000000ULL  /* 20 ms, SCX_SLICE_DFL */

struct sched_ext_ops___knobs {
	void (*enqueue)(struct task_struct *p, __u64 enq_flags);
	void (*dispatch)(__s32 cpu, struct task_struct *prev);
	__s32 (*init)(void);
	char name[128];
};

extern __s32 scx_bpf_create_dsq(__u64 dsq_id, __s32 node) __ksym;
extern void scx_bpf_dsq_insert(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 enq_flags) __ksym;
extern bool scx_bpf_dsq_move_to_local(__u64 dsq_id) __ksym;

SEC("struct_ops.s/knobs_init")
__s32 BPF_PROG(knobs_init)
{
	return scx_bpf_create_dsq(KNOBS_DSQ, -1);
}

SEC("struct_ops/knobs_enqueue")
void BPF_PROG(knobs_enqueue, struct task_struct *p, __u64 enq_flags)
{
	scx_bpf_dsq_insert(p, KNOBS_DSQ, KNOBS_SLICE, enq_flags);
}

SEC("struct_ops/knobs_dispatch")
void BPF_PROG(knobs_dispatch, __s32 cpu, struct task_struct *prev)
{
	scx_bpf_dsq_move_to_local(KNOBS_DSQ);
}

SEC(".struct_ops.link")
struct sched_ext_ops___knobs knobs_scx = {
	.enqueue = (void *)knobs_enqueue,
	.dispatch = (void *)knobs_dispatch,
	.init = (void *)knobs_init,
	.name = "knobs_scx",
};

char LICENSE[] SEC("license") = "Dual BSD/GPL";
