// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style counters over openat()'s return in the test's workload (eex_target), keyed by
// a struct with a hole: {u8 outcome; 3 bytes of padding; u32 errno} (the config slices it with
// size: 1, padding: 3). outcome: 0 for a return of 0, 1 for a positive one (a new fd), 2 for an
// error; the configs' static_maps name only 0 and 1, so errors show what each does with an
// unknown input (unknown:2, or 2 as it is with allow_unknown). errno: -ret for errors, else 0.
// Two maps with the same key and counts, one per static_map flavour:
//   eex_open_outcomes_total   static_map without allow_unknown
//   eex_open_results_total    static_map with allow_unknown: true
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "eex_maps.bpf.h"

struct eex_exit_key {
	__u8 outcome;
	/* 3 bytes of padding: errno is 4-byte aligned */
	__u32 err;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct eex_exit_key);
	__type(value, __u64);
} eex_open_outcomes_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct eex_exit_key);
	__type(value, __u64);
} eex_open_results_total SEC(".maps");

SEC("tracepoint/syscalls/sys_exit_openat")
int eex_exit_openat(struct trace_event_raw_sys_exit *ctx)
{
	struct eex_exit_key key;
	long ret = ctx->ret;

	if (!eex_mine())
		return 0;
	__builtin_memset(&key, 0, sizeof(key)); /* the padding too: it is part of the map key */
	key.outcome = ret == 0 ? 0 : ret > 0 ? 1 : 2;
	key.err = ret < 0 ? -ret : 0;
	increment_map(&eex_open_outcomes_total, &key, 1);
	increment_map(&eex_open_results_total, &key, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
