// SPDX-License-Identifier: Apache-2.0
/* A traced program for bpfkit's USDT tests (integration/test_usdt.py).
 *
 * Probes (sys/sdt.h from systemtap-sdt-dev):
 *   bpfkit:tick   one site, with a semaphore; args: i (register), 5 (constant),
 *                 a stack slot, -(i+1) (negative signed), i * 10^12 (64-bit), (signed char)-i
 *   bpfkit:twice  two sites (two functions in usdt_twice.c), no semaphore; args: which
 *                 site (1 or 2), i
 *
 * Commands on stdin, one per line; every command answers one line on stdout:
 *   fire N     fire bpfkit:tick N times (i = 0..N-1)  -> "fired N enabled E" (E: times the
 *              BPFKIT_TICK_ENABLED() guard was true, i.e. the semaphore was raised)
 *   twice N    fire both bpfkit:twice sites N times   -> "twice N"
 *   sema       the semaphore's value                   -> "sema V"
 *   pid                                                -> "pid P"
 *   quit                                               -> exits
 */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sdt.h>

/* The semaphore the kernel raises while a uprobe with ref_ctr_offset is attached
 * (sys/sdt.h's naming: PROVIDER_NAME_semaphore, in section .probes). */
__extension__ unsigned short bpfkit_tick_semaphore __attribute__((unused)) __attribute__((section(".probes")));
#define BPFKIT_TICK_ENABLED() __builtin_expect(bpfkit_tick_semaphore, 0)

static int __attribute__((noinline)) tick(int i)
{
	volatile int stackval = 1000 + i; /* lives in memory: an N@OFF(%rbp) argument */
	int neg = -(i + 1);
	long long big = (long long)i * 1000000000000LL;
	signed char c = (signed char)-i;
	int enabled = 0;

	if (BPFKIT_TICK_ENABLED())
		enabled = 1;
	STAP_PROBE6(bpfkit, tick, i, 5, stackval, neg, big, c);
	return enabled;
}

/* usdt_twice.c: built without semaphores, so those probes have none. */
void twice_a(int i);
void twice_b(int i);

int main(void)
{
	char line[128];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		int n = 0;

		if (sscanf(line, "fire %d", &n) == 1) {
			int enabled = 0;
			for (int i = 0; i < n; i++)
				enabled += tick(i);
			printf("fired %d enabled %d\n", n, enabled);
		} else if (sscanf(line, "twice %d", &n) == 1) {
			for (int i = 0; i < n; i++) {
				twice_a(i);
				twice_b(i);
			}
			printf("twice %d\n", n);
		} else if (strncmp(line, "sema", 4) == 0) {
			printf("sema %u\n", (unsigned)bpfkit_tick_semaphore);
		} else if (strncmp(line, "pid", 3) == 0) {
			printf("pid %d\n", (int)getpid());
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}
