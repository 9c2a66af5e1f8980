// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// An execsnoop-like variable-length record for bpfkit's record tests
// (tests/test_records_varlen.py): as libbpf-tools' execsnoop.bpf.c does, the execve()
// arguments are copied one after another, each NUL-terminated, into char args[] of a struct
// event kept in a hash map between sys_enter_execve and sys_exit_execve, and only the first
// offsetof(args) + args_size bytes are sent (57 of 7,720 for "/bin/true a"). The record goes
// out through a perf event array (events) and a ring buffer (rb). Only exec()s by children of
// the process whose tgid is target_tgid are sent.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL"; /* bpf_perf_event_output is GPL-only */

#define ARGSIZE 128
#define TASK_COMM_LEN 16
#define TOTAL_MAX_ARGS 60
#define MAX_ARGS 8
#define FULL_MAX_ARGS_ARR (TOTAL_MAX_ARGS * ARGSIZE)
#define LAST_ARG (FULL_MAX_ARGS_ARR - ARGSIZE)
#define BASE_EVENT_SIZE (__u64)(&((struct event *)0)->args)

const volatile __u32 target_tgid = 0;

struct event {
	pid_t pid;
	pid_t ppid;
	uid_t uid;
	int retval;
	int args_count;
	unsigned int args_size;
	char comm[TASK_COMM_LEN];
	char args[FULL_MAX_ARGS_ARR];
};

static const struct event empty_event = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, pid_t);
	__type(value, struct event);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} rb SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_execve")
int records_enter_execve(struct syscall_trace_enter *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	const char **argv = (const char **)(ctx->args[1]);
	pid_t pid = (pid_t)bpf_get_current_pid_tgid();
	struct event *event;
	const char *argp;
	int ret, i;

	if (BPF_CORE_READ(task, real_parent, tgid) != target_tgid)
		return 0;
	if (bpf_map_update_elem(&execs, &pid, &empty_event, BPF_NOEXIST))
		return 0;
	event = bpf_map_lookup_elem(&execs, &pid);
	if (!event)
		return 0;
	event->pid = bpf_get_current_pid_tgid() >> 32;
	event->ppid = target_tgid;
	event->uid = (__u32)bpf_get_current_uid_gid();
	event->args_count = 0;
	event->args_size = 0;
	for (i = 0; i < MAX_ARGS; i++) {
		if (bpf_probe_read_user(&argp, sizeof(argp), &argv[i]) || !argp)
			break;
		if (event->args_size > LAST_ARG)
			break;
		ret = bpf_probe_read_user_str(&event->args[event->args_size], ARGSIZE, argp);
		if (ret < 0)
			break;
		event->args_count++;
		event->args_size += ret;
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_execve")
int records_exit_execve(struct syscall_trace_exit *ctx)
{
	pid_t pid = (pid_t)bpf_get_current_pid_tgid();
	struct event *event = bpf_map_lookup_elem(&execs, &pid);
	__u64 len;

	if (!event)
		return 0;
	event->retval = ctx->ret;
	bpf_get_current_comm(&event->comm, sizeof(event->comm));
	len = BASE_EVENT_SIZE + event->args_size;
	if (len <= sizeof(*event)) {
		bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, event, len);
		bpf_ringbuf_output(&rb, event, len, 0);
	}
	bpf_map_delete_elem(&execs, &pid);
	return 0;
}
