// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Producers of sequence-numbered records for bpfkit's event reader tests.
//
// Every record starts with struct ev: seq counts output *attempts* per CPU (from the
// PERCPU_ARRAY stats), so a failed output is a gap the reader can see, and check = ~seq
// catches torn records. The "sizes" variants send 32..56 bytes (zeros after the header) so
// that rings wrap at every alignment. tc programs are driven by BPF_PROG_TEST_RUN
// (repeat = N records on the calling CPU); the tracepoint programs fire on getppid() of the
// process whose tgid is target_tgid.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL"; /* bpf_perf_event_output is GPL-only */

const volatile __u32 target_tgid = 0;
const volatile __u32 discard_every = 0; /* rb_reserve: discard when seq % N == N - 1 */

struct ev {
	__u64 seq;
	__u64 ts;
	__u32 len;
	__u32 cpu;
	__u64 check;
	__u8 tail[24];
};

struct stats {
	__u64 produced;
	__u64 drops;
	__u64 discards;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} rb2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} pb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

static __always_inline struct stats *fill(struct ev *e, __u32 len)
{
	__u32 k = 0;
	struct stats *st = bpf_map_lookup_elem(&stats, &k);

	if (!st)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->seq = st->produced++;
	e->ts = bpf_ktime_get_ns();
	e->len = len;
	e->cpu = bpf_get_smp_processor_id();
	e->check = ~e->seq;
	return st;
}

static __always_inline __u32 size_of(__u64 seq)
{
	return 32 + 8 * (seq & 3);
}

static __always_inline int mine(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline int to_ringbuf(void *map, int sizes)
{
	struct ev e;
	struct stats *st = fill(&e, 32);
	__u32 len;

	if (!st)
		return 0;
	len = sizes ? size_of(e.seq) : 32;
	e.len = len;
	if (bpf_ringbuf_output(map, &e, len, 0))
		__sync_fetch_and_add(&st->drops, 1);
	return 0;
}

static __always_inline int to_perf(void *ctx, int sizes)
{
	struct ev e;
	struct stats *st = fill(&e, 32);
	__u32 len;

	if (!st)
		return 0;
	len = sizes ? size_of(e.seq) : 32;
	e.len = len;
	if (bpf_perf_event_output(ctx, &pb, BPF_F_CURRENT_CPU, &e, len))
		__sync_fetch_and_add(&st->drops, 1);
	return 0;
}

SEC("tc")
int rb_seq(struct __sk_buff *skb)
{
	return to_ringbuf(&rb, 0);
}

SEC("tc")
int rb_seq_sizes(struct __sk_buff *skb)
{
	return to_ringbuf(&rb, 1);
}

SEC("tc")
int rb2_seq(struct __sk_buff *skb)
{
	return to_ringbuf(&rb2, 0);
}

/* reserve/submit, discarding every discard_every-th record: the reader must skip those. */
SEC("tc")
int rb_reserve(struct __sk_buff *skb)
{
	struct ev *e;
	__u32 k = 0;
	struct stats *st = bpf_map_lookup_elem(&stats, &k);
	__u64 seq;

	if (!st)
		return 0;
	seq = st->produced++;
	e = bpf_ringbuf_reserve(&rb, 32, 0);
	if (!e) {
		__sync_fetch_and_add(&st->drops, 1);
		return 0;
	}
	e->seq = seq;
	e->ts = bpf_ktime_get_ns();
	e->len = 32;
	e->cpu = bpf_get_smp_processor_id();
	e->check = ~seq;
	if (discard_every && seq % discard_every == discard_every - 1) {
		__sync_fetch_and_add(&st->discards, 1);
		bpf_ringbuf_discard(e, 0);
	} else {
		bpf_ringbuf_submit(e, 0);
	}
	return 0;
}

SEC("tc")
int pb_seq(struct __sk_buff *skb)
{
	return to_perf(skb, 0);
}

SEC("tc")
int pb_seq_sizes(struct __sk_buff *skb)
{
	return to_perf(skb, 1);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int tp_rb(void *ctx)
{
	if (!mine())
		return 0;
	return to_ringbuf(&rb, 0);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int tp_pb(void *ctx)
{
	if (!mine())
		return 0;
	return to_perf(ctx, 0);
}
