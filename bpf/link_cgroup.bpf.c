// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// cgroup programs for integration/test_link_cgroup.py. The test attaches them to a cgroup v2
// directory of its own and moves one child process into it, so every count is that child's.
// Contexts come from the UAPI header (no vmlinux.h: no CO-RE relocations on context fields).
// Slots of `counts`:
//   0 connect4 calls        1 connects rewritten     2 egress packets    3 sysctl reads denied
//   4 device opens denied   5 getsockopt altered     6 sockets created   7 sock_ops callbacks
//   8 bind4 calls           9 connect4_other (a second connect4 program, for ordering)
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define COUNT_SLOTS 10
#include "counts.h"
#include <bpf/bpf_endian.h>

#define SOL_SOCKET 1
#define SO_PRIORITY 12
#define AF_INET 2

const volatile __u16 from_port = 0; /* connect4: a connect to this port (host order) ... */
const volatile __u16 to_port = 0;   /* ... goes to this one */
const volatile __u32 dev_major = 0; /* cgroup/dev: deny this char device */
const volatile __u32 dev_minor = 0;
const volatile __s32 sockopt_value = 0; /* getsockopt(SOL_SOCKET, SO_PRIORITY) reads this */

SEC("cgroup/connect4")
int cg_connect4(struct bpf_sock_addr *ctx)
{
	bump(0);
	if (from_port && ctx->user_port == bpf_htons(from_port)) {
		ctx->user_port = bpf_htons(to_port);
		bump(1);
	}
	return 1; /* allow */
}

SEC("cgroup/connect4")
int cg_connect4_other(struct bpf_sock_addr *ctx)
{
	bump(9);
	return 1;
}

SEC("cgroup_skb/egress")
int cg_egress(struct __sk_buff *skb)
{
	bump(2);
	return 1; /* pass */
}

SEC("cgroup/sysctl")
int cg_sysctl(struct bpf_sysctl *ctx)
{
	if (ctx->write)
		return 1;
	bump(3);
	return 0; /* EPERM for every read */
}

SEC("cgroup/dev")
int cg_dev(struct bpf_cgroup_dev_ctx *ctx)
{
	__u32 type = ctx->access_type & 0xFFFF;

	if (type == BPF_DEVCG_DEV_CHAR && ctx->major == dev_major && ctx->minor == dev_minor) {
		bump(4);
		return 0; /* EPERM */
	}
	return 1;
}

SEC("cgroup/getsockopt")
int cg_getsockopt(struct bpf_sockopt *ctx)
{
	__u8 *optval = ctx->optval;
	__u8 *optval_end = ctx->optval_end;

	if (ctx->level != SOL_SOCKET || ctx->optname != SO_PRIORITY)
		return 1; /* as the kernel answered */
	if (optval + sizeof(__s32) > optval_end)
		return 1;
	*(__s32 *)optval = sockopt_value;
	/* Two 4-byte stores: the verifier refuses one 8-byte store over optlen and retval. */
	*(volatile __s32 *)&ctx->optlen = sizeof(__s32);
	*(volatile __s32 *)&ctx->retval = 0;
	bump(5);
	return 1;
}

SEC("cgroup/sock_create")
int cg_sock_create(struct bpf_sock *sk)
{
	if (sk->family == AF_INET)
		bump(6);
	return 1;
}

SEC("sockops")
int cg_sockops(struct bpf_sock_ops *ops)
{
	bump(7);
	return 1;
}

SEC("cgroup/bind4")
int cg_bind4(struct bpf_sock_addr *ctx)
{
	bump(8);
	return 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
