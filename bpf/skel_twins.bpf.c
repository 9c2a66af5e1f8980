// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Twins in runqlat's style (libbpf-tools' runqlat.bpf.c): each scheduler hook twice, a tp_btf
// program named after the hook (5.5+, BTF-typed arguments) and a raw_tp one named handle_<hook>
// (4.17+), of which a loader keeps one (bpfkit.spec.twins; runqlat.c's probe_tp_btf()). A plain
// tracepoint program per hook counts the same events as a reference: with exactly one twin
// attached, btf_hits + raw_hits == tp_hits slot by slot.
// sched_process_fork's tp_btf twin reads a sixth argument the tracepoint does not have, so the
// verifier refuses it (btf_ctx_access) and the loader keeps its raw_tp twin: a kernel refusing
// the BTF one, made on any kernel.
// Slots: 0 sched_wakeup, 1 sched_wakeup_new, 2 sched_switch, 3 sched_process_fork; only while current's tid is target_tid
// (a .bss variable: set after attach, cleared before reading, so every program sees the same events).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u32 target_tid = 0;

#define HITS(name)                                                                                                     \
	struct {                                                                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                                                      \
		__uint(max_entries, 4);                                                                                \
		__type(key, __u32);                                                                                    \
		__type(value, __u64);                                                                                  \
	} name SEC(".maps")

HITS(btf_hits);
HITS(raw_hits);
HITS(tp_hits);

static __always_inline int bump(void *map, __u32 slot)
{
	__u64 *value;

	if ((__u32)bpf_get_current_pid_tgid() != target_tid || !target_tid)
		return 0;
	value = bpf_map_lookup_elem(map, &slot);
	if (value)
		__sync_fetch_and_add(value, 1);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	return bump(&btf_hits, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	return bump(&btf_hits, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return bump(&btf_hits, 2);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child, __u64 a2, __u64 a3,
	     __u64 a4, __u64 a5)
{
	return a5 ? 0 : bump(&btf_hits, 3);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct *p)
{
	return bump(&raw_hits, 0);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct *p)
{
	return bump(&raw_hits, 1);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return bump(&raw_hits, 2);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(handle_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	return bump(&raw_hits, 3);
}

SEC("tp/sched/sched_wakeup")
int tp_sched_wakeup(void *ctx)
{
	return bump(&tp_hits, 0);
}

SEC("tp/sched/sched_wakeup_new")
int tp_sched_wakeup_new(void *ctx)
{
	return bump(&tp_hits, 1);
}

SEC("tp/sched/sched_switch")
int tp_sched_switch(void *ctx)
{
	return bump(&tp_hits, 2);
}

SEC("tp/sched/sched_process_fork")
int tp_sched_process_fork(void *ctx)
{
	return bump(&tp_hits, 3);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
