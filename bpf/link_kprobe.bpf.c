// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Kprobe link tests (VM kernels: the host has no CONFIG_KPROBES). getppid() of one process
// (target_tgid) is counted: slot 0 by a kprobe named without the syscall wrapper prefix
// (bpfkit retries with __x64_), slot 1 by a kretprobe, slot 2 by a hand-attached kprobe.
// No bpf_get_attach_cookie here, so it loads on 5.10 too.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int count(__u32 slot)
{
	__u64 *value;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	value = bpf_map_lookup_elem(&hits, &slot);
	if (value)
		__sync_fetch_and_add(value, 1);
	return 0;
}

SEC("kprobe/sys_getppid")
int kp_getppid(void *ctx)
{
	return count(0);
}

SEC("kretprobe/__x64_sys_getppid")
int krp_getppid(void *ctx)
{
	return count(1);
}

SEC("kprobe")
int kp_manual(void *ctx)
{
	return count(2);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
