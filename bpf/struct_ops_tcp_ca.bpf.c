// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A TCP congestion control in BPF (struct tcp_congestion_ops, 5.6): Reno through the kernel's
// tcp_reno_* kfuncs (5.13), registered as "bpfkit_reno". Every callback counts its calls in
// calls[] so a test sees the algorithm in use. `bpfkit_reno_legacy` is the same algorithm in
// a plain .struct_ops map (registered by map update, no bpf_link), named "bpfkit_reno2", and
// bpfkit_reno_v2 a replacement for bpfkit_reno (a StructOpsLink update).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

enum { CALL_INIT, CALL_CONG_AVOID, CALL_SSTHRESH, CALL_UNDO_CWND, CALL_RELEASE, CALL_STATE, CALL_INIT_V2, NR_CALLS };

__u64 calls[NR_CALLS];

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops/reno_init")
void BPF_PROG(reno_init, struct sock *sk)
{
	__sync_fetch_and_add(&calls[CALL_INIT], 1);
}

SEC("struct_ops/reno_init_v2")
void BPF_PROG(reno_init_v2, struct sock *sk)
{
	__sync_fetch_and_add(&calls[CALL_INIT_V2], 1);
}

SEC("struct_ops/reno_cong_avoid")
void BPF_PROG(reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	__sync_fetch_and_add(&calls[CALL_CONG_AVOID], 1);
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/reno_ssthresh")
__u32 BPF_PROG(reno_ssthresh, struct sock *sk)
{
	__sync_fetch_and_add(&calls[CALL_SSTHRESH], 1);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/reno_undo_cwnd")
__u32 BPF_PROG(reno_undo_cwnd, struct sock *sk)
{
	__sync_fetch_and_add(&calls[CALL_UNDO_CWND], 1);
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops/reno_release")
void BPF_PROG(reno_release, struct sock *sk)
{
	__sync_fetch_and_add(&calls[CALL_RELEASE], 1);
}

SEC("struct_ops/reno_set_state")
void BPF_PROG(reno_set_state, struct sock *sk, __u8 new_state)
{
	__sync_fetch_and_add(&calls[CALL_STATE], 1);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops bpfkit_reno = {
	.init = (void *)reno_init,
	.cong_avoid = (void *)reno_cong_avoid,
	.ssthresh = (void *)reno_ssthresh,
	.undo_cwnd = (void *)reno_undo_cwnd,
	.release = (void *)reno_release,
	.set_state = (void *)reno_set_state,
	.name = "bpfkit_reno",
};

/* The same callbacks in a second, link-less map (a program may serve several maps when it
 * sits at the same member). It also sets a data member: flags (TCP_CONG_NON_RESTRICTED, so a
 * non-root socket may select it). */
SEC(".struct_ops")
struct tcp_congestion_ops bpfkit_reno_legacy = {
	.init = (void *)reno_init,
	.cong_avoid = (void *)reno_cong_avoid,
	.ssthresh = (void *)reno_ssthresh,
	.undo_cwnd = (void *)reno_undo_cwnd,
	.flags = 0x1,
	.name = "bpfkit_reno2",
};

/* A second version of bpfkit_reno (same name: tcp_update_congestion_control wants it) for
 * StructOpsLink.update(); "?" leaves it out unless the loader is told to create it. */
SEC("?.struct_ops.link")
struct tcp_congestion_ops bpfkit_reno_v2 = {
	.init = (void *)reno_init_v2,
	.cong_avoid = (void *)reno_cong_avoid,
	.ssthresh = (void *)reno_ssthresh,
	.undo_cwnd = (void *)reno_undo_cwnd,
	.name = "bpfkit_reno",
};

char LICENSE[] SEC("license") = "Dual BSD/GPL";
