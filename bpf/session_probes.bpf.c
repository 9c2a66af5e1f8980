// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Session tests: one program runs on entry and on return of each target (uprobe.session,
// kprobe.session). Per attach cookie (0..3) it counts entry and return runs; the entry run
// stores SESSION_MAGIC << 32 | (entry count) in the session cookie and the return run checks it
// still reads that, so the cookie is proven to carry from entry to return of the same call.
// The entry run returns 1 (suppressing that call's return run) for attach cookie SKIP_COOKIE.
// target_tgid (0: every process) limits counting to one process.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))  /* libbpf 1.2's macro, minus its static assert */
#endif

#define SESSION_MAGIC 0xC0FFEEULL
#define SKIP_COOKIE 2

/* The session kfuncs took no argument from 6.10 (kprobe sessions) to 6.18; by 7.2 (the
 * fsession work) they take the program's context. Both prototypes are declared __weak: the
 * one the kernel does not have resolves to 0 (a prototype that differs is treated as missing),
 * and bpf_ksym_exists() picks the other at load time. */
extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;
extern bool bpf_session_is_return___ctx(void *ctx) __ksym __weak;
extern __u64 *bpf_session_cookie___ctx(void *ctx) __ksym __weak;

const volatile __u32 target_tgid = 0;

struct session_stats {
	__u64 entries;
	__u64 returns;
	__u64 cookie_ok;   /* return runs that read the cookie their entry run wrote */
	__u64 cookie_bad;  /* return runs that read anything else */
	__u64 last_cookie; /* what the last return run read */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);  /* the attach cookie */
	__type(value, struct session_stats);
} stats SEC(".maps");

static __always_inline bool is_return(void *ctx)
{
	if (bpf_ksym_exists(bpf_session_is_return___ctx))
		return bpf_session_is_return___ctx(ctx);
	return bpf_session_is_return();
}

static __always_inline __u64 *session_cookie(void *ctx)
{
	if (bpf_ksym_exists(bpf_session_cookie___ctx))
		return bpf_session_cookie___ctx(ctx);
	return bpf_session_cookie();
}

static __always_inline int session(void *ctx, __u32 bias)
{
	struct session_stats *s;
	__u64 *cookie;
	__u32 key;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 1; /* another process: no return run either */
	key = (bpf_get_attach_cookie(ctx) + bias) & 3;
	s = bpf_map_lookup_elem(&stats, &key);
	cookie = session_cookie(ctx);
	if (!s || !cookie)
		return 1;
	if (!is_return(ctx)) {
		s->entries += 1;
		*cookie = SESSION_MAGIC << 32 | (s->entries & 0xffffffff);
		return key == SKIP_COOKIE;
	}
	s->returns += 1;
	s->last_cookie = *cookie;
	/* calls are sequential in the target process: the latest entry is this call's */
	if (*cookie == (SESSION_MAGIC << 32 | (s->entries & 0xffffffff)))
		s->cookie_ok += 1;
	else
		s->cookie_bad += 1;
	return 0;
}

SEC("uprobe.session")
int up_session(struct pt_regs *ctx)
{
	return session(ctx, 0);
}

SEC("kprobe.session")
int kp_session(struct pt_regs *ctx)
{
	return session(ctx, 0);
}

/* Auto-attach: libbpf's section format; its counts go to key 3. */
SEC("uprobe.session/libc.so.6:getppid")
int up_session_auto(struct pt_regs *ctx)
{
	return session(ctx, 3);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
