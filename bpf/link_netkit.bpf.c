// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// netkit programs for integration/test_link_netkit.py. Only IPv4 packets are counted (the
// test's namespaces have IPv6 off and the pair is in L3 mode: no ARP), so counts are exact.
// Slots of `counts`: 0 count_primary, 1 count_peer, 2 drop_peer, 3 pass_count.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define COUNT_SLOTS 4
#include "counts.h"

#define ETH_P_IP 0x0800
#define NETKIT_NEXT (-1)
#define NETKIT_PASS 0
#define NETKIT_DROP 2

static __always_inline void bump_ip(struct __sk_buff *skb, __u32 slot)
{
	if (skb->protocol == bpf_htons(ETH_P_IP))
		bump(slot);
}

SEC("netkit/primary")
int count_primary(struct __sk_buff *skb)
{
	bump_ip(skb, 0);
	return NETKIT_NEXT;
}

SEC("netkit/peer")
int count_peer(struct __sk_buff *skb)
{
	bump_ip(skb, 1);
	return NETKIT_NEXT;
}

SEC("netkit/peer")
int drop_peer(struct __sk_buff *skb)
{
	bump_ip(skb, 2);
	return NETKIT_DROP;
}

/* No target in its section: attached by hand (or through update()) on either device. */
SEC("tc")
int pass_count(struct __sk_buff *skb)
{
	bump_ip(skb, 3);
	return NETKIT_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
