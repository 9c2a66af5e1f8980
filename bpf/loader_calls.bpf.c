// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// BPF-to-BPF calls: static and global sub-programs in .text, a sub-program called from two
// programs, nested calls, and callbacks passed by address to bpf_loop() and
// bpf_for_each_map_elem(). Each program is run with BPF_PROG_TEST_RUN and stores what it
// computed in `out`.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} numbers SEC(".maps");

__u64 loop_sum;
__u64 elem_sum;

static __noinline __u64 square(__u64 x)
{
	return x * x;
}

static __noinline __u64 sum_of_squares(__u64 a, __u64 b)
{
	return square(a) + square(b);
}

/* A global function: verified on its own, called like any other. */
__noinline int global_add(int a, int b)
{
	return a + b + (int)square(2);
}

static void store(__u32 slot, __u64 value)
{
	bpf_map_update_elem(&out, &slot, &value, BPF_ANY);
}

static int loop_cb(__u32 index, void *ctx)
{
	loop_sum += index;
	return 0;
}

static __u64 elem_cb(struct bpf_map *map, __u32 *key, __u64 *value, void *ctx)
{
	elem_sum += *value + *key;
	return 0;
}

SEC("xdp")
int calls_a(struct xdp_md *ctx)
{
	store(0, sum_of_squares(3, 4));
	store(1, global_add(10, 20));
	return XDP_PASS;
}

SEC("xdp")
int calls_b(struct xdp_md *ctx)
{
	store(2, square(9));
	store(3, global_add(1, 1));
	return XDP_PASS;
}

SEC("xdp")
int callbacks(struct xdp_md *ctx)
{
	loop_sum = 0;
	elem_sum = 0;
	bpf_loop(10, loop_cb, NULL, 0);
	bpf_for_each_map_elem(&numbers, elem_cb, NULL, 0);
	store(4, loop_sum);
	store(5, elem_sum);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
