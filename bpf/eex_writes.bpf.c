// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style histograms of write() sizes in the test's workload (eex_target), one per
// bucket_type of integration/ebpf_exporter/eex_writes.yaml. Each map's key ends in a u64 bucket,
// and the key one past the last bucket holds the sum of the observations (ebpf_exporter's "sum key"):
//   eex_write_size_kilobytes        exp2, key {u32 fd; 4 bytes padding; u64 bucket}, buckets 0..10:
//                                   bytes in bucket ceil(log2(bytes)), sum in bytes; the config's
//                                   bucket_multiplier 0.001 makes both kilobytes
//   eex_write_size_bytes            exp2zero, key u64 bucket, buckets 0..12: 0 bytes in bucket 0,
//                                   n > 0 in ceil(log2(n)) + 1
//   eex_write_size_linear_bytes     linear, an array, key u32 bucket, buckets 0..10: bytes / 100, the sum in
//                                   hundreds of bytes too (bytes / 100 each), as the multiplier 100
//                                   scales both
//   eex_write_size_fixed_bytes      fixed, keys 1, 10, 100, 1000, 10000: the first key >= bytes
//                                   (10000 for more), the sum at key 10001
//   eex_write_size_from8_bytes      exp2, key u64 bucket, buckets 0..8 stored; the config's
//                                   bucket_min 3 leaves 0..2 out of the buckets and _count (not the sum)
// Observations above the last bucket land in it (the sum keeps their true size).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "eex_maps.bpf.h"

#define EXP2_MAX 10
#define EXP2ZERO_MAX 12
#define LINEAR_STEP 100
#define LINEAR_MAX 10
#define FIXED_LAST 10000
#define FROM8_MAX 8

struct eex_fd_bucket {
	__u32 fd;
	/* 4 bytes of padding: bucket is 8-byte aligned */
	__u64 bucket;
};

struct eex_bucket {
	__u64 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct eex_fd_bucket);
	__type(value, __u64);
} eex_write_size_kilobytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EXP2ZERO_MAX + 2);
	__type(key, struct eex_bucket);
	__type(value, __u64);
} eex_write_size_bytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LINEAR_MAX + 2);
	__type(key, __u32);
	__type(value, __u64);
} eex_write_size_linear_bytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, struct eex_bucket);
	__type(value, __u64);
} eex_write_size_fixed_bytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FROM8_MAX + 2);
	__type(key, struct eex_bucket);
	__type(value, __u64);
} eex_write_size_from8_bytes SEC(".maps");

static __always_inline __u64 eex_fixed_key(__u64 bytes)
{
	if (bytes <= 1)
		return 1;
	if (bytes <= 10)
		return 10;
	if (bytes <= 100)
		return 100;
	if (bytes <= 1000)
		return 1000;
	return FIXED_LAST;
}

static __always_inline void eex_add(void *array, __u32 slot, __u64 n)
{
	__u64 *value = bpf_map_lookup_elem(array, &slot);

	if (value)
		__sync_fetch_and_add(value, n);
}

SEC("tracepoint/syscalls/sys_enter_write")
int eex_enter_write(struct trace_event_raw_sys_enter *ctx)
{
	struct eex_fd_bucket by_fd;
	struct eex_bucket key = {};
	__u64 bytes = ctx->args[2];
	__u32 slot;

	if (!eex_mine())
		return 0;

	__builtin_memset(&by_fd, 0, sizeof(by_fd)); /* the padding is part of the key */
	by_fd.fd = ctx->args[0];
	eex_observe_exp2(&eex_write_size_kilobytes, by_fd, bytes, EXP2_MAX);

	eex_observe_exp2zero(&eex_write_size_bytes, key, bytes, EXP2ZERO_MAX);
	eex_observe_exp2(&eex_write_size_from8_bytes, key, bytes, FROM8_MAX);

	/* An array (every key preallocated, as arrays are): the bucket and the sum slot. */
	slot = bytes / LINEAR_STEP;
	eex_add(&eex_write_size_linear_bytes, slot > LINEAR_MAX ? LINEAR_MAX : slot, 1);
	eex_add(&eex_write_size_linear_bytes, LINEAR_MAX + 1, bytes / LINEAR_STEP);

	key.bucket = eex_fixed_key(bytes);
	increment_map(&eex_write_size_fixed_bytes, &key, 1);
	if (bytes) {
		key.bucket = FIXED_LAST + 1;
		increment_map(&eex_write_size_fixed_bytes, &key, bytes);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
