// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Hostile input (issue #19): a program named ".." (a name the kernel accepts: letters, digits,
// '_' and '.') and a map (not pinned by name) named "../hostile_map", both set with asm labels.
// `bpfkit load OBJ DIR` pins programs at DIR/<program> and maps at DIR/<map>, and
// `bpfkit attach OBJ --pin DIR` pins links and maps under DIR: both must refuse these names.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counts_map __asm__("../hostile_map") SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int hostile_prog(void *ctx) __asm__("..");

SEC("tracepoint/syscalls/sys_enter_getpid")
int hostile_prog(void *ctx)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&counts_map, &zero);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
