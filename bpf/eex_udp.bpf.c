// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style counter of UDP packets dropped for want of a socket
// (integration/ebpf_exporter/eex_udp.yaml), from skb:kfree_skb and its drop reason (5.17+):
//   eex_udp_no_socket_drops_total  hash, key u16 destination port -> packets
// IPv4 only. The reason's number is the running kernel's (a CO-RE enum value: the numbering of
// enum skb_drop_reason changes between kernels).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "eex_maps.bpf.h"

#define EEX_IPPROTO_UDP 17

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u64);
} eex_udp_no_socket_drops_total SEC(".maps");

SEC("tp_btf/kfree_skb")
int BPF_PROG(eex_kfree_skb, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	struct iphdr ip;
	struct udphdr udp;
	unsigned char *head;
	__u16 port;

	if (reason != bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_NO_SOCKET))
		return 0;
	if (skb->protocol != bpf_htons(0x0800)) /* ETH_P_IP */
		return 0;
	head = skb->head;
	if (bpf_probe_read_kernel(&ip, sizeof(ip), head + skb->network_header))
		return 0;
	if (ip.protocol != EEX_IPPROTO_UDP)
		return 0;
	if (bpf_probe_read_kernel(&udp, sizeof(udp), head + skb->transport_header))
		return 0;
	port = bpf_ntohs(udp.dest);
	increment_map(&eex_udp_no_socket_drops_total, &port, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
