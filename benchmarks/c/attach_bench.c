// SPDX-License-Identifier: Apache-2.0
// The libbpf side of benchmarks/bench_attach.py: the same attach/detach work bpfkit does,
// done by libbpf (linked statically, >= 1.3 for bpf_program__attach_uprobe_multi).
//
//   attach_bench OBJ BINARY SYMFILE single|multi PID names|offsets THREADS
//
// OBJ is bpf/.output/group_uprobe.bpf.o (programs group_uprobe, group_uprobe_multi), BINARY
// the library to probe, SYMFILE one function per line: "name file-offset" (hex).
//
// "single": one perf-event uprobe link per function, bpf_program__attach_uprobe_opts; with
// "names" libbpf resolves each name itself (opts.func_name: it opens BINARY and searches its
// symbols for every probe, inside the timing), with "offsets" it is given SYMFILE's offset
// (the resolution was done outside the timing). Then bpf_link__destroy of every link: one
// after the other in attach order when THREADS is 1, else from THREADS threads taking the next
// link as they go (libbpf's best: bpf_link__destroy closes the bpf_link fd, then the perf
// event fd; close(2) runs the kernel's waits, which overlap across threads where they can).
//
// "multi": one uprobe_multi link for every function (bpf_program__attach_uprobe_multi with
// opts.syms for "names", opts.offsets for "offsets"), then its destroy. libbpf 1.4's
// elf_resolve_syms_offsets() fails with ENOENT on a binary without .symtab (a stripped libc),
// so where the names fail the attach is timed again by offsets ("multi_by": "offsets").
//
// Before the timing, one uprobe is attached and destroyed: libbpf probes the kernel's features
// on an object's first attach (FEAT_PERF_LINK: a program load and a link create), once per
// process, as bpfkit does once per process (warmed up the same way before its timing).
//
// PID (-1: every process) limits the probes to one process. Prints one JSON object with the
// seconds each phase took.
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <bpf/libbpf.h>
#include "bench_common.h"

static char **read_symbols(const char *path, size_t *count, unsigned long **offsets)
{
	char line[4096], **syms = NULL;
	size_t n = 0, cap = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		char *space;

		line[strcspn(line, "\r\n")] = 0;
		if (!line[0])
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			syms = realloc(syms, cap * sizeof(*syms));
			*offsets = realloc(*offsets, cap * sizeof(**offsets));
			if (!syms || !*offsets)
				return NULL;
		}
		space = strchr(line, ' ');
		(*offsets)[n] = space ? strtoul(space + 1, NULL, 16) : 0;
		if (space)
			*space = 0;
		syms[n++] = strdup(line);
	}
	fclose(f);
	*count = n;
	return syms;
}

static struct bpf_program *program(struct bpf_object *obj, const char *name)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, name);

	if (!prog)
		fprintf(stderr, "attach_bench: no program %s in the object\n", name);
	return prog;
}

// The links the destroy threads share; each takes the next index until none is left.
static struct bpf_link **links;
static size_t link_count, next_link;

static void *destroy_worker(void *arg)
{
	size_t i;

	(void)arg;
	while ((i = __atomic_fetch_add(&next_link, 1, __ATOMIC_RELAXED)) < link_count)
		bpf_link__destroy(links[i]);
	return NULL;
}

static void destroy_all(int threads)
{
	pthread_t tids[256];
	int t;

	next_link = 0;
	if (threads <= 1) {
		destroy_worker(NULL);
		return;
	}
	if (threads > 256)
		threads = 256;
	for (t = 0; t < threads; t++)
		pthread_create(&tids[t], NULL, destroy_worker, NULL);
	for (t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
}

int main(int argc, char **argv)
{
	struct rlimit nofile = {.rlim_cur = 1 << 16, .rlim_max = 1 << 16};
	struct bpf_object *obj;
	const char *mode, *resolve, *multi_by;
	size_t count, i;
	char **syms;
	unsigned long *offsets = NULL;
	int pid, threads, by_names;
	double t0, attach, detach;

	if (argc != 8) {
		fprintf(stderr, "usage: %s OBJ BINARY SYMFILE single|multi PID names|offsets THREADS\n", argv[0]);
		return 2;
	}
	mode = argv[4];
	pid = atoi(argv[5]);
	resolve = argv[6];
	threads = atoi(argv[7]);
	by_names = strcmp(resolve, "names") == 0;
	multi_by = resolve;
	libbpf_set_print(quiet);
	setrlimit(RLIMIT_NOFILE, &nofile); // two fds a single probe (perf event, bpf_link)
	syms = read_symbols(argv[3], &count, &offsets);
	if (!syms || !count) {
		fprintf(stderr, "attach_bench: no symbols in %s\n", argv[3]);
		return 1;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "attach_bench: loading %s failed: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (strcmp(mode, "single") == 0) {
		struct bpf_program *prog = program(obj, "group_uprobe");
		LIBBPF_OPTS(bpf_uprobe_opts, opts);

		if (!prog)
			return 1;
		links = calloc(count, sizeof(*links));
		link_count = count;
		links[0] = bpf_program__attach_uprobe_opts(prog, pid, argv[2], offsets[0], &opts);
		if (!links[0]) {
			fprintf(stderr, "attach_bench: uprobe %s:%#lx: %s\n", argv[2], offsets[0], strerror(errno));
			return 1;
		}
		bpf_link__destroy(links[0]);
		t0 = now();
		for (i = 0; i < count; i++) {
			opts.func_name = by_names ? syms[i] : NULL;
			links[i] = bpf_program__attach_uprobe_opts(prog, pid, argv[2], by_names ? 0 : offsets[i], &opts);
			if (!links[i]) {
				fprintf(stderr, "attach_bench: uprobe %s:%s: %s\n", argv[2], syms[i], strerror(errno));
				return 1;
			}
		}
		attach = now() - t0;
		t0 = now();
		destroy_all(threads);
		detach = now() - t0;
	} else {
		struct bpf_program *prog = program(obj, "group_uprobe_multi");
		LIBBPF_OPTS(bpf_uprobe_multi_opts, mopts, .cnt = count);
		struct bpf_link *link;

		if (!prog)
			return 1;
		if (by_names)
			mopts.syms = (const char **)syms;
		else
			mopts.offsets = offsets;
		t0 = now();
		link = bpf_program__attach_uprobe_multi(prog, pid, argv[2], NULL, &mopts);
		if (!link && by_names && errno == ENOENT) {
			LIBBPF_OPTS(bpf_uprobe_multi_opts, oopts, .offsets = offsets, .cnt = count);

			multi_by = "offsets";
			t0 = now();
			link = bpf_program__attach_uprobe_multi(prog, pid, argv[2], NULL, &oopts);
		}
		if (!link) {
			fprintf(stderr, "attach_bench: uprobe_multi on %zu functions: %s\n", count, strerror(errno));
			return 1;
		}
		attach = now() - t0;
		t0 = now();
		bpf_link__destroy(link);
		detach = now() - t0;
	}
	printf("{\"libbpf\": \"%u.%u\", \"count\": %zu, \"mode\": \"%s\", \"attach\": %.6f, \"detach\": %.6f, "
	       "\"resolve\": \"%s\", \"threads\": %d}\n",
	       libbpf_major_version(), libbpf_minor_version(), count, mode, attach, detach, multi_by, threads);
	bpf_object__close(obj);
	return 0;
}
