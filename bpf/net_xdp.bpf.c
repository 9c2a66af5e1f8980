// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// XDP programs for the network attach tests (integration/test_net_xdp.py). Only IPv4 UDP
// packets to `port` are counted (ARP, IPv6 neighbour discovery and other traffic pass
// untouched), so counts are exact.
// Slots of `counts`: 0 xdp_drop_udp (counted and dropped), 1 xdp_count_udp (counted, passed).
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

/* The leading fields of struct xdp_md (the program's context). */
struct net_xdp_md {
	__u32 data;
	__u32 data_end;
};

struct net_udphdr {
	__be16 source;
	__be16 dest;
	__be16 len;
	__sum16 check;
};

const volatile __u16 port = 0; /* UDP destination port, host byte order */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline bool udp_to_port(struct xdp_md *ctx)
{
	struct net_xdp_md *md = (void *)ctx;
	void *data = (void *)(long)md->data;
	void *data_end = (void *)(long)md->data_end;
	struct net_ethhdr *eth = data;
	struct net_iphdr *ip = data + sizeof(*eth);
	struct net_udphdr *udp;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return false;
	if (ip->protocol != IPPROTO_UDP_ || (ip->ihl_version & 0xf) != 5)
		return false;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return false;
	return udp->dest == bpf_htons(port);
}

static __always_inline void count(__u32 slot)
{
	__u64 *value = bpf_map_lookup_elem(&counts, &slot);

	if (value)
		__sync_fetch_and_add(value, 1);
}

SEC("xdp")
int xdp_drop_udp(struct xdp_md *ctx)
{
	if (!udp_to_port(ctx))
		return XDP_PASS;
	count(0);
	return XDP_DROP;
}

SEC("xdp")
int xdp_count_udp(struct xdp_md *ctx)
{
	if (udp_to_port(ctx))
		count(1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
