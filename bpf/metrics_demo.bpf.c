// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// bpfkit attach --metrics (issue #24): maps of every shape the Prometheus collector serves, filled
// by syscalls of one process (target_tgid, a const volatile knob) so that counts are exact:
//   calls        hash, key {tgid, comm, kind enum} -> u64 count    (labels from a struct key)
//   totals       per-CPU array, key u32 -> struct {events, arg_sum} (per-CPU summed, one family per field)
//   pgid_hist    array, key = log2 slot -> u64 count                (a slot-keyed histogram)
//   arg_hist     hash, key tgid -> struct hist {slots[]}            (per-key histograms)
//   events       ring buffer of struct event                        (--otlp records)
// getppid() counts; getpgid(N) counts and puts N into the histograms (N is the test's choice:
// the tracepoint fires on entry even when no process N exists).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "log2.h"

#define MAX_SLOTS 32

const volatile __u32 target_tgid = 0;

enum call_kind { CALL_GETPPID = 1, CALL_GETPGID = 2 };

struct call_key {
	__u32 tgid;
	char comm[16];
	enum call_kind kind;
};

struct total {
	__u64 events;
	__u64 arg_sum;
};

struct hist {
	__u32 slots[MAX_SLOTS];
};

struct event {
	__u32 tgid;
	__u32 tid;
	enum call_kind kind;
	__s64 arg;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct call_key);
	__type(value, __u64);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct total);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} pgid_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct hist);
} arg_hist SEC(".maps");

/* In BTF for user space (--otlp, --event-type event): a type only used inside functions is not. */
struct event *unused_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void count(enum call_kind kind, __s64 arg)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct call_key key = { .tgid = pid_tgid >> 32, .kind = kind };
	struct total *t;
	struct event *e;
	__u64 *n, one = 1;
	__u32 zero = 0;

	bpf_get_current_comm(key.comm, sizeof(key.comm));
	n = bpf_map_lookup_elem(&calls, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&calls, &key, &one, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&totals, &zero);
	if (t) {
		t->events += 1;
		t->arg_sum += arg;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->tgid = pid_tgid >> 32;
		e->tid = (__u32)pid_tgid;
		e->kind = kind;
		e->arg = arg;
		__builtin_memcpy(e->comm, key.comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
	}
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_getppid(void *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	count(CALL_GETPPID, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpgid")
int on_getpgid(struct trace_event_raw_sys_enter *ctx)
{
	static const struct hist empty;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__s64 arg = ctx->args[0];
	struct hist *h;
	__u64 *n;
	__u32 slot;

	if (tgid != target_tgid)
		return 0;
	count(CALL_GETPGID, arg);
	slot = log2_u32((__u32)arg);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	n = bpf_map_lookup_elem(&pgid_hist, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	h = bpf_map_lookup_elem(&arg_hist, &tgid);
	if (!h) {
		bpf_map_update_elem(&arg_hist, &tgid, &empty, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&arg_hist, &tgid);
		if (!h)
			return 0;
	}
	asm volatile("" : "+r"(slot));
	if (slot < MAX_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
