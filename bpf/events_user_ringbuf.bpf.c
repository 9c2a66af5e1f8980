// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A USER_RINGBUF round trip for bpfkit's UserRingBuffer tests: user space writes records
// into user_rb (8..56 bytes, multiples of 8); each run of echo (BPF_PROG_TEST_RUN) drains
// them with bpf_user_ringbuf_drain and copies each one, prefixed by its size, into out.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, 1 << 14);
} user_rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} out SEC(".maps");

struct echo {
	__u64 size;
	__u8 data[56];
};

/* The record's size, for sizes that are multiples of 8 up to 56: the largest read that
 * succeeds (bpf_dynptr_read refuses to read past the end; bpf_dynptr_size is a 6.4 kfunc). */
static long echo_one(struct bpf_dynptr *dynptr, void *ctx)
{
	struct echo *e;
	__u64 size = 0;

	e = bpf_ringbuf_reserve(&out, sizeof(*e), 0);
	if (!e)
		return 1; /* stop draining */
	__builtin_memset(e->data, 0, sizeof(e->data));
#pragma unroll
	for (int n = 56; n > 0; n -= 8) {
		if (!bpf_dynptr_read(e->data, n, dynptr, 0, 0)) {
			size = n;
			break;
		}
	}
	e->size = size;
	bpf_ringbuf_submit(e, 0);
	(*(__u64 *)ctx)++;
	return 0;
}

SEC("tc")
int echo(struct __sk_buff *skb)
{
	__u64 seen = 0;

	bpf_user_ringbuf_drain(&user_rb, echo_one, &seen, 0);
	return seen;
}
