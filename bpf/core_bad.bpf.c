// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// CO-RE and kfunc uses that no kernel can satisfy, without the guards that would make them
// dead code: bpfkit poisons the instructions (as libbpf does), the verifier rejects them, and
// the VerifierError must say which relocation or kfunc it was (integration/test_core.py).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct task_struct___missing {
	int bpfkit_no_such_field;
} __attribute__((preserve_access_index));

extern void bpfkit_no_such_kfunc(void) __ksym __weak;

__s32 value;

SEC("tracepoint/syscalls/sys_enter_getppid")
int core_unguarded_field(void *ctx)
{
	struct task_struct___missing *task = (void *)bpf_get_current_task();

	value = BPF_CORE_READ(task, bpfkit_no_such_field);
	return 0;
}

SEC("?tracepoint/syscalls/sys_enter_getppid")
int core_unguarded_kfunc(void *ctx)
{
	bpfkit_no_such_kfunc();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
