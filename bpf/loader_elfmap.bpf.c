// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// iproute2's legacy map definition (struct bpf_elf_map, 36 bytes: id, pinning, inner_id,
// inner_idx after the bpf_map_def fields), including a map-in-map whose template (id 1) is put
// in slot 0 of the outer map. A tc classifier run with BPF_PROG_TEST_RUN uses both.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct bpf_elf_map {
	__u32 type;
	__u32 size_key;
	__u32 size_value;
	__u32 max_elem;
	__u32 flags;
	__u32 id;
	__u32 pinning;
	__u32 inner_id;
	__u32 inner_idx;
};

struct bpf_elf_map SEC("maps") elf_inner = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 1,
	.id = 1,
	.inner_idx = 0,
};

struct bpf_elf_map SEC("maps") elf_outer = {
	.type = BPF_MAP_TYPE_ARRAY_OF_MAPS,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u32),
	.max_elem = 2,
	.inner_id = 1,
};

struct bpf_elf_map SEC("maps") elf_counter = {
	.type = BPF_MAP_TYPE_ARRAY,
	.size_key = sizeof(__u32),
	.size_value = sizeof(__u64),
	.max_elem = 1,
};

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 *cnt = bpf_map_lookup_elem(&elf_counter, &zero);
	void *inner;
	__u32 *v;

	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	inner = bpf_map_lookup_elem(&elf_outer, &zero);
	if (inner) {
		v = bpf_map_lookup_elem(inner, &zero);
		if (v)
			*v += 3;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
