/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* openat() calls of the test's workload counted under do_sys_openat2's address, which the exporter
 * writes into kaddr_do_sys_openat2 before loading (the config's `kaddrs: [do_sys_openat2]`) and the
 * ksym decoder names back: bpf/eex_syscalls.bpf.c (a tracepoint), eex_kprobe.bpf.c and
 * eex_fentry.bpf.c. EEX_OPENAT2_MAP(name) defines the counter map; eex_count_openat2(&name) counts.
 * Needs eex_maps.bpf.h first. */
#ifndef BPFKIT_EEX_OPENAT2_BPF_H
#define BPFKIT_EEX_OPENAT2_BPF_H

const volatile __u64 kaddr_do_sys_openat2 = 0;

#define EEX_OPENAT2_MAP(name)                   \
	struct {                                \
		__uint(type, BPF_MAP_TYPE_HASH);\
		__uint(max_entries, 4);         \
		__type(key, __u64);             \
		__type(value, __u64);           \
	} name SEC(".maps")

static __always_inline void eex_count_openat2(void *map)
{
	__u64 addr = kaddr_do_sys_openat2;

	if (eex_mine())
		increment_map(map, &addr, 1);
}

#endif
