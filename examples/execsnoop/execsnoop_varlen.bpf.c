// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// execsnoop_varlen: every execve(2) with its arguments, sent as libbpf-tools' execsnoop sends
// them (execsnoop.h's struct event): sys_enter_execve copies the file name and then argv[1..]
// one after another, each NUL-terminated, into char args[] of an event kept per thread in
// `execs` (args_size: the bytes used; args_count one more than max_args when argv goes on);
// sys_exit_execve adds the result and the new comm and sends the event only up to the end of
// its arguments (offsetof(args) + args_size bytes) through the perf event array `events`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define ARGSIZE 128
#define TASK_COMM_LEN 16
#define TOTAL_MAX_ARGS 60
#define DEFAULT_MAXARGS 20
#define FULL_MAX_ARGS_ARR (TOTAL_MAX_ARGS * ARGSIZE)
#define LAST_ARG (FULL_MAX_ARGS_ARR - ARGSIZE)
#define INVALID_UID ((uid_t)-1)
#define BASE_EVENT_SIZE ((__u64)&((struct event *)0)->args)

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

/* Filters, set before load (.rodata). */
const volatile bool ignore_failed = true;      /* -x clears it */
const volatile uid_t targ_uid = INVALID_UID;   /* -u: only this user */
const volatile int max_args = DEFAULT_MAXARGS; /* --max-args, 1 to TOTAL_MAX_ARGS */
const volatile pid_t targ_ppid = 0;            /* --ppid: only children of this process */

static const struct event empty_event = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, pid_t);  /* tid */
	__type(value, struct event);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct syscall_trace_enter *ctx)
{
	const char **args = (const char **)ctx->args[1];
	__u64 id = bpf_get_current_pid_tgid();
	uid_t uid = (__u32)bpf_get_current_uid_gid();
	pid_t tid = (pid_t)id;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	pid_t ppid = BPF_CORE_READ(task, real_parent, tgid);
	struct event *e;
	const char *argp;
	int ret, i;

	if ((targ_uid != INVALID_UID && targ_uid != uid) || (targ_ppid && targ_ppid != ppid))
		return 0;
	if (bpf_map_update_elem(&execs, &tid, &empty_event, BPF_NOEXIST))
		return 0;
	e = bpf_map_lookup_elem(&execs, &tid);
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->ppid = ppid;
	e->uid = uid;
	/* the file name first, as argv[0] (an empty string when longer than ARGSIZE) */
	ret = bpf_probe_read_user_str(e->args, ARGSIZE, (const char *)ctx->args[0]);
	if (ret < 0)
		return 0;
	if (ret <= ARGSIZE) {
		e->args_size += ret;
	} else {
		e->args[0] = '\0';
		e->args_size++;
	}
	e->args_count++;
	for (i = 1; i < TOTAL_MAX_ARGS && i < max_args; i++) {
		if (bpf_probe_read_user(&argp, sizeof(argp), &args[i]) || !argp)
			return 0;
		if (e->args_size > LAST_ARG)
			return 0;
		ret = bpf_probe_read_user_str(&e->args[e->args_size], ARGSIZE, argp);
		if (ret < 0)
			return 0;
		e->args_count++;
		e->args_size += ret;
	}
	/* one more argument after max_args: count it, so the tool prints "..." */
	if (bpf_probe_read_user(&argp, sizeof(argp), &args[max_args]) || !argp)
		return 0;
	e->args_count++;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct syscall_trace_exit *ctx)
{
	pid_t tid = (pid_t)bpf_get_current_pid_tgid();
	struct event *e = bpf_map_lookup_elem(&execs, &tid);
	__u64 len;

	if (!e)
		return 0;
	if (ignore_failed && ctx->ret < 0)
		goto cleanup;
	e->retval = ctx->ret;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));  /* the new program's name */
	len = BASE_EVENT_SIZE + e->args_size;
	if (len <= sizeof(*e))
		bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, e, len);
cleanup:
	bpf_map_delete_elem(&execs, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";  /* bpf_perf_event_output is GPL-only */
