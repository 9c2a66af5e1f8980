// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The loader's vertical slice: BTF-defined maps (array, hash, ring buffer), every kind of global
// data (.rodata knobs, .data, .bss, custom .data.* / .rodata.* sections), a tracepoint that
// sends records through the ring buffer, and an XDP program run with BPF_PROG_TEST_RUN that
// reads and writes the globals.
/* vmlinux.h types without preserve_access_index: plain offsets, no CO-RE relocations. */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct event {
	__u32 pid;
	__u32 seq;
	__u64 magic;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096 * 4);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u64));
} results SEC(".maps");

const volatile __u32 target_tgid = 0;      /* .rodata: set before load */
const volatile __u64 magic = 0x1122334455667788ULL;
const volatile __s32 bias = -5;
__u64 data_counter = 40;                    /* .data */
__u32 data_array[4] = {1, 2, 3, 4};
__u64 bss_counter;                          /* .bss */
__u32 custom_value SEC(".data.custom") = 7; /* custom data section */
const volatile __u32 custom_const SEC(".rodata.custom") = 9;
static __u32 seq;                           /* a static in .bss */

SEC("tracepoint/syscalls/sys_enter_getppid")
int tp_getppid(void *ctx)
{
	struct event *e;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (target_tgid && pid != target_tgid)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = pid;
	e->seq = ++seq;
	e->magic = magic;
	bpf_ringbuf_submit(e, 0);
	__sync_fetch_and_add(&bss_counter, 1);
	return 0;
}

SEC("xdp")
int xdp_globals(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 value;
	__u64 *cnt;

	data_counter += 2;
	bss_counter += 1;
	value = magic;
	bpf_map_update_elem(&results, &key, &value, BPF_ANY);
	key = 1;
	value = data_counter + data_array[3] + custom_value + custom_const;
	bpf_map_update_elem(&results, &key, &value, BPF_ANY);
	key = 2;
	value = (__u64)(__s64)bias;
	bpf_map_update_elem(&results, &key, &value, BPF_ANY);
	key = 7;
	cnt = bpf_map_lookup_elem(&counts, &key);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	else {
		value = 1;
		bpf_map_update_elem(&counts, &key, &value, BPF_NOEXIST);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
