// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An opensnoop-like event for bpfkit's record tests (tests/test_records_dwarf.py): as
// libbpf-tools' opensnoop.bpf.c and compat.bpf.h do, struct event (with a nested struct
// full_path, 8,232 bytes) is built in a per-CPU "heap" array declared with a value size and no
// value type, so the object's BTF has no struct event: only its DWARF (clang -g) describes it.
// The event goes out through a ring buffer (events) and a perf event array (pevents). Only
// openat() calls of the process whose tgid is target_tgid are sent.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL"; /* bpf_perf_event_output is GPL-only */

#define TASK_COMM_LEN 16
#define NAME_MAX 255
#define MAX_PATH_DEPTH 32
#define HEAP_SIZE 10240

const volatile __u32 target_tgid = 0;

struct full_path {
	char pathes[NAME_MAX * MAX_PATH_DEPTH];
	unsigned int depth;
	int failed;
};

struct event {
	__u64 ts;
	pid_t pid;
	uid_t uid;
	int ret;
	int flags;
	__u32 mode;
	__u64 callers[2];
	char comm[TASK_COMM_LEN];
	struct full_path fname;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, HEAP_SIZE);
} heap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} pevents SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_openat")
int records_openat(struct syscall_trace_enter *ctx)
{
	static const __u32 zero = 0;
	struct event *e;

	if (bpf_get_current_pid_tgid() >> 32 != target_tgid)
		return 0;
	e = bpf_map_lookup_elem(&heap, &zero);
	if (!e)
		return 0;
	e->ts = bpf_ktime_get_ns();
	e->pid = target_tgid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->ret = -2;
	e->flags = (int)ctx->args[2];
	e->mode = (__u32)ctx->args[3];
	e->callers[0] = 0x1111;
	e->callers[1] = 0x2222;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	__builtin_memset(e->fname.pathes, 0, 2 * NAME_MAX);
	bpf_probe_read_user_str(e->fname.pathes, NAME_MAX, (const char *)ctx->args[1]);
	e->fname.depth = 1;
	e->fname.failed = 7;
	bpf_ringbuf_output(&events, e, sizeof(*e), 0);
	bpf_perf_event_output(ctx, &pevents, BPF_F_CURRENT_CPU, e, sizeof(*e));
	return 0;
}
