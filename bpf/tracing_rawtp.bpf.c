// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Raw tracepoints on the host: sys_enter counted for one thread (target_tid) and one syscall
// (target_nr), so counts are exact; a second program counting into another slot (for link
// update); a writable raw tracepoint on bpf_test_finish that rewrites BPF_PROG_TEST_RUN's
// result for the target thread; a tp_btf program on sys_enter for the VM tests.
// Slots of `hits`: 0 on_sys_enter, 1 on_sys_enter_other, 2 on_test_finish, 3 btf_sys_enter.
// The *_cookie programs record bpf_get_attach_cookie() (raw_tp and tp_btf cookies: 6.10); load
// them only where wanted (Collection(programs=...)): older kernels reject the helper there.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 target_tid = 0;
const volatile long target_nr = -1;
const volatile int test_finish_err = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline bool mine(void)
{
	return (__u32)bpf_get_current_pid_tgid() == target_tid;
}

static __always_inline void bump(__u32 slot)
{
	__u64 *value = bpf_map_lookup_elem(&hits, &slot);

	if (value)
		__sync_fetch_and_add(value, 1);
}

/* raw sys_enter: args[0] is struct pt_regs *, args[1] the syscall number */
SEC("raw_tp/sys_enter")
int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	if (mine() && (long)ctx->args[1] == target_nr)
		bump(0);
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int on_sys_enter_other(struct bpf_raw_tracepoint_args *ctx)
{
	if (mine() && (long)ctx->args[1] == target_nr)
		bump(1);
	return 0;
}

/* bpf_test_finish(int *err) is a writable tracepoint (net/bpf/test_run.c): a program may
 * change the error BPF_PROG_TEST_RUN returns. */
SEC("raw_tp.w/bpf_test_finish")
int on_test_finish(struct bpf_raw_tracepoint_args *ctx)
{
	int *err = (int *)ctx->args[0];

	if (!mine())
		return 0;
	bump(2);
	*err = test_finish_err;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter, struct pt_regs *regs, long id)
{
	if (mine() && id == target_nr)
		bump(3);
	return 0;
}

__u64 raw_cookie = 0;
__u64 btf_cookie = 0;

SEC("raw_tp/sys_enter")
int raw_sys_enter_cookie(struct bpf_raw_tracepoint_args *ctx)
{
	if (mine() && (long)ctx->args[1] == target_nr)
		raw_cookie = bpf_get_attach_cookie(ctx);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter_cookie, struct pt_regs *regs, long id)
{
	if (mine() && id == target_nr)
		btf_cookie = bpf_get_attach_cookie(ctx);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
