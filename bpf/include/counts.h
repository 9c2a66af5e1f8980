/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* `counts`, an array of COUNT_SLOTS u64 counters the tests read, and bump(slot). Define
 * COUNT_SLOTS before including; needs <linux/bpf.h> and <bpf/bpf_helpers.h> first. */
#ifndef BPFKIT_COUNTS_H
#define BPFKIT_COUNTS_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&counts, &slot);

	if (n)
		__sync_fetch_and_add(n, 1);
}

#endif
