// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style cgroup_id_map (tests/test_eex_cgroup_id_map.py): user space keeps
// `cgroup_ids` filled with the ids of the cgroups whose path matches the config's regexps, and
// each getppid() is counted by the caller's cgroup id in one of two counters, by whether its
// cgroup is in the map:
//   eex_cgroup_match_total     hash, key u64 cgroup id -> count   (decoders uint, cgroup)
//   eex_cgroup_no_match_total  hash, key u64 cgroup id -> count
// and `cgroup_storage_ids`, a BPF_MAP_TYPE_CGRP_STORAGE map for the cgrp_storage type (filled
// from user space by cgroup fd; the program does not read it).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} cgroup_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} cgroup_storage_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} eex_cgroup_match_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} eex_cgroup_no_match_total SEC(".maps");

static __always_inline void bump(void *map, __u64 *key)
{
	__u64 one = 1, *value = bpf_map_lookup_elem(map, key);

	if (value)
		__sync_fetch_and_add(value, 1);
	else
		bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int eex_cgroup_getppid(void *ctx)
{
	__u64 id = bpf_get_current_cgroup_id();

	bump(bpf_map_lookup_elem(&cgroup_ids, &id) ? (void *)&eex_cgroup_match_total : (void *)&eex_cgroup_no_match_total, &id);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
