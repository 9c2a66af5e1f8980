// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A profile object written the way libbpf-tools' profile.bpf.c is (tests/test_profile_keys.py,
// integration/test_profile_keys.py): its own key spellings (struct key_t {pid, user_stack_id,
// kern_stack_id, name}), a 4-byte-key filter map `pids` declared before `counts` (a decoy for
// anything that picks "the hash map"), and a stack-trace map whose value_size and max_entries
// are left 0 for user space to set (libbpf-tools' profile.c sizes it from its
// --perf-max-stack-depth and --stack-storage-size). Samples only the process target_tgid.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "profile_maps.bpf.h"

#define TASK_COMM_LEN 16

struct key_t {
	__u32 pid;
	int user_stack_id;
	int kern_stack_id;
	char name[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, u32);
	__type(value, u8);
	__uint(max_entries, 30);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__type(key, u32);
} stackmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct key_t);
	__type(value, u64);
	__uint(max_entries, 10240);
} counts SEC(".maps");

const volatile __u32 target_tgid = 0;

SEC("perf_event")
int do_perf_event(struct bpf_perf_event_data *ctx)
{
	static const u64 zero;
	struct key_t key = {};
	u64 *valp;
	u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (target_tgid && pid != target_tgid)
		return 0;
	key.pid = pid;
	bpf_get_current_comm(&key.name, sizeof(key.name));
	key.kern_stack_id = bpf_get_stackid(&ctx->regs, &stackmap, 0);
	key.user_stack_id = bpf_get_stackid(&ctx->regs, &stackmap, BPF_F_USER_STACK);
	valp = lookup_or_try_init(&counts, &key, &zero);
	if (valp)
		__sync_fetch_and_add(valp, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
