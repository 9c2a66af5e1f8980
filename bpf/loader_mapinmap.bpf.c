// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Map-in-map and prog-array initialisers: `values` in BTF map definitions. An array of maps
// and a hash of maps filled with inner maps at load, and a prog array whose slots hold
// programs, used by tail calls. Run with BPF_PROG_TEST_RUN.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};

struct inner inner_a SEC(".maps");
struct inner inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct inner);
} outer_array SEC(".maps") = {
	.values = { [0] = &inner_a, [2] = &inner_b },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_ARRAY);
		__uint(max_entries, 1);
		__type(key, __u32);
		__type(value, __u64);
	});
} outer_hash SEC(".maps") = {
	.values = { [1] = (void *)&inner_b },
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

SEC("xdp")
int tail_one(struct xdp_md *ctx)
{
	__u32 k = 1;
	__u64 v = 111;

	bpf_map_update_elem(&out, &k, &v, BPF_ANY);
	return XDP_PASS;
}

SEC("xdp")
int tail_two(struct xdp_md *ctx)
{
	__u32 k = 2;
	__u64 v = 222;

	bpf_map_update_elem(&out, &k, &v, BPF_ANY);
	return XDP_DROP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int (void *));
} jump_table SEC(".maps") = {
	.values = { [0] = (void *)&tail_one, [3] = (void *)&tail_two },
};

__u32 which = 0;

SEC("xdp")
int dispatch(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jump_table, which);
	return XDP_ABORTED; /* the slot was empty */
}

SEC("xdp")
int use_inner(struct xdp_md *ctx)
{
	__u32 zero = 0, key = 0;
	__u64 *v, one = 1;
	void *m;

	m = bpf_map_lookup_elem(&outer_array, &key);
	if (m) {
		v = bpf_map_lookup_elem(m, &zero);
		if (v)
			*v += 10;
	}
	key = 1;
	m = bpf_map_lookup_elem(&outer_hash, &key);
	if (m) {
		v = bpf_map_lookup_elem(m, &zero);
		if (v)
			*v += 100;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
