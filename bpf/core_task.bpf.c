// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// CO-RE reads of the current task, compiled once against the build host's vmlinux.h and
// loaded unmodified on other kernels (integration/test_core.py runs it on the host and in
// 5.10/6.1 VMs). Every CO-RE relocation kind appears at least once:
//   BPF_CORE_READ chains (field byte offsets), bpf_core_field_{exists,size,offset},
//   BPF_CORE_READ_BITFIELD_PROBED (byte size, lshift, rshift, signed), type ids (local and
//   kernel), type exists/size/matches, enumerator exists/value, and ___flavor structs for
//   task_struct's state, renamed to __state in 5.14.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// The field as it was before 5.14 ...
struct task_struct___o {
	volatile long state;
} __attribute__((preserve_access_index));

// ... and since (commit 2f064a59a11f "sched: Change task_struct::state").
struct task_struct___n {
	unsigned int __state;
} __attribute__((preserve_access_index));

// A field no kernel has: its existence check must say 0.
struct task_struct___fake {
	int bpfkit_no_such_field;
} __attribute__((preserve_access_index));

// A type no kernel has.
struct bpfkit_no_such_type {
	int x;
};

// Local definitions for bpf_core_type_matches: the first fits the kernel's list_head,
// the second does not (next is a pointer in the kernel).
struct list_head___good {
	struct list_head___good *next, *prev;
};
struct list_head___bad {
	int next;
};

struct core_result {
	__u64 hits;
	__s32 pid;
	__s32 tgid;
	__s32 ppid;
	__s32 gppid;               // the parent's parent, a 3-step chain
	__s32 leader_pid;
	__u32 state_flavor;        // 1: read through __state, 2: through state
	__u64 state;
	__u32 has_new_state;       // bpf_core_field_exists(__state)
	__u32 has_old_state;       // bpf_core_field_exists(state)
	__u32 has_fake_field;
	__u32 has_task_struct;     // bpf_core_type_exists
	__u32 has_missing_type;
	__u32 has_bpf_dynptr;      // struct bpf_dynptr: 5.19+
	__u32 task_size;           // bpf_core_type_size(struct task_struct)
	__u32 comm_size;           // bpf_core_field_size(task->comm)
	__u32 comm_offset;         // bpf_core_field_offset(task->comm)
	__u32 local_type_id;       // bpf_core_type_id_local(struct task_struct)
	__u32 kernel_type_id;      // bpf_core_type_id_kernel(struct task_struct)
	__u32 list_head_matches;
	__u32 list_head_bad_matches;
	__u32 has_cgrp_storage_get; // enum bpf_func_id BPF_FUNC_cgrp_storage_get: 6.2+
	__u32 has_fake_enumval;
	__u64 func_max_id;          // bpf_core_enum_value(enum bpf_func_id, __BPF_FUNC_MAX_ID)
	__u64 ringbuf_type;         // bpf_core_enum_value(enum bpf_map_type, BPF_MAP_TYPE_RINGBUF)
	__u64 tgid_bits;            // BPF_CORE_READ_BITFIELD_PROBED on a plain int field
	__u64 reset_on_fork;        // ... and on real one-bit fields
	__u64 in_execve;
	__u32 tgid_signed;          // bpf_core_field_signed(task->tgid)
	__u32 pad;
	char comm[16];
	char nodename[65];          // task->nsproxy->uts_ns->name.nodename
};

// A local enum with an enumerator no kernel has, flavored so it finds enum bpf_func_id.
enum bpf_func_id___fake {
	BPFKIT_FUNC_NO_SUCH_HELPER___fake = 1,
};

const volatile __u32 target_tgid;
struct core_result result;

SEC("tracepoint/syscalls/sys_enter_getppid")
int core_task(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct core_result *r = &result;

	if (bpf_get_current_pid_tgid() >> 32 != target_tgid)
		return 0;
	r->hits++;
	r->pid = BPF_CORE_READ(task, pid);
	r->tgid = BPF_CORE_READ(task, tgid);
	r->ppid = BPF_CORE_READ(task, real_parent, tgid);
	r->gppid = BPF_CORE_READ(task, real_parent, real_parent, tgid);
	r->leader_pid = BPF_CORE_READ(task, group_leader, pid);
	BPF_CORE_READ_STR_INTO(&r->comm, task, comm);
	BPF_CORE_READ_STR_INTO(&r->nodename, task, nsproxy, uts_ns, name.nodename);

	r->has_new_state = bpf_core_field_exists(((struct task_struct___n *)task)->__state);
	r->has_old_state = bpf_core_field_exists(((struct task_struct___o *)task)->state);
	r->has_fake_field = bpf_core_field_exists(((struct task_struct___fake *)task)->bpfkit_no_such_field);
	if (bpf_core_field_exists(((struct task_struct___n *)task)->__state)) {
		r->state = BPF_CORE_READ((struct task_struct___n *)task, __state);
		r->state_flavor = 1;
	} else {
		r->state = BPF_CORE_READ((struct task_struct___o *)task, state);
		r->state_flavor = 2;
	}

	r->has_task_struct = bpf_core_type_exists(struct task_struct);
	r->has_missing_type = bpf_core_type_exists(struct bpfkit_no_such_type);
	r->has_bpf_dynptr = bpf_core_type_exists(struct bpf_dynptr);
	r->task_size = bpf_core_type_size(struct task_struct);
	r->comm_size = bpf_core_field_size(task->comm);
	r->comm_offset = bpf_core_field_offset(task->comm);
	r->local_type_id = bpf_core_type_id_local(struct task_struct);
	r->kernel_type_id = bpf_core_type_id_kernel(struct task_struct);
	r->list_head_matches = bpf_core_type_matches(struct list_head___good);
	r->list_head_bad_matches = bpf_core_type_matches(struct list_head___bad);

	r->has_cgrp_storage_get = bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_cgrp_storage_get);
	r->has_fake_enumval = bpf_core_enum_value_exists(enum bpf_func_id___fake, BPFKIT_FUNC_NO_SUCH_HELPER___fake);
	r->func_max_id = bpf_core_enum_value(enum bpf_func_id, __BPF_FUNC_MAX_ID);
	r->ringbuf_type = bpf_core_enum_value(enum bpf_map_type, BPF_MAP_TYPE_RINGBUF);

	r->tgid_bits = BPF_CORE_READ_BITFIELD_PROBED(task, tgid);
	r->tgid_signed = __builtin_preserve_field_info(task->tgid, BPF_FIELD_SIGNED);
	r->reset_on_fork = BPF_CORE_READ_BITFIELD_PROBED(task, sched_reset_on_fork);
	r->in_execve = BPF_CORE_READ_BITFIELD_PROBED(task, in_execve);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
