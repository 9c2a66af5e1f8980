// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style counters keyed by the task's comm (integration/ebpf_exporter/eex_comm.yaml):
// getppid() calls of the test's workload (eex_target), which renames itself between batches.
//   eex_comm_calls_total       key char[16] comm   (decoder string: every comm)
//   eex_comm_kept_calls_total  the same counts     (string, then regexp: comms no regexp matches
//                              are dropped; a match gives its first group, or all of it; comms
//                              given one label have their counts added up)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "eex_maps.bpf.h"

#define EEX_COMM_LEN 16

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__uint(key_size, EEX_COMM_LEN);
	__uint(value_size, sizeof(__u64));
} eex_comm_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__uint(key_size, EEX_COMM_LEN);
	__uint(value_size, sizeof(__u64));
} eex_comm_kept_calls_total SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int eex_comm_getppid(void *ctx)
{
	char comm[EEX_COMM_LEN] = {};

	if (!eex_mine())
		return 0;
	bpf_get_current_comm(comm, sizeof(comm));
	increment_map(&eex_comm_calls_total, comm, 1);
	increment_map(&eex_comm_kept_calls_total, comm, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
