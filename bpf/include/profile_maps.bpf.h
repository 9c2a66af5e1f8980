/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The lookup-or-create step of the profile_*.bpf.c test objects, as libbpf-tools' maps.bpf.h
 * offers it (bpf_map_lookup_or_try_init): the entry for key, made from init when missing
 * (another CPU may make it first: BPF_NOEXIST then fails, and the lookup finds theirs). */
#ifndef BPFKIT_PROFILE_MAPS_BPF_H
#define BPFKIT_PROFILE_MAPS_BPF_H

static __always_inline void *lookup_or_try_init(void *map, const void *key, const void *init)
{
	void *val = bpf_map_lookup_elem(map, key);

	if (val)
		return val;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

#endif
