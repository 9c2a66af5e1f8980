// SPDX-License-Identifier: Apache-2.0
/* The bpfkit:twice probe of usdt_target.c: one probe name at two sites, without a semaphore
 * (sys/sdt.h decides per translation unit whether probes have semaphores). */
#include <sys/sdt.h>

void __attribute__((noinline)) twice_a(int i)
{
	STAP_PROBE2(bpfkit, twice, 1, i);
}

void __attribute__((noinline)) twice_b(int i)
{
	STAP_PROBE2(bpfkit, twice, 2, i);
}
