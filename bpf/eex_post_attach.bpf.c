// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter's post-attach hook (tests/test_eex_post_attach.py): a program on
// uprobe//proc/self/exe:post_attach_mark runs once when the exporter has attached everything,
// and counts it in `eex_post_attach_runs` (an array of one u64, a counter without labels whose
// name does not end in _total: served under that very name).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} eex_post_attach_runs SEC(".maps");

SEC("uprobe//proc/self/exe:post_attach_mark")
int eex_post_attach(void *ctx)
{
	__u32 zero = 0;
	__u64 *runs = bpf_map_lookup_elem(&eex_post_attach_runs, &zero);

	if (runs)
		__sync_fetch_and_add(runs, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
