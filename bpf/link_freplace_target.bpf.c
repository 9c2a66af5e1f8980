// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The target of tests/integration freplace tests: a tc program whose verdict comes from a global
// (separately verified, replaceable) function. BPF_PROG_TEST_RUN returns pick_verdict()'s value:
// 100 + the packet length here, whatever link_freplace.bpf.o's replacement says once attached.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__noinline int pick_verdict(int len)
{
	return 100 + len;
}

SEC("tc")
int freplace_target(struct __sk_buff *skb)
{
	return pick_verdict(skb->len);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
