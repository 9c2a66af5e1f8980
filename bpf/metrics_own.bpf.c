// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// bpfkit's own metrics format (issue #37): maps a program keeps for itself beside the maps it
// means as metrics, filled by getpgid(N) calls of one process (target_tgid) so counts are exact.
// Working state, which bpfkit must not serve unless a config names it:
//   start          hash, key struct task_struct * -> u64 ktime   (a kernel pointer key, as libbpf-tools' biolatency)
//   entry_ts       per-CPU array u32 -> u64 ktime                 (a name that says time stamp)
//   traced         hash tgid -> struct span_parent {ids}          (every value field an identifier)
// Metrics:
//   calls_total        hash tgid -> u64                            (a counter by its name)
//   start_calls_total  hash tgid -> u64                            (says start, but named as a counter)
//   ops                array u32 -> struct {count, arg_sum, max_arg} (count and arg_sum counters, max_arg a gauge)
//   arg_seconds        hash {kind, slot} -> u64: a log2 histogram of N whose slot BUCKET_MAX + 1 holds the
//                      sum of the Ns (ebpf_exporter's convention; a config's bucket_max: 16 says so)
//   user_hist          array of 64 slots -> u64: a histogram the tests fill from user space
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "log2.h"

#define BUCKET_MAX 16

const volatile __u32 target_tgid = 0;

struct span_parent {
	__u64 trace_id_hi;
	__u64 trace_id_lo;
	__u64 span_id;
};

struct op_stats {
	__u64 count;
	__u64 arg_sum;
	__u64 max_arg;
};

struct hist_key {
	__u32 kind;
	__u32 slot;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct task_struct *);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} entry_ts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct span_parent);
} traced SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} start_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct op_stats);
} ops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct hist_key);
	__type(value, __u64);
} arg_seconds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} user_hist SEC(".maps");

static __always_inline void add(void *map, const void *key, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(map, key);

	if (v)
		__sync_fetch_and_add(v, n);
	else
		bpf_map_update_elem(map, key, &n, BPF_NOEXIST);
}

SEC("tracepoint/syscalls/sys_enter_getpgid")
int on_getpgid(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct span_parent parent = { .trace_id_hi = 1, .trace_id_lo = tgid, .span_id = 7 };
	struct hist_key hk = { .kind = 1 };
	__u64 arg = ctx->args[0], now = bpf_ktime_get_ns(), *ts;
	struct op_stats *st;
	__u32 zero = 0;

	if (tgid != target_tgid)
		return 0;
	bpf_map_update_elem(&start, &task, &now, BPF_ANY);
	ts = bpf_map_lookup_elem(&entry_ts, &zero);
	if (ts)
		*ts = now;
	bpf_map_update_elem(&traced, &tgid, &parent, BPF_ANY);
	add(&calls_total, &tgid, 1);
	add(&start_calls_total, &tgid, 1);
	st = bpf_map_lookup_elem(&ops, &zero);
	if (st) {
		__sync_fetch_and_add(&st->count, 1);
		__sync_fetch_and_add(&st->arg_sum, arg);
		if (arg > st->max_arg)
			st->max_arg = arg;
	}
	hk.slot = log2l(arg);
	if (hk.slot > BUCKET_MAX)
		hk.slot = BUCKET_MAX;
	add(&arg_seconds, &hk, 1);
	hk.slot = BUCKET_MAX + 1;
	add(&arg_seconds, &hk, arg);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
