// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// funclatency: how long a user-space function takes, as a log2 histogram (bcc's funclatency
// for uprobes). A uprobe at the function's entry stamps the thread; a uretprobe at its return
// adds the elapsed time to `hist`, a global array in .bss read after load. The programs'
// sections name no target: examples/funclatency/funclatency.py attaches them to --func.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "../bits.bpf.h"
#include <bpf/bpf_tracing.h>

#define MAX_SLOTS 32

enum units {
	NSEC = 0,
	USEC = 1,
	MSEC = 2,
};

/* Filter and units, set before load (.rodata). */
const volatile __u32 targ_tgid = 0;
const volatile enum units units = NSEC;

/* The histogram (.bss): slot i counts latencies in [2^i, 2^(i+1)) units, slot 0 also 0. */
__u32 hist[MAX_SLOTS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);  /* tid */
	__type(value, __u64);  /* entry time, ns */
} starts SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(func_entry)
{
	__u64 id = bpf_get_current_pid_tgid(), ts;
	__u32 tid = (__u32)id;

	if (targ_tgid && (id >> 32) != targ_tgid)
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&starts, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(func_exit)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), slot;
	__u64 *tsp = bpf_map_lookup_elem(&starts, &tid), delta;

	if (!tsp)
		return 0;
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&starts, &tid);
	if (units == USEC)
		delta /= 1000;
	else if (units == MSEC)
		delta /= 1000000;
	slot = log2l(delta);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist[slot], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
