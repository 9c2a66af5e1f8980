// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// C names that break a generated skeleton module when they become Python names as they are
// (issue 35; tests/test_skelgen_hostile.py): `_skel` hides the module's alias of
// bpfkit.skeleton in the class body; `ｏｐｅｎ` (fullwidth) and `ﬁx` (a ligature) are `open`
// and `fix` to Python, which normalises identifiers with NFKC; `default_object` and `_codecs`
// are names of the Skeleton class; `q²` is no identifier at all (NFKC: `q2`); `mro` is refused
// as an enum member; record fields `str` and `list` hide the builtins later annotations name.
// clang (C11 Annex D) takes all of these as identifiers.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

enum skel_hostile_mode { mro = 1, value = 2, plain = 3 };

struct skel_hostile_rec {
	__u32 str;
	__u32 list;
	char comm[8];
	__u32 counts[2];
	__u32 ﬁeld;
};

const volatile enum skel_hostile_mode mode = plain;
__u32 default_object = 1;
__u32 _codecs = 2;
__u32 ﬁx = 3;
__u32 fix = 4;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct skel_hostile_rec);
} q² SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int _skel(void *ctx)
{
	return mode + default_object + _codecs + ﬁx + fix;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int ｏｐｅｎ(void *ctx)
{
	__u32 key = 0;
	struct skel_hostile_rec *rec = bpf_map_lookup_elem(&q², &key);

	if (rec)
		rec->str += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
