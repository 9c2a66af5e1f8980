// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A minimal sched_ext scheduler (struct sched_ext_ops, 6.12, CONFIG_SCHED_CLASS_EXT): every
// task goes to the global FIFO dispatch queue with the default slice, and enqueue() counts
// its calls. Registered through a bpf_link (".struct_ops.link"), as sched_ext requires.
//
// The host's vmlinux.h may lack sched_ext, so the struct is declared here with only the members
// used and a "___bpfkit" flavor (the loader matches members to the kernel's by name and strips
// the flavor, as libbpf does). The kfunc is __weak: on a kernel without sched_ext the load fails
// on the missing struct_ops type, which is the clearer error.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define BPFKIT_SCX_DSQ_GLOBAL ((1ULL << 63) | 1)  /* SCX_DSQ_FLAG_BUILTIN | 1 */
#define BPFKIT_SCX_SLICE_DFL 20000000ULL  /* 20 ms */

struct sched_ext_ops___bpfkit {
	void (*enqueue)(struct task_struct *p, __u64 enq_flags);
	char name[128];
};

__u64 enqueued;

extern void scx_bpf_dsq_insert(struct task_struct *p, __u64 dsq_id, __u64 slice, __u64 enq_flags) __ksym __weak;

SEC("struct_ops/fifo_enqueue")
void BPF_PROG(fifo_enqueue, struct task_struct *p, __u64 enq_flags)
{
	__sync_fetch_and_add(&enqueued, 1);
	scx_bpf_dsq_insert(p, BPFKIT_SCX_DSQ_GLOBAL, BPFKIT_SCX_SLICE_DFL, enq_flags);
}

SEC(".struct_ops.link")
struct sched_ext_ops___bpfkit bpfkit_fifo = {
	.enqueue = (void *)fifo_enqueue,
	.name = "bpfkit_fifo",
};

char LICENSE[] SEC("license") = "Dual BSD/GPL";
