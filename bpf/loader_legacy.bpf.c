// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Old-style objects: maps in the legacy "maps" section (struct bpf_map_def, as samples/bpf and
// pre-BTF tools wrote them), a "version" section asking for the running kernel's version
// (0xFFFFFFFE), and a kprobe program that needs it. A socket filter, run with
// BPF_PROG_TEST_RUN, counts packets by length in the legacy hash map.
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") legacy_hash = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 16,
};

struct bpf_map_def SEC("maps") legacy_array = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 2,
};

SEC("socket")
int count_len(struct __sk_buff *skb)
{
	__u32 len = skb->len, slot = 0;
	__u64 one = 1, *cnt;
	__u32 *flag;

	cnt = bpf_map_lookup_elem(&legacy_hash, &len);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	else
		bpf_map_update_elem(&legacy_hash, &len, &one, BPF_NOEXIST);
	flag = bpf_map_lookup_elem(&legacy_array, &slot);
	if (flag)
		*flag = 0xabcd;
	return 0;
}

SEC("kprobe/do_sys_openat2")
int old_kprobe(void *ctx)
{
	__u32 slot = 1;
	__u32 *flag = bpf_map_lookup_elem(&legacy_array, &slot);

	if (flag)
		*flag += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
__u32 _version SEC("version") = 0xFFFFFFFE;
