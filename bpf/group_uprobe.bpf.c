// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Many-links tests and benchmarks/bench_attach.py: one uprobe program attached to hundreds of
// libc functions at once (section uprobe), and the same as an uprobe_multi program (section
// uprobe.multi, 6.6+). Each counts hits of one process (target_tgid, 0 = any): all of them in
// group_hits[0], and per bpf_cookie in by_cookie (tests give each target its own cookie).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} group_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} by_cookie SEC(".maps");

static __always_inline int count(void *ctx)
{
	__u64 *value, cookie, one = 1;
	__u32 slot = 0;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	value = bpf_map_lookup_elem(&group_hits, &slot);
	if (value)
		__sync_fetch_and_add(value, 1);
	cookie = bpf_get_attach_cookie(ctx);
	value = bpf_map_lookup_elem(&by_cookie, &cookie);
	if (value)
		__sync_fetch_and_add(value, 1);
	else
		bpf_map_update_elem(&by_cookie, &cookie, &one, BPF_NOEXIST);
	return 0;
}

SEC("uprobe")
int group_uprobe(void *ctx)
{
	return count(ctx);
}

SEC("uprobe.multi")
int group_uprobe_multi(void *ctx)
{
	return count(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
