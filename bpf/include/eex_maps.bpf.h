/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counter and histogram helpers for bpfkit's test objects in ebpf_exporter's style (bpf/eex_*.bpf.c,
 * served by `bpfkit exporter` with the configs of integration/ebpf_exporter/):
 *
 *   increment_map(map, key, n)     adds n to a u64 value, creating the key at 0 first (hash maps)
 *   eex_exp2_bucket(v)             the smallest i with v <= 2^i (0 for v <= 1): exp2's bucket
 *   eex_observe(map, key, v, max)  key.bucket (set by the caller) clamped to max gets +1, and the
 *                                  key max + 1 gets +v: ebpf_exporter reads that key as the sum of
 *                                  the observations (its README, "sum keys")
 *   eex_observe_exp2 / _exp2zero   the bucket by ebpf_exporter's exp2 / exp2zero rules, then observe
 *
 * and `eex_target`, a one-slot array the test fills with the tgid of its workload process after the
 * exporter has loaded the object (by the map ids of the programs the exporter reports): eex_mine()
 * is true only in that process, so the counts are exact beside any other activity. Until the test
 * fills it the slot is 0 and nothing is counted. Needs vmlinux.h and <bpf/bpf_helpers.h> first. */
#ifndef BPFKIT_EEX_MAPS_BPF_H
#define BPFKIT_EEX_MAPS_BPF_H

#include "log2.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} eex_target SEC(".maps");

static __always_inline int eex_mine(void)
{
	__u32 zero = 0;
	__u32 *tgid = bpf_map_lookup_elem(&eex_target, &zero);

	return tgid && *tgid && *tgid == (__u32)(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void increment_map(void *map, void *key, __u64 n)
{
	__u64 *value = bpf_map_lookup_elem(map, key);

	if (!value) {
		__u64 zero = 0;

		/* BPF_NOEXIST: another CPU may have created it meanwhile; then look it up again. */
		bpf_map_update_elem(map, key, &zero, BPF_NOEXIST);
		value = bpf_map_lookup_elem(map, key);
		if (!value)
			return;
	}
	__sync_fetch_and_add(value, n);
}

static __always_inline __u64 eex_exp2_bucket(__u64 v)
{
	return v <= 1 ? 0 : log2l(v - 1) + 1;
}

/* `key` is a struct with a u64 `bucket` field, the last one (the histogram's bucket label). */
#define eex_observe(map, key, v, max)                                  \
	do {                                                           \
		if ((key).bucket > (max))                              \
			(key).bucket = (max);                          \
		increment_map(map, &(key), 1);                         \
		if ((v) > 0) {                                         \
			(key).bucket = (max) + 1;                      \
			increment_map(map, &(key), (v));               \
		}                                                      \
	} while (0)

/* exp2: v lands in bucket i, le = 2^i * bucket_multiplier. */
#define eex_observe_exp2(map, key, v, max)                             \
	do {                                                           \
		(key).bucket = eex_exp2_bucket(v);                     \
		eex_observe(map, key, v, max);                         \
	} while (0)

/* exp2zero: 0 has bucket 0 (le 0); v > 0 lands one bucket above exp2's, le = 2^(i-1) * multiplier. */
#define eex_observe_exp2zero(map, key, v, max)                         \
	do {                                                           \
		(key).bucket = (v) ? eex_exp2_bucket(v) + 1 : 0;       \
		eex_observe(map, key, v, max);                         \
	} while (0)

#endif
