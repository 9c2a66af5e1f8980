// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Writers for Map.drain's tests (tests/test_map_drain.py): on each getppid() of the thread whose
// tid is target_tid, take the next sequence number (an atomic add on an array) and insert it as
// a new key of a hash and of a per-CPU hash, value 1, as libbpf-tools' tools insert new keys.
// A full map is counted in `full` (the drain then missed nothing: the key was never there).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 target_tid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps"); /* [0]: sequence numbers handed out, [1]: inserts refused (full) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u64);
	__type(value, __u64);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, __u64);
	__type(value, __u64);
} seen_percpu SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int tool_drain_count(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), k = 0;
	__u64 *next, seq, one = 1;

	if (tid != target_tid)
		return 0;
	next = bpf_map_lookup_elem(&counters, &k);
	if (!next)
		return 0;
	seq = __sync_fetch_and_add(next, 1);
	if (bpf_map_update_elem(&seen, &seq, &one, BPF_NOEXIST) ||
	    bpf_map_update_elem(&seen_percpu, &seq, &one, BPF_NOEXIST)) {
		k = 1;
		next = bpf_map_lookup_elem(&counters, &k);
		if (next)
			__sync_fetch_and_add(next, 1);
	}
	return 0;
}
