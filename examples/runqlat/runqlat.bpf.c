// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// runqlat: run-queue latency, how long runnable tasks wait for a CPU, as a log2 histogram
// (bcc's and libbpf-tools' runqlat). Raw tracepoints: sched_wakeup and sched_wakeup_new
// (TP_PROTO(struct task_struct *p)) stamp the task made runnable; sched_switch
// (TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, ...)) stamps a
// preempted `prev` that stays runnable and records the wait of `next`.
// Task fields are read with CO-RE (BPF_CORE_READ), so the object fits other kernels.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "../bits.bpf.h"
#include <bpf/bpf_core_read.h>

#define MAX_SLOTS 26
#define TASK_RUNNING 0

struct hist {
	__u32 slots[MAX_SLOTS];
};

/* Filters and units, set before load (.rodata). */
const volatile __u32 targ_tgid = 0;   /* only this process's threads */
const volatile bool targ_ms = false;  /* milliseconds instead of microseconds */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);  /* tid */
	__type(value, __u64);  /* when it became runnable, ns */
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* Kernels before 5.14 call task_struct's state `state` (2f064a59a11f renamed it). */
struct task_struct___o {
	volatile long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___o *)t, state);
}

static __always_inline int enqueue(struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 ts;

	if (!tid)  /* the idle task */
		return 0;
	if (targ_tgid && BPF_CORE_READ(p, tgid) != targ_tgid)
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int handle_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	return enqueue((struct task_struct *)ctx->args[0]);
}

SEC("raw_tp/sched_wakeup_new")
int handle_wakeup_new(struct bpf_raw_tracepoint_args *ctx)
{
	return enqueue((struct task_struct *)ctx->args[0]);
}

SEC("raw_tp/sched_switch")
int handle_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u32 tid = BPF_CORE_READ(next, pid), zero = 0, slot;
	struct hist *h;
	__u64 *tsp, delta;

	if (task_state(prev) == TASK_RUNNING)  /* preempted: waits for a CPU again */
		enqueue(prev);
	tsp = bpf_map_lookup_elem(&start, &tid);
	if (!tsp)
		return 0;
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&start, &tid);
	delta /= targ_ms ? 1000000 : 1000;
	slot = log2l(delta);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	h = bpf_map_lookup_elem(&hists, &zero);
	if (h)
		__sync_fetch_and_add(&h->slots[slot], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
