// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// bpfkit's bundled example: an opensnoop-like tracer. Every openat(2) (the
// syscalls:sys_enter_openat tracepoint) and every libc fopen() call (a uprobe) sends one
// `struct event` through the ring buffer `events`:
//
//     make -C bpf                                    # builds bpf/.output/cli_opensnoop.bpf.o
//     bpfkit attach bpf/.output/cli_opensnoop.bpf.o --events events
//
// `bpfkit attach` prints each record decoded through this object's BTF (`struct event`).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define NAME_LEN 128

enum source { SOURCE_OPENAT = 0, SOURCE_FOPEN = 1, SOURCE_KPROBE = 2 };

struct event {
	__u64 ts_ns;
	__u32 pid;
	__u32 uid;
	__s32 flags;
	__u32 source; /* enum source */
	char comm[16];
	char filename[NAME_LEN];
};

/* Puts `struct event` into the object's BTF (a type used only inside functions is not), so
 * `bpfkit attach --events events` can decode the records. */
struct event *unused_event __attribute__((unused));

/* Only this process when non-zero (set before load). */
const volatile __u32 targ_pid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline int emit(const char *filename, __s32 flags, __u32 source)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct event *e;

	if (targ_pid && pid != targ_pid)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = pid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->flags = flags;
	e->source = source;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (bpf_probe_read_user_str(e->filename, sizeof(e->filename), filename) < 0)
		e->filename[0] = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * The context layouts are spelled out here rather than taken from vmlinux.h, whose types carry
 * preserve_access_index: that would make CO-RE relocations, which this example does not need.
 * A syscalls:sys_enter_* record: the 8-byte common header, the syscall nr, then six arguments
 * (tracefs events/syscalls/sys_enter_openat/format).
 */
struct sys_enter_args {
	__u64 common;
	__s64 nr;
	__u64 args[6];
};

/* x86_64 struct pt_regs (arch/x86/include/asm/ptrace.h): the first argument is in rdi. */
struct x86_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di;
	__u64 orig_ax, ip, cs, flags, sp, ss;
};

SEC("tracepoint/syscalls/sys_enter_openat")
int handle_openat(struct sys_enter_args *ctx)
{
	return emit((const char *)ctx->args[1], (__s32)ctx->args[2], SOURCE_OPENAT);
}

SEC("uprobe/libc.so.6:fopen")
int handle_fopen(struct x86_regs *ctx)
{
	return emit((const char *)ctx->di, 0, SOURCE_FOPEN);
}

/*
 * A kprobe on the kernel's open path, for kernels with kprobes: its section names no target,
 * so `bpfkit attach` without a SPEC skips it; attach it with
 *     bpfkit attach cli_opensnoop.bpf.o kprobe:do_sys_openat2 --program handle_kprobe --events events
 * The file name is the second argument (rsi) of both do_sys_openat2(dfd, filename, how) and
 * do_sys_open(dfd, filename, flags, mode). (On 6.1 the openat syscall reaches do_sys_openat2
 * through an inlined do_sys_open, so a kprobe on do_sys_open attaches but sees no openat.)
 */
SEC("kprobe")
int handle_kprobe(struct x86_regs *ctx)
{
	return emit((const char *)ctx->si, 0, SOURCE_KPROBE);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
