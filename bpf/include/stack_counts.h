/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counting stacks the way bpfkit.profile reads them (docs/stacks.md, "The counts convention"):
 * a hash `counts` keyed by struct stack_key (pid, user and kernel stack ids, comm) whose value
 * is a __u64 (samples or a time), and the stack-trace map `stacks` the ids index. Used by the
 * tests' bpf/stacks.bpf.c and by examples/profile and examples/offcputime. */
#ifndef BPFKIT_STACK_COUNTS_H
#define BPFKIT_STACK_COUNTS_H

#ifndef STACK_MAX_DEPTH
#define STACK_MAX_DEPTH 127 /* PERF_MAX_STACK_DEPTH */
#endif

struct stack_key {
	__u32 pid;
	__s32 user_stack_id;   /* bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK), or its error */
	__s32 kernel_stack_id; /* bpf_get_stackid(ctx, &stacks, 0), or its error */
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stack_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, STACK_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* The current task's key: its tgid, both stacks (-EFAULT for a part it has none of: kernel
 * threads have no user stack, a sample in user mode no kernel one) and its name. */
static __always_inline void stack_key_current(void *ctx, struct stack_key *key, __u32 tgid)
{
	key->pid = tgid;
	key->user_stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	key->kernel_stack_id = bpf_get_stackid(ctx, &stacks, 0);
	bpf_get_current_comm(key->comm, sizeof(key->comm));
}

/* counts[key] += value, creating the entry (another CPU may create it first). */
static __always_inline void stack_count(struct stack_key *key, __u64 value)
{
	__u64 zero = 0, *slot = bpf_map_lookup_elem(&counts, key);

	if (!slot) {
		bpf_map_update_elem(&counts, key, &zero, BPF_NOEXIST);
		slot = bpf_map_lookup_elem(&counts, key);
	}
	if (slot)
		__sync_fetch_and_add(slot, value);
}

#endif
