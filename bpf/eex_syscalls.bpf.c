// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style counters (integration/ebpf_exporter/eex_syscalls.yaml), counted in the test's
// workload process only (eex_target):
//   eex_syscalls_total            hash, key u64 syscall number -> count   (decoders uint, syscall)
//   eex_openat_by_function_total  hash, key u64 kernel address -> count   (kaddrs: do_sys_openat2,
//                                 decoders ksym): each openat() counted under the function that
//                                 does the work (eex_openat2.bpf.h)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "eex_maps.bpf.h"
#include "eex_openat2.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} eex_syscalls_total SEC(".maps");

EEX_OPENAT2_MAP(eex_openat_by_function_total);

SEC("tp_btf/sys_enter")
int BPF_PROG(eex_sys_enter, struct pt_regs *regs, long id)
{
	__u64 nr = id;

	if (eex_mine())
		increment_map(&eex_syscalls_total, &nr, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int eex_enter_openat(void *ctx)
{
	eex_count_openat2(&eex_openat_by_function_total);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
