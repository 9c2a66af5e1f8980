// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style kprobe counter for the VM kernels (the host has no kprobes):
//   eex_kprobe_calls_total  hash, key u64 kernel address -> calls of do_sys_openat2 (each open() of
//                           the test's workload), named through kaddrs and ksym
//                           (integration/ebpf_exporter/eex_kprobe.yaml)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "eex_maps.bpf.h"
#include "eex_openat2.bpf.h"

EEX_OPENAT2_MAP(eex_kprobe_calls_total);

SEC("kprobe/do_sys_openat2")
int BPF_KPROBE(eex_kprobe_openat2)
{
	eex_count_openat2(&eex_kprobe_calls_total);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
