// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An extension (BPF_PROG_TYPE_EXT) replacing pick_verdict() of link_freplace_target.bpf.o:
// same signature, a different answer (7 * len), and it counts its calls in `calls`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 calls;

SEC("freplace/pick_verdict")
int new_verdict(int len)
{
	__sync_fetch_and_add(&calls, 1);
	return 7 * len;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
