// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// tc programs (tcx links and cls_bpf in direct-action mode) for integration/test_net_tc.py.
// Only IPv4 UDP packets to `port` are looked at, so counts are exact. Every program returns
// TC_ACT_UNSPEC (tcx: TCX_NEXT), letting the next program or filter on the hook run too.
// Slots of `counts`:
//   0 tc_count: packets to `port`        1 tc_count: of those, with TOS == `tos`
//   2 tc_set_tos: packets rewritten      3 tcx_ingress_count (section names its direction)
//   4..6 tc_order_{a,b,c}
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_IP 0x0800
#define IPPROTO_UDP_ 17

/*
 * Packet and context layouts declared here rather than taken from vmlinux.h: vmlinux.h marks its
 * structs preserve_access_index, which makes clang emit CO-RE relocations, and these programs
 * must load without them. UAPI layouts are stable, so plain structs are exact.
 */
struct net_ethhdr {
	__u8 h_dest[6];
	__u8 h_source[6];
	__be16 h_proto;
} __attribute__((packed));

struct net_iphdr {
	__u8 ihl_version; /* ihl:4 (low nibble), version:4 */
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__sum16 check;
	__be32 saddr;
	__be32 daddr;
};

/* struct __sk_buff (the program's context) up to data_end. */
struct net_skb {
	__u32 len, pkt_type, mark, queue_mapping, protocol, vlan_present, vlan_tci, vlan_proto;
	__u32 priority, ingress_ifindex, ifindex, tc_index, cb[5], hash, tc_classid;
	__u32 data;
	__u32 data_end;
};
_Static_assert(__builtin_offsetof(struct net_skb, data_end) == 80, "__sk_buff.data_end is at 80");

struct net_udphdr {
	__be16 source;
	__be16 dest;
	__be16 len;
	__sum16 check;
};
#define ETH_HLEN 14
#define TC_ACT_UNSPEC (-1)

const volatile __u16 port = 0; /* UDP destination port, host byte order */
const volatile __u8 tos = 0;   /* the TOS byte tc_set_tos writes */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* The IPv4 header of a UDP packet to `port`, or NULL. */
static __always_inline struct net_iphdr *udp_to_port(struct __sk_buff *skb)
{
	struct net_skb *ctx = (void *)skb;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct net_ethhdr *eth = data;
	struct net_iphdr *ip = data + sizeof(*eth);
	struct net_udphdr *udp;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	if (ip->protocol != IPPROTO_UDP_ || (ip->ihl_version & 0xf) != 5)
		return NULL;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return NULL;
	return udp->dest == bpf_htons(port) ? ip : NULL;
}

static __always_inline void count(__u32 slot)
{
	__u64 *value = bpf_map_lookup_elem(&counts, &slot);

	if (value)
		__sync_fetch_and_add(value, 1);
}

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	struct net_iphdr *ip = udp_to_port(skb);

	if (ip) {
		count(0);
		if (ip->tos == tos)
			count(1);
	}
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tc_set_tos(struct __sk_buff *skb)
{
	struct net_iphdr *ip = udp_to_port(skb);
	__u16 old_word, new_word;
	__u8 new_tos = tos;

	if (!ip)
		return TC_ACT_UNSPEC;
	/* The header checksum covers the 16-bit word holding version/ihl and TOS. */
	old_word = *(__u16 *)ip;
	new_word = old_word;
	((__u8 *)&new_word)[1] = new_tos;
	if (bpf_skb_store_bytes(skb, ETH_HLEN + 1, &new_tos, 1, 0))
		return TC_ACT_UNSPEC;
	if (bpf_l3_csum_replace(skb, ETH_HLEN + __builtin_offsetof(struct net_iphdr, check), old_word, new_word, 2))
		return TC_ACT_UNSPEC;
	count(2);
	return TC_ACT_UNSPEC;
}

SEC("tcx/ingress")
int tcx_ingress_count(struct __sk_buff *skb)
{
	if (udp_to_port(skb))
		count(3);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tc_order_a(struct __sk_buff *skb)
{
	if (udp_to_port(skb))
		count(4);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tc_order_b(struct __sk_buff *skb)
{
	if (udp_to_port(skb))
		count(5);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int tc_order_c(struct __sk_buff *skb)
{
	if (udp_to_port(skb))
		count(6);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
