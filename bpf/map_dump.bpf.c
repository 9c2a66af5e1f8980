// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Maps whose BTF covers what bpftool's btf_dumper prints (tools/bpf/bpftool/btf_dumper.c):
// a hash keyed by a struct with char[] strings, enums (signed, 64-bit), nested structs, a union,
// bitfields, a bool, a pointer, a 128-bit int, arrays of ints and of structs, an anonymous
// member and a typedef'd char array; per-CPU hash and array; .bss/.data/.rodata globals.
// integration/test_map_dump_bpftool.py fills them and compares `bpfkit map dump --json` with
// `bpftool -j map dump`. The socket filter (run with BPF_PROG_TEST_RUN) writes one record.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

enum dump_state { DS_IDLE = 0, DS_RUN = 1, DS_BLOCKED = 7, DS_NEG = -3 };
enum dump_wide { DW_SMALL = 1, DW_BIG = 0x100000000ULL };
typedef char dump_tchar;

struct dump_key {
	__u32 pid;
	char name[8];
};

struct dump_inner {
	__u16 port;
	__s8 delta;
	unsigned char raw[3];
};

union dump_word {
	__u32 u;
	__s16 halves[2];
	unsigned char bytes[4];
};

struct dump_rec {
	char comm[16];
	enum dump_state state;
	__s32 neg;
	__u64 count;
	struct dump_inner in;
	union dump_word w;
	unsigned int flag_a : 1, mode : 3, level : 12;
	bool ok;
	char c;
	__u32 arr[3];
	struct dump_inner pair[2];
	void *ptr;
	struct {
		__u8 x;
		__s8 y;
	};
	enum dump_wide wide;
	dump_tchar tag[4];
	unsigned __int128 big;
};

struct dump_pc {
	__u64 packets;
	__s32 last;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct dump_key);
	__type(value, struct dump_rec);
} recs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct dump_inner);
} inners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct dump_pc);
} pc_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __s64);
} pc_array SEC(".maps");

const volatile __u32 rd_limit = 42;
const volatile char rd_name[8] = "dump";
const volatile enum dump_state rd_state = DS_RUN;
__u64 bss_counter;
struct dump_inner bss_inner;
int data_val = -5;
char data_msg[12] = "hello";

SEC("socket")
int dump_fill(struct __sk_buff *skb)
{
	struct dump_key key = { .pid = skb->len, .name = "prog" };
	struct dump_rec rec = {};

	rec.state = rd_state;
	rec.count = rd_limit;
	rec.level = 5;
	rec.ok = true;
	__builtin_memcpy(rec.comm, "from-bpf", 9);
	bpf_map_update_elem(&recs, &key, &rec, BPF_ANY);
	bss_counter += 1;
	bss_inner.port = 80;
	data_val += 1;
	return 0;
}
