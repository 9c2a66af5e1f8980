/* SPDX-License-Identifier: Apache-2.0 */
// What every libbpf harness of benchmarks/ shares: clocks and a quiet libbpf.
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <bpf/libbpf.h>

static inline double clock_seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Wall time (monotonic), seconds.
static inline double now(void)
{
	return clock_seconds(CLOCK_MONOTONIC);
}

// CPU time of the process (user + system, the kernel's work for it included), seconds.
static inline double cpu(void)
{
	return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

// libbpf's warnings only (libbpf_set_print(quiet)).
static inline int quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, args) : 0;
}
#endif
