// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style kprobe counter for the VM kernels (the host has no kprobes):
//   eex_kprobe_calls_total  hash, key u64 kernel address -> calls of do_sys_openat2 (each open() of
//                           the test's workload, eex_target); the address comes from kaddrs and
//                           the ksym decoder names it (integration/ebpf_exporter/eex_kprobe.yaml)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "eex_maps.bpf.h"

const volatile __u64 kaddr_do_sys_openat2 = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u64);
	__type(value, __u64);
} eex_kprobe_calls_total SEC(".maps");

SEC("kprobe/do_sys_openat2")
int BPF_KPROBE(eex_kprobe_openat2)
{
	__u64 addr = kaddr_do_sys_openat2;

	if (eex_mine())
		increment_map(&eex_kprobe_calls_total, &addr, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
