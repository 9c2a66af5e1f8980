// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Link tests on the host: a tracepoint, a uprobe and a uretprobe, all triggered by getppid()
// (libc's getppid() wrapper enters the sys_enter_getppid tracepoint), counting calls of one
// process (target_tgid) so exact counts are stable, and recording the bpf_cookie each saw.
// Slots: 0 tracepoint, 1 uprobe, 2 uretprobe, 3 the target-less kprobe (auto-attach skips it).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} cookies SEC(".maps");

static __always_inline int count(void *ctx, __u32 slot)
{
	__u64 *value, cookie;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	value = bpf_map_lookup_elem(&hits, &slot);
	if (value)
		__sync_fetch_and_add(value, 1);
	cookie = bpf_get_attach_cookie(ctx);
	bpf_map_update_elem(&cookies, &slot, &cookie, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int tp_getppid(void *ctx)
{
	return count(ctx, 0);
}

SEC("uprobe//lib/x86_64-linux-gnu/libc.so.6:getppid")
int up_getppid(void *ctx)
{
	return count(ctx, 1);
}

SEC("uretprobe/libc.so.6:getppid")
int uret_getppid(void *ctx)
{
	return count(ctx, 2);
}

SEC("kprobe")
int kp_any(void *ctx)
{
	return count(ctx, 3);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
