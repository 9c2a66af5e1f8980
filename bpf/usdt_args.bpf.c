// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* USDT programs for integration/test_usdt.py: read probe arguments with libbpf's usdt.bpf.h
 * (its __bpf_usdt_specs map, filled by bpfkit.usdt at attach) and send one record per firing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct usdt_event {
	__u32 probe;   /* 1: bpfkit:tick, 2: bpfkit:twice */
	__u32 pid;
	__s32 arg_cnt;
	__s32 pad;
	__s64 cookie;  /* bpf_usdt_cookie() */
	__s64 args[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} usdt_events SEC(".maps");

static __always_inline struct usdt_event *reserve(struct pt_regs *ctx, __u32 probe)
{
	struct usdt_event *e = bpf_ringbuf_reserve(&usdt_events, sizeof(*e), 0);

	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->probe = probe;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->arg_cnt = bpf_usdt_arg_cnt(ctx);
	e->cookie = bpf_usdt_cookie(ctx);
	return e;
}

SEC("usdt")
int BPF_USDT(on_tick, int i, int five, int stackval, int neg, long long big, signed char c)
{
	struct usdt_event *e = reserve(ctx, 1);

	if (!e)
		return 0;
	e->args[0] = i;
	e->args[1] = five;
	e->args[2] = stackval;
	e->args[3] = neg;
	e->args[4] = big;
	e->args[5] = c;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_twice, int site, int i)
{
	struct usdt_event *e = reserve(ctx, 2);

	if (!e)
		return 0;
	e->args[0] = site;
	e->args[1] = i;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* No usdt.bpf.h: a program that only counts firings, attached without a spec map. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} usdt_hits SEC(".maps");

SEC("usdt")
int usdt_count(struct pt_regs *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&usdt_hits, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}
