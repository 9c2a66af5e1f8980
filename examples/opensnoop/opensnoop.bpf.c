// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// opensnoop: every openat(2) and openat2(2) with its result, like libbpf-tools' opensnoop.
// sys_enter_* keeps the file name pointer, flags and mode per thread in `start`; sys_exit_*
// builds a `struct event` (libbpf-tools' opensnoop.h layout, a struct full_path inside: 8,232
// bytes, too big for the BPF stack) in the per-CPU array `heap`, declared as compat.bpf.h does
// with a value size and no value type, so the object's BTF has no struct event: only its DWARF
// (clang -g) does, which is where bpfkit reads it from. The event goes out through the ring
// buffer `events`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TASK_COMM_LEN 16
#define NAME_MAX 255
#define MAX_PATH_DEPTH 32
#define MAX_EVENT_SIZE 10240
#define INVALID_UID ((uid_t)-1)
#define O_CREAT 00000100
#define O_TMPFILE 020200000

struct args_t {
	const char *fname;
	int flags;
	__u32 mode;
};

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

/* Filters, set before load (.rodata). */
const volatile pid_t targ_tgid = 0;           /* -p: only this process */
const volatile pid_t targ_pid = 0;            /* -t: only this thread */
const volatile uid_t targ_uid = INVALID_UID;  /* -u: only this user */
const volatile bool targ_failed = false;      /* -x: only failed opens */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);  /* tid */
	__type(value, struct args_t);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_EVENT_SIZE);
} heap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline int trace_enter(const char *fname, int flags, __u32 mode)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct args_t args = {.fname = fname, .flags = flags, .mode = mode};

	if (targ_tgid && targ_tgid != id >> 32)
		return 0;
	if (targ_pid && targ_pid != tid)
		return 0;
	if (targ_uid != INVALID_UID && targ_uid != (__u32)bpf_get_current_uid_gid())
		return 0;
	bpf_map_update_elem(&start, &tid, &args, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int enter_openat(struct syscall_trace_enter *ctx)
{
	return trace_enter((const char *)ctx->args[1], (int)ctx->args[2], (__u32)ctx->args[3]);
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int enter_openat2(struct syscall_trace_enter *ctx)
{
	struct open_how how = {};

	bpf_probe_read_user(&how, sizeof(how), (void *)ctx->args[2]);
	return trace_enter((const char *)ctx->args[1], (int)how.flags, (__u32)how.mode);
}

static __always_inline int trace_exit(struct syscall_trace_exit *ctx)
{
	static const __u32 zero = 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct args_t *ap = bpf_map_lookup_elem(&start, &tid);
	struct event *e;
	__u64 stack[3] = {};
	int ret;

	if (!ap)
		return 0;  /* entry missed, or filtered out */
	ret = ctx->ret;
	if (targ_failed && ret >= 0)
		goto cleanup;
	e = bpf_map_lookup_elem(&heap, &zero);
	if (!e)
		goto cleanup;
	e->ts = bpf_ktime_get_ns();
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	bpf_probe_read_user_str(&e->fname.pathes, sizeof(e->fname.pathes), ap->fname);
	e->fname.depth = 0;
	e->fname.failed = 0;
	e->flags = ap->flags;
	/* the mode means something only when the call may create the file */
	e->mode = (ap->flags & O_CREAT || (ap->flags & O_TMPFILE) == O_TMPFILE) ? ap->mode : 0;
	e->ret = ret;
	/* the calling addresses: the user stack past the syscall wrapper itself */
	bpf_get_stack(ctx, stack, sizeof(stack), BPF_F_USER_STACK);
	e->callers[0] = stack[1];
	e->callers[1] = stack[2];
	bpf_ringbuf_output(&events, e, sizeof(*e), 0);
cleanup:
	bpf_map_delete_elem(&start, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int exit_openat(struct syscall_trace_exit *ctx)
{
	return trace_exit(ctx);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int exit_openat2(struct syscall_trace_exit *ctx)
{
	return trace_exit(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
