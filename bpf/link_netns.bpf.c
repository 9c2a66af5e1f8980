// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Network-namespace programs for integration/test_link_netns.py.
// sk_lookup: a TCP connection to a local port in [port_lo, port_hi] goes to the socket in
// `socks` slot 0 (bpf_sk_assign), whatever it listens on. flow_dissector: counts and lets the
// kernel's own dissector run (BPF_FLOW_DISSECTOR_CONTINUE, 6.2; BPF_OK would need flow_keys).
// Slots of `counts`: 0 connections steered, 1 sk_lookup runs, 2 dissect runs, 3 dissect_other runs.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define COUNT_SLOTS 4
#include "counts.h"

#define IPPROTO_TCP_ 6

const volatile __u32 port_lo = 0;
const volatile __u32 port_hi = 0;

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} socks SEC(".maps");

SEC("sk_lookup")
int steer(struct bpf_sk_lookup *ctx)
{
	struct bpf_sock *sk;
	__u32 key = 0;
	long err;

	bump(1);
	if (ctx->protocol != IPPROTO_TCP_ || ctx->local_port < port_lo || ctx->local_port > port_hi)
		return SK_PASS;
	sk = bpf_map_lookup_elem(&socks, &key);
	if (!sk)
		return SK_DROP;
	err = bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	if (err)
		return SK_DROP;
	bump(0);
	return SK_PASS;
}

SEC("sk_lookup")
int pass_all(struct bpf_sk_lookup *ctx)
{
	return SK_PASS;
}

SEC("flow_dissector")
int dissect(struct __sk_buff *skb)
{
	bump(2);
	return 129; /* BPF_FLOW_DISSECTOR_CONTINUE */
}

SEC("flow_dissector")
int dissect_other(struct __sk_buff *skb)
{
	bump(3);
	return 129;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
