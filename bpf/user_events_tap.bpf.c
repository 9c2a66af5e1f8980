// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// BPF and user_events (integration/test_user_events.py, docs/user_events.md).
//
// ue_tracepoint: a tracepoint program for a user event's trace event. Attaching it (a perf
// event on user_events/<name>) enables the event, but the kernel never runs it: user_events
// lost its BPF hook in 5.18 ("tracing/user_events: Remove eBPF interfaces") and
// user_event_perf() hands records to perf_tp_event() without trace_call_bpf(). It counts its
// runs in hits[0] so a test can tell if a kernel ever changes that.
//
// ue_tap: a kprobe on perf_tp_event(event_type, count, record, entry_size, ...), where the perf
// path of every trace event passes the record it built: for a user event that is struct
// trace_entry (8 bytes) followed by the payload the process wrote. Records of the trace event
// `target_type` (the user event's tracefs id) written by `target_tgid` go to the ring buffer
// `events`; hits[1] counts them. perf_tp_event() only runs on a CPU whose perf list for the
// event is not empty: with the tracepoint link's perf event on CPU 0, the emitter runs there.
//
// No CO-RE: struct pt_regs (the kprobe context) has the same layout on every x86_64 kernel.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define TRACE_ENTRY_SIZE 8
#define MAX_PAYLOAD 256

const volatile __u32 target_type = 0;
const volatile __u32 target_tgid = 0;

struct ue_record {
	__u32 size;	/* payload bytes the kernel recorded (before truncation to MAX_PAYLOAD) */
	__u32 tgid;
	__u8 payload[MAX_PAYLOAD];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *value = bpf_map_lookup_elem(&hits, &slot);

	if (value)
		__sync_fetch_and_add(value, 1);
}

SEC("tracepoint")
int ue_tracepoint(void *ctx)
{
	count(0);
	return 0;
}

SEC("kprobe/perf_tp_event")
int BPF_KPROBE(ue_tap, __u16 event_type, __u64 cnt, void *record, int entry_size)
{
	struct ue_record *r;
	__u32 size;

	if (event_type != target_type)
		return 0;
	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	count(1);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r)
		return 0;
	size = entry_size > TRACE_ENTRY_SIZE ? entry_size - TRACE_ENTRY_SIZE : 0;
	r->size = size;
	r->tgid = bpf_get_current_pid_tgid() >> 32;
	if (size > MAX_PAYLOAD)
		size = MAX_PAYLOAD;
	if (bpf_probe_read_kernel(r->payload, size, record + TRACE_ENTRY_SIZE))
		r->size = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
