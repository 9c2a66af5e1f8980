// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Sampling tests (bpfkit.link.perf_event_sample): a SEC("perf_event") program run on every
// counter overflow. It counts samples per CPU (a per-CPU array: no atomics needed), sums the
// sample periods the kernel reports (fixed with a period, adjusted by the kernel with a
// frequency), and counts samples per sampled process (tgid, 0 for the idle task).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} periods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} by_pid SEC(".maps");

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 one = 1, *value;

	value = bpf_map_lookup_elem(&samples, &zero);
	if (value)
		*value += 1;
	value = bpf_map_lookup_elem(&periods, &zero);
	if (value)
		*value += ctx->sample_period;
	value = bpf_map_lookup_elem(&by_pid, &tgid);
	if (value)
		__sync_fetch_and_add(value, 1);
	else if (bpf_map_update_elem(&by_pid, &tgid, &one, BPF_NOEXIST)) {
		value = bpf_map_lookup_elem(&by_pid, &tgid);  /* another CPU made it first */
		if (value)
			__sync_fetch_and_add(value, 1);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
