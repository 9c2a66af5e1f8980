// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Syscall latency histograms from the raw_syscalls tracepoints, in the three shapes tools use:
//   lat_hist   array, key = log2 slot, value = count      (bcc's BPF_HISTOGRAM, bpftrace's hist())
//   tid_hist   hash, key = tid, value = struct hist       (libbpf-tools' runqlat -P: slots array)
//   key_hist   hash, key = {tid, slot}, value = count     (bcc's secondary-key histograms)
//   lin_hist   array, key = linear bucket (usecs / 10, last bucket catches the rest)
// Only the thread target_tid and the syscall target_nr count, so counts are exact. Latency in
// usecs; slots as libbpf-tools' log2l (slot 0 holds 0..1).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "log2.h"

#define MAX_SLOTS 26
#define LIN_SLOTS 20

const volatile __u32 target_tid = 0;
const volatile long target_nr = -1;

struct hist {
	__u32 slots[MAX_SLOTS];
};

struct hist_key {
	__u32 tid;
	__u32 slot;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lat_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct hist);
} tid_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct hist_key);
	__type(value, __u64);
} key_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LIN_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lin_hist SEC(".maps");

static __always_inline bool mine(long nr)
{
	return (__u32)bpf_get_current_pid_tgid() == target_tid && nr == target_nr;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int on_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 ts;

	if (!mine(ctx->id))
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int on_exit(struct trace_event_raw_sys_exit *ctx)
{
	static const struct hist zero;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct hist_key hkey = { .tid = tid };
	struct hist *h;
	__u64 *tsp, *count, delta, one = 1;
	__u32 slot;

	if (!mine(ctx->id))
		return 0;
	tsp = bpf_map_lookup_elem(&start, &tid);
	if (!tsp)
		return 0;
	delta = (bpf_ktime_get_ns() - *tsp) / 1000;
	bpf_map_delete_elem(&start, &tid);

	slot = log2l(delta);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	count = bpf_map_lookup_elem(&lat_hist, &slot);
	if (count)
		__sync_fetch_and_add(count, 1);

	h = bpf_map_lookup_elem(&tid_hist, &tid);
	if (!h) {
		bpf_map_update_elem(&tid_hist, &tid, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&tid_hist, &tid);
		if (!h)
			return 0;
	}
	asm volatile("" : "+r"(slot));  /* re-check after a spill: the verifier lost the bound */
	if (slot < MAX_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);

	hkey.slot = slot;
	count = bpf_map_lookup_elem(&key_hist, &hkey);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&key_hist, &hkey, &one, BPF_NOEXIST);

	slot = delta / 10;
	if (slot >= LIN_SLOTS)
		slot = LIN_SLOTS - 1;
	count = bpf_map_lookup_elem(&lin_hist, &slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
