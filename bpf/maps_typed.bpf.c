// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Typed maps and knobs (issue #21): maps whose keys and values are declared through BTF with
// every shape bpfkit.btf.values decodes (nested structs, unions, bitfields, enums, char arrays,
// arrays of structs, anonymous members, per-CPU values), and `const volatile` knobs that the
// program obeys. The program runs on the getpgid() syscall of the process in target_pid (0: any).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

enum mt_color { MT_RED = 0, MT_GREEN = 1, MT_BLUE = 7 };
enum mt_sign { MT_NEG = -1, MT_POS = 1 };

struct mt_inner {
	__u16 port;
	__u8 proto;
};

union mt_addr {
	__u32 v4;
	__u8 v6[16];
};

struct mt_flags {
	unsigned int a : 3;
	unsigned int b : 5;
	int c : 4;
	unsigned int d : 20;
	enum mt_color e : 3;
};

struct mt_key {
	__u32 pid;
	char comm[16];
};

struct mt_value {
	__u64 count;
	__s32 delta;
	enum mt_color color;
	enum mt_sign sign;
	char comm[16];
	struct mt_inner in;
	union mt_addr addr;
	struct mt_flags fl;
	struct mt_inner hops[3];
	__u32 slots[4];
	_Bool on;
	union {
		__u32 anon_u;
		__u16 anon_h;
	};
	struct {
		__u8 x, y;
	};
	void *ptr;
	unsigned char raw[4];
	__u8 mac[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct mt_key);
	__type(value, struct mt_value);
} typed_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct mt_inner);
} typed_pcpu_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} typed_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} typed_pcpu_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32);
	__type(key, __u64);
	__type(value, enum mt_color);
} typed_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 16);
	__type(value, struct mt_inner);
} typed_queue SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, 16);
	__type(value, __u32);
} typed_stack SEC(".maps");

// Knobs, set before loading (bpfkit attach --set NAME=VALUE).
const volatile __u32 target_pid = 0;
const volatile bool enabled = true;
const volatile __s32 delta = -1;
const volatile enum mt_color color = MT_GREEN;
const volatile char tag[8] = "tag";
static const volatile __u32 hidden_knob = 3;
// Globals (.bss / .data): writable while loaded too.
__u64 hits = 0;
__u32 step = 1;

SEC("tracepoint/syscalls/sys_enter_getpgid")
int on_getpgid(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct mt_key key = {};
	struct mt_value *v, zero = {};
	struct mt_inner in = {};
	__u32 i = 0;
	__u64 *cnt;

	if (target_pid && pid != target_pid)
		return 0;
	if (!enabled)
		return 0;
	__sync_fetch_and_add(&hits, step);
	key.pid = pid;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	v = bpf_map_lookup_elem(&typed_hash, &key);
	if (!v) {
		bpf_map_update_elem(&typed_hash, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&typed_hash, &key);
		if (!v)
			return 0;
	}
	v->count += 1;
	v->delta = delta + hidden_knob - 3;
	v->color = color;
	v->sign = MT_NEG;
	for (int j = 0; j < sizeof(tag); j++)
		v->comm[j] = tag[j];  /* volatile reads: a cast to void * would let clang fold "tag" */
	v->in.port = 8080;
	v->in.proto = 6;
	v->addr.v4 = 0x0100007f;
	v->fl.a = 5;
	v->fl.b = 17;
	v->fl.c = -3;
	v->fl.d = 1000000;
	v->fl.e = MT_BLUE;
	v->hops[2].port = 53;
	v->slots[3] = 42;
	v->on = 1;
	v->anon_u = 0xabcd;
	v->y = 9;
	v->raw[0] = 0xff;
	v->mac[5] = 1;
	in.port = (__u16)pid;
	in.proto = 17;
	bpf_map_update_elem(&typed_pcpu_hash, &pid, &in, BPF_ANY);
	bpf_map_push_elem(&typed_queue, &in, BPF_EXIST);
	cnt = bpf_map_lookup_elem(&typed_array, &i);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	cnt = bpf_map_lookup_elem(&typed_pcpu_array, &i);
	if (cnt)
		*cnt += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
