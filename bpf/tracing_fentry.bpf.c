// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// BTF-enabled tracing programs for the VM tests: fentry/fexit on do_sys_openat2 (5.6+)
// recording the arguments and the return value for one thread (target_tid); fmod_ret on
// security_file_open and an LSM hook on file_open, both failing the target thread's opens
// (with fmod_errno / EACCES).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 target_tid = 0;
const volatile int fmod_errno = 0;

__u64 entries = 0;
__u64 exits = 0;
int last_dfd = 0;
long last_ret = 0;
__u64 last_cookie = 0;
__u64 fmod_calls = 0;
__u64 lsm_calls = 0;

static __always_inline bool mine(void)
{
	return (__u32)bpf_get_current_pid_tgid() == target_tid;
}

SEC("fentry/do_sys_openat2")
int BPF_PROG(open_entry, int dfd, const char *filename, struct open_how *how)
{
	if (!mine())
		return 0;
	__sync_fetch_and_add(&entries, 1);
	last_dfd = dfd;
	return 0;
}

/* bpf_get_attach_cookie in fentry programs: 5.19 (load it only there) */
SEC("fentry/do_sys_openat2")
int BPF_PROG(open_entry_cookie, int dfd, const char *filename, struct open_how *how)
{
	if (mine())
		last_cookie = bpf_get_attach_cookie(ctx);
	return 0;
}

SEC("fexit/do_sys_openat2")
int BPF_PROG(open_exit, int dfd, const char *filename, struct open_how *how, long ret)
{
	if (!mine())
		return 0;
	__sync_fetch_and_add(&exits, 1);
	last_ret = ret;
	return 0;
}

/* no target in the section: set with ProgramSpec.set_attach_target() before loading */
__u64 any_entries = 0;

SEC("fentry")
int BPF_PROG(any_entry)
{
	__sync_fetch_and_add(&any_entries, 1);
	return 0;
}

/* fmod_ret accepts security_* functions (and ALLOW_ERROR_INJECTION ones, absent from Debian's
 * kernels): a non-zero return skips the function and becomes its result. */
SEC("fmod_ret/security_file_open")
int BPF_PROG(deny_open, struct file *file, int ret)
{
	if (ret || !mine())
		return ret;
	__sync_fetch_and_add(&fmod_calls, 1);
	return -fmod_errno;
}

SEC("lsm/file_open")
int BPF_PROG(lsm_file_open, struct file *file, int ret)
{
	if (ret || !mine())
		return ret;
	__sync_fetch_and_add(&lsm_calls, 1);
	return -13; /* -EACCES: the verifier wants a constant-bounded [-4095, 0] */
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
