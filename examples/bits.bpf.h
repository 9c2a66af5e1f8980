/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helpers the example tools share (as libbpf-tools' bits.bpf.h). */
#ifndef EXAMPLES_BITS_BPF_H
#define EXAMPLES_BITS_BPF_H

/* floor(log2(v)), 0 for 0 and 1: the slot of a log2 histogram (bpfkit.hist.log2_hist's slot 0
 * holds 0 and 1). A bounded loop (5.3+). */
static __always_inline __u32 log2l(__u64 v)
{
	__u32 r = 0;

	while (v > 1 && r < 63) {
		v >>= 1;
		r++;
	}
	return r;
}

#endif
