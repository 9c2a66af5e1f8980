// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// ebpf_exporter-style sections bpfkit must refuse with an error naming the program, the section
// and what is wrong (tests/test_eex_sections.py): every program loads (its type is right), and
// each fails when auto-attached.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("perf_event/type=1,config=0,frequency=99,period=5")
int eex_unknown_item(struct bpf_perf_event_data *ctx)
{
	return 0;
}

SEC("perf_event/type=software,config=0,frequency=99")
int eex_not_integer(struct bpf_perf_event_data *ctx)
{
	return 0;
}

/* No frequency: ebpf_exporter would open an event that never samples. */
SEC("perf_event/type=1,config=0")
int eex_no_frequency(struct bpf_perf_event_data *ctx)
{
	return 0;
}

/* An interface no test makes. */
SEC("xdp/eexnowhere0")
int eex_no_iface(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
