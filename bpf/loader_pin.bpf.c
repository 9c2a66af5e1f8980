// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Pinning: maps declared with LIBBPF_PIN_BY_NAME are pinned under the pin directory and reused
// by the next collection that declares them (shared state between loads); an unpinned map is
// private to each load. An XDP program run with BPF_PROG_TEST_RUN counts in both.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} loader_pinned_counter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} private_counter SEC(".maps");

SEC("xdp")
int count_runs(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *v;

	v = bpf_map_lookup_elem(&loader_pinned_counter, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	v = bpf_map_lookup_elem(&private_counter, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
