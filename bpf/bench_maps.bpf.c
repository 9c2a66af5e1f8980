// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// benchmarks/bench_maps.py: a 100,000-entry hash of a struct value (the shape of a per-process
// counter table), filled from user space and dumped by bpfkit, bcc and bpftool.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct bench_value {
	__u64 count;
	__u64 bytes;
	__u32 pid;
	__s32 err;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 100000);
	__type(key, __u32);
	__type(value, struct bench_value);
} bench SEC(".maps");

SEC("socket")
int bench_touch(struct __sk_buff *skb)
{
	__u32 key = skb->len;
	struct bench_value *v = bpf_map_lookup_elem(&bench, &key);

	if (v)
		v->count += 1;
	return 0;
}
