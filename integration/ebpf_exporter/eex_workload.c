// SPDX-License-Identifier: Apache-2.0
// The workload of integration/test_ebpf_exporter_prometheus.py: makes an exact number of syscalls
// (or calls of eex_tick, the target of bpf/eex_uprobe.bpf.c) and nothing else that the test's
// objects count. Built by the test with gcc into its temporary directory.
//
//   eex_workload MODE ARGS...
//
// prints "ready", waits for a line on stdin (the test fills the objects' eex_target with this
// process's pid meanwhile), does MODE's work and exits with _exit(0) without writing anything:
//   getppid N                     N getppid()
//   open DIR ENOENT EISDIR OK     openat(): ENOENT times DIR/missing, EISDIR times DIR for writing,
//                                 OK times /dev/null (each closed)
//   cpus CPU:N:M ...              pinned to CPU (sched_setaffinity), N getppid() then M gettid()
//   writes FD:SIZE,SIZE... ...    /dev/null duplicated to each FD, then one write() per SIZE
//   ticks ARG:N ...               N eex_tick(ARG)
//   comm NAME:N ...               prctl(PR_SET_NAME, NAME), then N getppid()
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static char buffer[1 << 16];

__attribute__((noinline, used)) void eex_tick(unsigned long arg)
{
	__asm__ volatile("" : : "r"(arg) : "memory"); /* not folded away */
}

static void die(const char *what)
{
	perror(what);
	_exit(2);
}

/* "A:B" -> A (a string, cut at the colon) and B (a number). */
static char *split(char *pair, long *n)
{
	char *colon = strchr(pair, ':');

	if (!colon) {
		fprintf(stderr, "expected A:B, got %s\n", pair);
		_exit(2);
	}
	*colon = 0;
	*n = strtol(colon + 1, NULL, 10);
	return pair;
}

/* "FD:SIZE,SIZE...": /dev/null duplicated to FD, then one write() of each SIZE. */
static void writes(char *spec)
{
	char *end;
	long fd = strtol(spec, &end, 10);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (*end != ':')
		die(spec);
	if (null < 0 || dup2(null, fd) < 0)
		die("/dev/null");
	close(null);
	for (char *size = strtok(end + 1, ","); size; size = strtok(NULL, ",")) {
		long n = strtol(size, NULL, 10);

		if (n < 0 || n > (long)sizeof(buffer) || write(fd, buffer, n) != n)
			die("write");
	}
}

int main(int argc, char **argv)
{
	char line[16];

	if (argc < 2)
		return 2;
	setvbuf(stdout, NULL, _IONBF, 0);
	memset(buffer, 'x', sizeof(buffer));
	fputs("ready\n", stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 2;

	if (!strcmp(argv[1], "getppid") && argc == 3) {
		for (long i = strtol(argv[2], NULL, 10); i > 0; i--)
			syscall(SYS_getppid);
	} else if (!strcmp(argv[1], "open") && argc == 6) {
		char missing[4096];

		snprintf(missing, sizeof(missing), "%s/missing", argv[2]);
		for (long i = strtol(argv[3], NULL, 10); i > 0; i--)
			if (open(missing, O_RDONLY | O_CLOEXEC) >= 0)
				die("open missing");
		for (long i = strtol(argv[4], NULL, 10); i > 0; i--)
			if (open(argv[2], O_WRONLY | O_CLOEXEC) >= 0)
				die("open directory for writing");
		for (long i = strtol(argv[5], NULL, 10); i > 0; i--) {
			int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

			if (fd < 0)
				die("/dev/null");
			close(fd);
		}
	} else if (!strcmp(argv[1], "cpus")) {
		for (int a = 2; a < argc; a++) {
			cpu_set_t set;
			long cpu, n, m;

			if (sscanf(argv[a], "%ld:%ld:%ld", &cpu, &n, &m) != 3)
				die(argv[a]);
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			if (sched_setaffinity(0, sizeof(set), &set) < 0)
				die("sched_setaffinity");
			for (; n > 0; n--)
				syscall(SYS_getppid);
			for (; m > 0; m--)
				syscall(SYS_gettid);
		}
	} else if (!strcmp(argv[1], "writes")) {
		for (int a = 2; a < argc; a++)
			writes(argv[a]);
	} else if (!strcmp(argv[1], "ticks")) {
		for (int a = 2; a < argc; a++) {
			long n, arg = strtol(split(argv[a], &n), NULL, 10);

			for (; n > 0; n--)
				eex_tick(arg);
		}
	} else if (!strcmp(argv[1], "comm")) {
		for (int a = 2; a < argc; a++) {
			long n;
			char *name = split(argv[a], &n);

			if (prctl(PR_SET_NAME, name) < 0)
				die("prctl");
			for (; n > 0; n--)
				syscall(SYS_getppid);
		}
	} else {
		fprintf(stderr, "unknown mode or arguments: %s\n", argv[1]);
		return 2;
	}
	_exit(0);
}
