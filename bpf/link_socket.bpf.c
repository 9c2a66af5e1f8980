// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Socket programs for integration/test_link_socket.py.
// Slots of `counts`: 0 filter runs, 1 filter drops, 2 reuseport selections, 3 parser runs,
// 4 verdict redirects, 5 sk_msg messages.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define COUNT_SLOTS 8
#include "counts.h"

/* sk_skb programs: data arriving at a socket of this map goes out of the socket at key 1. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} socks SEC(".maps");

/* sk_msg: counts what sockets of this map send (and lets it go). */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} senders SEC(".maps");

/* sk_reuseport: every datagram goes to the socket at key 1. */
struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} group SEC(".maps");

/* A UDP socket filter: datagrams whose payload starts with 'd' are dropped. */
SEC("socket")
int drop_d(struct __sk_buff *skb)
{
	__u8 first = 0;

	bump(0);
	if (bpf_skb_load_bytes(skb, 8, &first, 1) == 0 && first == 'd') {
		bump(1);
		return 0;
	}
	return skb->len;
}

SEC("sk_reuseport")
int pick_second(struct sk_reuseport_md *md)
{
	__u32 key = 1;

	if (bpf_sk_select_reuseport(md, &group, &key, 0) == 0)
		bump(2);
	return SK_PASS;
}

SEC("sk_skb/stream_parser")
int parser(struct __sk_buff *skb)
{
	bump(3);
	return skb->len;
}

SEC("sk_skb/stream_verdict")
int verdict(struct __sk_buff *skb)
{
	bump(4);
	return bpf_sk_redirect_map(skb, &socks, 1, 0);
}

SEC("sk_msg")
int count_msg(struct sk_msg_md *msg)
{
	bump(5);
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
