/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* log2 slots as libbpf-tools' bits.bpf.h computes them (slot 0 holds 0 and 1): the histograms of
 * bpf/hist_syscall_lat.bpf.c and bpf/metrics_demo.bpf.c. */
#ifndef BPFKIT_LOG2_H
#define BPFKIT_LOG2_H

static __always_inline __u32 log2_u32(__u32 v)
{
	__u32 r, shift;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 log2l(__u64 v)
{
	__u32 hi = v >> 32;

	return hi ? log2_u32(hi) + 32 : log2_u32(v);
}

#endif
