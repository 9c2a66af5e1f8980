// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter's section names, auto-attached by bpfkit (tests/test_eex_sections.py):
// SEC("perf_event/type=T,config=C,frequency=F") samples a counter on every online CPU and
// SEC("xdp/IFACE") goes on that interface. Beside them, sections that keep libbpf's meaning and
// are passed over by auto-attach: a bare SEC("perf_event") and SEC("xdp/devmap").
// Slots of `counts`: 0 cpu-clock samples, 1 XDP frames of EtherType EEX_ETHERTYPE.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define COUNT_SLOTS 2
#include "counts.h"

/* IEEE 802 local experimental EtherType: frames only the test sends. */
#define EEX_ETHERTYPE 0x88B5

/* The leading fields of struct xdp_md, declared here so the program needs no CO-RE. */
struct eex_xdp_md {
	__u32 data;
	__u32 data_end;
};

struct eex_ethhdr {
	__u8 h_dest[6];
	__u8 h_source[6];
	__be16 h_proto;
} __attribute__((packed));

/* PERF_TYPE_SOFTWARE (1), PERF_COUNT_SW_CPU_CLOCK (0), 99 samples a second on each CPU. */
SEC("perf_event/type=1,config=0,frequency=99")
int eex_cpu_clock(struct bpf_perf_event_data *ctx)
{
	bump(0);
	return 0;
}

/* The interface the test makes in a network namespace of its own. */
SEC("xdp/eexsec0")
int eex_xdp_frames(struct xdp_md *ctx)
{
	struct eex_xdp_md *md = (void *)ctx;
	struct eex_ethhdr *eth = (void *)(long)md->data;

	if ((void *)(eth + 1) > (void *)(long)md->data_end || eth->h_proto != bpf_htons(EEX_ETHERTYPE))
		return XDP_PASS;
	bump(1);
	return XDP_DROP;
}

/* Names no counter: attached by hand (bpfkit.link.perf_event_sample). */
SEC("perf_event")
int eex_bare_perf_event(struct bpf_perf_event_data *ctx)
{
	return 0;
}

/* libbpf's devmap program, run from a devmap entry: not an interface named "devmap". */
SEC("xdp/devmap")
int eex_devmap(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
