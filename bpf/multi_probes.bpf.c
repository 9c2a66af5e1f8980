// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Multi-attach tests: uprobe.multi, uretprobe.multi and kprobe.multi programs that count hits
// per bpf_get_attach_cookie() value, so a test can check every target separately. The same
// programs, reloaded without the multi expected_attach_type, serve the perf-event fallback.
// target_tgid (0: every process) limits counting to one process.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);   /* the attach cookie */
	__type(value, __u64); /* hits */
} hits SEC(".maps");

static __always_inline int count(void *ctx, __u64 bias)
{
	__u64 cookie, one = 1, *value;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	cookie = bpf_get_attach_cookie(ctx) + bias;
	value = bpf_map_lookup_elem(&hits, &cookie);
	if (!value) {
		if (!bpf_map_update_elem(&hits, &cookie, &one, BPF_NOEXIST))
			return 0;
		value = bpf_map_lookup_elem(&hits, &cookie); /* another CPU made it first */
		if (!value)
			return 0;
	}
	__sync_fetch_and_add(value, 1);
	return 0;
}

SEC("uprobe.multi")
int up_multi(void *ctx)
{
	return count(ctx, 0);
}

SEC("uretprobe.multi")
int uret_multi(void *ctx)
{
	return count(ctx, 0);
}

SEC("kprobe.multi")
int kp_multi(void *ctx)
{
	return count(ctx, 0);
}

SEC("kretprobe.multi")
int kret_multi(void *ctx)
{
	return count(ctx, 0);
}

/* A plain uprobe program: multi-attach reloads it with BPF_TRACE_UPROBE_MULTI. */
SEC("uprobe")
int up_plain(void *ctx)
{
	return count(ctx, 0);
}

/* Auto-attach: libbpf's section formats. Cookies are 0 there; the bias tells them apart. */
SEC("uprobe.multi/libc.so.6:getpp*")
int up_auto(void *ctx)
{
	return count(ctx, 1000);
}

SEC("uretprobe.multi/libc.so.6:getpp*")
int uret_auto(void *ctx)
{
	return count(ctx, 2000);
}

SEC("kprobe.multi/__x64_sys_getpp*")
int kp_auto(void *ctx)
{
	return count(ctx, 3000);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
