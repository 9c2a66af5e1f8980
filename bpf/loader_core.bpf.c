// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An object that needs CO-RE: it reads task_struct fields through vmlinux.h's
// preserve_access_index types, so clang emits CO-RE relocations (resolved at load against
// the running kernel's BTF; bpf/core_*.bpf.c exercise every relocation kind).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

__u32 last_ppid;

SEC("tracepoint/syscalls/sys_enter_getppid")
int core_getppid(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	last_ppid = BPF_CORE_READ(task, real_parent, tgid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
