// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Programs whose target is a BTF id in the running kernel: a BTF-enabled raw tracepoint
// (tp_btf/, attach_btf_id = btf_trace_sys_enter), a task iterator (iter/task,
// bpf_iter_task) and an fentry program (fentry/, refused on hosts without BPF trampolines;
// "?" keeps it out of default loads). Their arguments are read as raw u64s: no CO-RE.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 enters;

SEC("tp_btf/sys_enter")
int on_sys_enter(__u64 *ctx)
{
	__sync_fetch_and_add(&enters, 1);
	return 0;
}

SEC("iter/task")
int each_task(void *ctx)
{
	return 0;
}

SEC("?fentry/do_unlinkat")
int on_unlinkat(__u64 *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
