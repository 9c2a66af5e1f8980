// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter's tracing (issue #37, bpfkit/metrics/ebpf_exporter/tracing.py): ring buffer records
// laid out as its tracing.bpf.h's span_base_t (trace id, parent span id, span id, monotonic start,
// duration) that become OpenTelemetry spans. One process (target_tgid) makes a trace with getpgid():
//   getpgid(SESSION_BEGIN)  opens a session: a new trace id and the parent span's id, made here
//   getpgid(N)              a child span of the session, sys_enter to sys_exit (duration measured here)
//   getpgid(SESSION_END)    submits the parent span (session_spans), which covers every child
//   getpgid(BAD_SPAN)       submits a child with an all-zero trace id (ebpf_exporter refuses it)
// The markers are above any pid_max (4194304), so each call fails with ESRCH and no process is
// touched. Every span submitted is also written to `submitted` (in submission order), so that the
// test compares what an OTLP receiver got with what the kernel measured, exactly.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define SESSION_BEGIN 0x7ffffff0
#define SESSION_END 0x7ffffff1
#define BAD_SPAN 0x7ffffff2
#define MAX_LOGGED 64

const volatile __u32 target_tgid = 0;

struct span_base {
	__u64 trace_id_hi;
	__u64 trace_id_lo;
	__u64 parent_span_id;
	__u64 span_id;
	__u64 span_monotonic_timestamp_ns;
	__u64 span_duration_ns;
};

struct call_span {
	struct span_base base;
	char name[16];  /* span_name */
	__u64 arg;      /* an attribute (uint) */
	__u32 seq;      /* an attribute (uint), then 4 bytes of padding */
	__u32 _pad;
};

struct session_span {
	struct span_base base;
	char comm[16];  /* an attribute (string) */
	__u32 calls;    /* an attribute (uint), then 4 bytes of padding */
	__u32 _pad;
};

struct session {
	struct span_base base;
	__u64 enter_ns;
	__u64 arg;
	__u32 calls;
	__u32 active;
};

struct session session;
__u32 nsubmitted;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} call_spans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} session_spans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_LOGGED);
	__type(key, __u32);
	__type(value, struct span_base);
} submitted SEC(".maps");

static __always_inline __u64 random_id(void)
{
	return ((__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32()) | 1;  /* never 0 */
}

/* Submit a reserved span, logging its base in `submitted` first. */
static __always_inline int submit(void *span, const struct span_base *base)
{
	__u32 i = nsubmitted;

	if (i < MAX_LOGGED)
		bpf_map_update_elem(&submitted, &i, base, BPF_ANY);
	nsubmitted = i + 1;
	bpf_ringbuf_submit(span, 0);
	return 0;
}

static __always_inline int submit_call(__u64 trace_hi, __u64 trace_lo, __u64 start, __u64 duration, __u64 arg)
{
	struct call_span *span = bpf_ringbuf_reserve(&call_spans, sizeof(*span), 0);

	if (!span)
		return 0;
	span->base.trace_id_hi = trace_hi;
	span->base.trace_id_lo = trace_lo;
	span->base.parent_span_id = session.base.span_id;
	span->base.span_id = random_id();
	span->base.span_monotonic_timestamp_ns = start;
	span->base.span_duration_ns = duration;
	__builtin_memcpy(span->name, "getpgid\0\0\0\0\0\0\0\0", sizeof(span->name));
	span->arg = arg;
	span->seq = session.calls;
	span->_pad = 0;
	return submit(span, &span->base);
}

SEC("tracepoint/syscalls/sys_enter_getpgid")
int on_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 now = bpf_ktime_get_ns(), arg = ctx->args[0];
	struct session_span *span;

	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	session.enter_ns = 0;
	if (arg == SESSION_BEGIN) {
		session.base.trace_id_hi = random_id();
		session.base.trace_id_lo = random_id();
		session.base.parent_span_id = 0;
		session.base.span_id = random_id();
		session.base.span_monotonic_timestamp_ns = now;
		session.calls = 0;
		session.active = 1;
		return 0;
	}
	if (arg == BAD_SPAN)
		return submit_call(0, 0, now, 0, arg);
	if (!session.active)
		return 0;
	if (arg != SESSION_END) {
		session.enter_ns = now;
		session.arg = arg;
		return 0;
	}
	session.active = 0;
	session.base.span_duration_ns = now - session.base.span_monotonic_timestamp_ns;
	span = bpf_ringbuf_reserve(&session_spans, sizeof(*span), 0);
	if (!span)
		return 0;
	span->base = session.base;
	bpf_get_current_comm(span->comm, sizeof(span->comm));
	span->calls = session.calls;
	span->_pad = 0;
	return submit(span, &span->base);
}

SEC("tracepoint/syscalls/sys_exit_getpgid")
int on_exit(void *ctx)
{
	__u64 now = bpf_ktime_get_ns(), start = session.enter_ns;

	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid || !session.active || !start)
		return 0;
	session.enter_ns = 0;
	submit_call(session.base.trace_id_hi, session.base.trace_id_lo, start, now - start, session.arg);
	session.calls += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
