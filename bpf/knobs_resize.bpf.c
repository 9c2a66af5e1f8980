// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// A global-data array resized before load (issue #39: `--map-size .data.dump.value_size=N`, scx's
// RESIZE_ARRAY). dump[] is the last variable of its own section, .data.dump, declared with 8
// bytes; mark() writes byte `at` of it, a frozen .rodata knob the verifier reads as a constant,
// so an `at` past the declared size loads only once the section was resized. notarr's section
// ends in a scalar, which cannot be resized.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 at = 0;
/* scx's user space copies the kernel's enum values into such u64 constants: __SCX_TASK_CURSOR
 * is 1 << 31 in a signed enum, so -2147483648 (test_cli_knobs_39.py). */
const volatile __u64 task_cursor = 0;

__u32 dump_hdr SEC(".data.dump") = 7;
char dump[8] SEC(".data.dump") = "abc";

__u64 notarr SEC(".data.notarr") = 1;

SEC("xdp")
int mark(struct xdp_md *ctx)
{
	dump[at] = 0x5a;
	dump_hdr += task_cursor != 0;
	dump_hdr += 1;
	notarr += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
