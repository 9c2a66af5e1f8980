// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// execsnoop: every execve(2) with its arguments, like bcc's execsnoop.
// syscalls:sys_enter_execve copies the arguments (user memory, still mapped before the exec)
// into a `struct event` kept per thread in `execs`; syscalls:sys_exit_execve adds the result
// and the new comm and sends the event through the ring buffer `events`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define TASK_COMM_LEN 16
#define MAXARGS 16
#define ARGLEN 64

struct event {
	__u32 pid;
	__u32 ppid;
	__u32 uid;
	__s32 retval;
	__u32 args_count;
	char comm[TASK_COMM_LEN];
	char args[MAXARGS][ARGLEN];
};

/* Filters, set before load (.rodata). */
const volatile __u32 targ_ppid = 0;           /* only children of this process */
const volatile bool ignore_failed = true;     /* drop execs that failed */

/* Events dropped because the ring buffer was full (.bss, read after load). */
__u64 dropped = 0;

static const struct event empty_event = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);  /* tid */
	__type(value, struct event);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	const char **argv = (const char **)ctx->args[1];
	struct event *e;
	__u32 ppid = BPF_CORE_READ(task, real_parent, tgid);
	int i;

	if (targ_ppid && ppid != targ_ppid)
		return 0;
	if (bpf_map_update_elem(&execs, &tid, &empty_event, BPF_NOEXIST))
		return 0;
	e = bpf_map_lookup_elem(&execs, &tid);
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->ppid = ppid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	for (i = 0; i < MAXARGS; i++) {
		const char *arg = NULL;

		if (bpf_probe_read_user(&arg, sizeof(arg), &argv[i]) || !arg)
			break;
		if (bpf_probe_read_user_str(e->args[i], ARGLEN, arg) < 0)
			break;
		e->args_count++;
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct event *e = bpf_map_lookup_elem(&execs, &tid);

	if (!e)
		return 0;
	e->retval = ctx->ret;
	if (!ignore_failed || ctx->ret >= 0) {
		bpf_get_current_comm(e->comm, sizeof(e->comm));  /* the new program's name */
		if (bpf_ringbuf_output(&events, e, sizeof(*e), 0))
			__sync_fetch_and_add(&dropped, 1);
	}
	bpf_map_delete_elem(&execs, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
