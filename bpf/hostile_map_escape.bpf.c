// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Hostile input (issue #19): a map pinned by name whose name, set with an asm label, climbs
// out of the pin directory. clang writes any symbol name; loading this object must refuse it
// rather than pin at PIN_DIR/../hostile_escape.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} escape_map __asm__("../hostile_escape") SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int hostile_count(void *ctx)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&escape_map, &zero);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
