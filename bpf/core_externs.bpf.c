// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Externs resolved at load time, as libbpf resolves them:
//   __kconfig  LINUX_KERNEL_VERSION and LINUX_HAS_SYSCALL_WRAPPER (computed by the loader),
//              CONFIG_* from the kernel's configuration (bool, tristate, int, string), and a
//              __weak option no kernel has (0);
//   __ksym     an untyped symbol (schedule, through /proc/kallsyms), __weak ones no kernel
//              has (NULL), and in a second program (not auto-loaded) a typed per-CPU variable
//              (runqueues, through kernel BTF: the kernel then needs its address from
//              kallsyms, so CONFIG_KALLSYMS_ALL);
//   kfuncs     bpf_rcu_read_lock/unlock (6.2+), __weak and called only when
//              bpf_ksym_exists() says the kernel has them; and one no kernel has.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))  /* libbpf 1.2's macro, minus its static assert */
#endif

extern __u32 LINUX_KERNEL_VERSION __kconfig;
extern bool LINUX_HAS_SYSCALL_WRAPPER __kconfig;
extern int CONFIG_HZ __kconfig __weak;
extern enum libbpf_tristate CONFIG_BPF_SYSCALL __kconfig __weak;
extern bool CONFIG_DEBUG_INFO_BTF __kconfig __weak;
extern char CONFIG_DEFAULT_HOSTNAME[16] __kconfig __weak;
extern int CONFIG_BPFKIT_NO_SUCH_OPTION __kconfig __weak;

extern const struct rq runqueues __ksym;             /* typed: per-CPU, kernel BTF VAR */
extern const void schedule __ksym;                   /* untyped: /proc/kallsyms (a function: data
                                                      * symbols need CONFIG_KALLSYMS_ALL) */
extern const void bpfkit_no_such_symbol __ksym __weak;
extern const int bpfkit_no_such_var __ksym __weak;

extern void bpf_rcu_read_lock(void) __ksym __weak;
extern void bpf_rcu_read_unlock(void) __ksym __weak;
extern void bpfkit_no_such_kfunc(void) __ksym __weak;

struct extern_result {
	__u64 hits;
	__u32 kernel_version;
	__u32 has_syscall_wrapper;
	__s32 hz;
	__u32 bpf_syscall;
	__u32 debug_info_btf;
	__s32 no_such_option;
	char default_hostname[16];
	__u64 schedule_addr;
	__u64 no_such_symbol_addr;
	__u64 no_such_var_addr;
	__u32 has_rcu_kfunc;
	__u32 has_no_such_kfunc;
	__u64 rcu_sections;         /* calls made through the kfuncs */
};

const volatile __u32 target_tgid;
struct extern_result result;

SEC("tracepoint/syscalls/sys_enter_getppid")
int core_externs(void *ctx)
{
	struct extern_result *r = &result;

	if (bpf_get_current_pid_tgid() >> 32 != target_tgid)
		return 0;
	r->hits++;
	r->kernel_version = LINUX_KERNEL_VERSION;
	r->has_syscall_wrapper = LINUX_HAS_SYSCALL_WRAPPER;
	r->hz = CONFIG_HZ;
	r->bpf_syscall = CONFIG_BPF_SYSCALL;
	r->debug_info_btf = CONFIG_DEBUG_INFO_BTF;
	r->no_such_option = CONFIG_BPFKIT_NO_SUCH_OPTION;
	__builtin_memcpy(r->default_hostname, CONFIG_DEFAULT_HOSTNAME, sizeof(r->default_hostname));

	r->schedule_addr = (__u64)&schedule;
	r->no_such_symbol_addr = (__u64)&bpfkit_no_such_symbol;
	r->no_such_var_addr = (__u64)&bpfkit_no_such_var;

	r->has_rcu_kfunc = bpf_ksym_exists(bpf_rcu_read_lock);
	if (bpf_ksym_exists(bpf_rcu_read_lock)) {
		bpf_rcu_read_lock();
		r->rcu_sections++;
		bpf_rcu_read_unlock();
	}
	r->has_no_such_kfunc = bpf_ksym_exists(bpfkit_no_such_kfunc);
	if (bpf_ksym_exists(bpfkit_no_such_kfunc))
		bpfkit_no_such_kfunc();
	return 0;
}

__s32 percpu_cpu[2] = {-1, -1};  /* bpf_per_cpu_ptr(&runqueues, cpu)->cpu */
__u64 percpu_hits;

SEC("?tracepoint/syscalls/sys_enter_getppid")
int core_percpu(void *ctx)
{
	struct rq *rq;

	if (bpf_get_current_pid_tgid() >> 32 != target_tgid)
		return 0;
	percpu_hits++;
	rq = bpf_per_cpu_ptr(&runqueues, 0);
	if (rq)
		percpu_cpu[0] = BPF_CORE_READ(rq, cpu);
	rq = bpf_per_cpu_ptr(&runqueues, 1);
	if (rq)
		percpu_cpu[1] = BPF_CORE_READ(rq, cpu);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
