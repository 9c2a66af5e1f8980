// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style per-CPU counters (integration/ebpf_exporter/eex_percpu.yaml), counted in
// the test's workload only (eex_target), the same counts in both:
//   eex_percpu_calls_total         per-CPU array, key u32 call (0 getppid, 1 gettid) -> u64 per CPU;
//                                  the config's last label is `cpu` (size 2), which makes
//                                  ebpf_exporter split the values by CPU (its exporter.go appends
//                                  the CPU number to the key as a u16)
//   eex_percpu_summed_calls_total  per-CPU hash, the same key, no cpu label: the CPUs' values are
//                                  added up (ebpf_exporter's aggregateMapValues)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "eex_maps.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} eex_percpu_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} eex_percpu_summed_calls_total SEC(".maps");

static __always_inline void eex_count(__u32 call)
{
	__u64 *n;

	if (!eex_mine())
		return;
	n = bpf_map_lookup_elem(&eex_percpu_calls_total, &call);
	if (n)
		*n += 1; /* this CPU's own slot: no other CPU writes it */
	increment_map(&eex_percpu_summed_calls_total, &call, 1);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int eex_enter_getppid(void *ctx)
{
	eex_count(0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_gettid")
int eex_enter_gettid(void *ctx)
{
	eex_count(1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
