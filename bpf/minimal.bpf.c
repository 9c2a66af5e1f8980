// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The smallest useful object: a tracepoint program counting getppid() calls of one process in
// a BTF-defined array map. Used by the foundation tests and as the loader's first target.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int count_getppid(void *ctx)
{
	__u32 key = 0;
	__u64 *value;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	value = bpf_map_lookup_elem(&hits, &key);
	if (value)
		__sync_fetch_and_add(value, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
