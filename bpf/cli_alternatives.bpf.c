// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Alternative programs for one hook, as libbpf-tools ship them; a loader keeps the first of a
// group the kernel accepts (Collection(programs=[(a, b)]), `bpfkit attach -p 'a|b'`):
// - sys_enter through tp_btf (5.5+, BTF-typed arguments; a raw tracepoint underneath, no
//   trampoline) or raw_tp (4.17+);
// - getppid(2) entry through fentry (BPF trampolines: 5.5+ and not on every kernel/arch; this
//   host refuses them) or the syscalls:sys_enter_getppid tracepoint (4.7+).
// Slots of `hits`: 0 enter_btf, 1 enter_raw, 2 getppid_fentry, 3 getppid_tp; target_tid only.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 target_tid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void bump(__u32 slot)
{
	__u64 *value;

	if ((__u32)bpf_get_current_pid_tgid() != target_tid)
		return;
	value = bpf_map_lookup_elem(&hits, &slot);
	if (value)
		__sync_fetch_and_add(value, 1);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(enter_btf, struct pt_regs *regs, long id)
{
	bump(0);
	return 0;
}

SEC("raw_tp/sys_enter")
int enter_raw(struct bpf_raw_tracepoint_args *ctx)
{
	bump(1);
	return 0;
}

/* __do_sys_getppid: the body SYSCALL_DEFINE0(getppid) expands to, in vmlinux BTF (the
 * __x64_sys_ wrappers often are not) */
SEC("fentry/__do_sys_getppid")
int BPF_PROG(getppid_fentry)
{
	bump(2);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int getppid_tp(void *ctx)
{
	bump(3);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
