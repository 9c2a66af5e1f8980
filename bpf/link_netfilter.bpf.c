// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A netfilter program for integration/test_link_netfilter.py: counts the packets of its hook
// and drops them (the test attaches it at IPv4 LOCAL_OUT in a namespace of its own, where only
// the test sends). Slot 0 of `counts`: packets seen; slot 1: accept_all's.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define COUNT_SLOTS 2
#include "counts.h"

#define NF_DROP 0
#define NF_ACCEPT 1

SEC("netfilter")
int drop_all(void *ctx)
{
	bump(0);
	return NF_DROP;
}

SEC("netfilter")
int accept_all(void *ctx)
{
	bump(1);
	return NF_ACCEPT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
