// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Verifier failures: a good XDP program, and one the verifier rejects that libbpf's "?" prefix
// keeps from loading unless asked for by name. Line info puts source lines in the log.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 runs;

SEC("xdp")
int xdp_good(struct xdp_md *ctx)
{
	runs++;
	return XDP_PASS;
}

/* Not loaded unless asked for ("?" prefix): rejected by the verifier (reads past the stack). */
SEC("?xdp")
int xdp_bad(struct xdp_md *ctx)
{
	volatile char buf[8];
	int i = ctx->data_end - ctx->data;

	return buf[i & 0xfff];
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
