// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An ebpf_exporter-style perf_event_array counter (tests/test_eex_perf_counter.py): each
// getppid()/gettid() of the test's process (eex_target) outputs its syscall number, a u64, to
// `eex_perf_syscalls_total`; user space counts the records by their decoded labels
// (perf_event_array: true; decoders uint, syscall).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "eex_maps.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} eex_perf_syscalls_total SEC(".maps");

/* The syscalls/sys_enter_* tracepoints' record: the syscall's number after the common header. */
static __always_inline int out(struct syscall_trace_enter *ctx)
{
	__u64 nr = ctx->nr;

	if (eex_mine())
		bpf_perf_event_output(ctx, &eex_perf_syscalls_total, BPF_F_CURRENT_CPU, &nr, sizeof(nr));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int eex_perf_getppid(struct syscall_trace_enter *ctx)
{
	return out(ctx);
}

SEC("tracepoint/syscalls/sys_enter_gettid")
int eex_perf_gettid(struct syscall_trace_enter *ctx)
{
	return out(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
