// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style uprobe counter (integration/ebpf_exporter/eex_uprobe.yaml):
//   eex_ticks_total  hash, key u64 (eex_tick's argument) -> calls in the test's workload (eex_target)
// The section names its binary by a path relative to the exporter's working directory, as
// ebpf_exporter's usdt examples do (usdt/./tracing/demos/...): the test builds
// integration/ebpf_exporter/eex_workload.c there and starts the exporter in that directory.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "eex_maps.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} eex_ticks_total SEC(".maps");

SEC("uprobe/./eex_workload:eex_tick")
int BPF_KPROBE(eex_tick_entry, __u64 arg)
{
	if (eex_mine())
		increment_map(&eex_ticks_total, &arg, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
