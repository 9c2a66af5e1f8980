// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Values that do not fit their types (issue #35, item 9): knobs of every scalar width, floats,
// an enum, a char array and a struct with nested arrays, for `bpfkit load --set` with hostile
// words; a typed hash map for writes from Python that must fail cleanly and change nothing;
// a .bss variable for skeleton writes. The program counts getppid() calls of knob_pid.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

enum vh_mode { VH_OFF = 0, VH_ON = 1, VH_MANY = 0xffffffff };

struct vh_pair {
	__u16 port;
	char name[6];
};

struct vh_value {
	__u8 small;
	__s64 big;
	float ratio;
	double scale;
	char label[8];
	enum vh_mode mode;
	struct vh_pair pairs[2];
	__u32 grid[2][3];
	unsigned int bits : 5;
	int sbits : 3;
	union {
		__u32 as_u32;
		__u8 as_bytes[4];
	} u;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct vh_value);
} vh_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} vh_count SEC(".maps");

// Knobs: `bpfkit load values_hostile.bpf.o DIR --set knob_f=...`.
const volatile __u32 knob_pid = 0;
const volatile __u8 knob_u8 = 1;
const volatile __s64 knob_s64 = -1;
const volatile float knob_f = 1.5;
const volatile double knob_d = 2.5;
const volatile enum vh_mode knob_e = VH_ON;
const volatile bool knob_b = true;
const volatile char knob_s[8] = "abc";
const volatile struct vh_value knob_st = {};
const volatile __u32 knob_arr[4] = {};
// Writable while loaded (skeleton writes).
float live_f = 0;
__u16 live_u16 = 0;
char live_s[4] = "";

SEC("tracepoint/syscalls/sys_enter_getppid")
int vh_count_getppid(void *ctx)
{
	__u32 key = 0;
	__u64 *value;

	if (knob_pid && (bpf_get_current_pid_tgid() >> 32) != knob_pid)
		return 0;
	if (knob_e == VH_OFF || knob_u8 == 0 || !knob_b)
		return 0;
	value = bpf_map_lookup_elem(&vh_count, &key);
	if (value)
		__sync_fetch_and_add(value, live_u16 + 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
