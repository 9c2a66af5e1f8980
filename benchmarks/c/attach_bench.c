// SPDX-License-Identifier: Apache-2.0
// The libbpf side of benchmarks/bench_attach.py: the same attach/detach work bpfkit does,
// done by libbpf (linked statically, >= 1.3 for bpf_program__attach_uprobe_multi).
//
//   attach_bench OBJ BINARY SYMFILE [multi|single|both] [PID]
//
// OBJ is bpf/.output/group_uprobe.bpf.o (programs group_uprobe, group_uprobe_multi), BINARY
// the library to probe, SYMFILE one function per line: "name file-offset" (hex). "single": one
// perf-event uprobe link per function (bpf_program__attach_uprobe_opts with func_name: libbpf
// resolves the name itself), then bpf_link__destroy of each, sequentially. "multi": one
// uprobe_multi link for all of them (bpf_program__attach_uprobe_multi with opts.syms), then
// its destroy. libbpf 1.4's elf_resolve_syms_offsets() fails with ENOENT on a binary without
// .symtab (a stripped libc: the error of skipping the missing section is returned), so where
// the names fail the multi attach is timed again with opts.offsets from SYMFILE
// ("multi_by": "offsets" in the output), which spares libbpf the symbol lookup.
// PID (default -1: every process) limits the probes to one process. Prints one JSON object
// with the seconds each phase took.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>
#include "bench_common.h"

static char **read_symbols(const char *path, size_t *count, unsigned long **offsets)
{
	char line[512], **syms = NULL;
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

int main(int argc, char **argv)
{
	const char *mode = argc > 4 ? argv[4] : "both";
	int pid = argc > 5 ? atoi(argv[5]) : -1;
	int single = strcmp(mode, "multi") != 0, multi = strcmp(mode, "single") != 0;
	struct bpf_object *obj;
	struct bpf_link **links;
	size_t count, i;
	char **syms;
	unsigned long *offsets = NULL;
	const char *multi_by = "names";
	double t0, attach = 0, detach = 0, m_attach = 0, m_detach = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s OBJ BINARY SYMFILE [multi|single|both] [PID]\n", argv[0]);
		return 2;
	}
	libbpf_set_print(quiet);
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
	links = calloc(count, sizeof(*links));
	if (single) {
		struct bpf_program *prog = program(obj, "group_uprobe");
		LIBBPF_OPTS(bpf_uprobe_opts, opts);

		if (!prog)
			return 1;
		t0 = now();
		for (i = 0; i < count; i++) {
			opts.func_name = syms[i];
			links[i] = bpf_program__attach_uprobe_opts(prog, pid, argv[2], 0, &opts);
			if (!links[i]) {
				fprintf(stderr, "attach_bench: uprobe %s:%s: %s\n", argv[2], syms[i], strerror(errno));
				return 1;
			}
		}
		attach = now() - t0;
		t0 = now();
		for (i = 0; i < count; i++)
			bpf_link__destroy(links[i]);
		detach = now() - t0;
	}
	if (multi) {
		struct bpf_program *prog = program(obj, "group_uprobe_multi");
		LIBBPF_OPTS(bpf_uprobe_multi_opts, mopts, .syms = (const char **)syms, .cnt = count);
		struct bpf_link *link;

		if (!prog)
			return 1;
		t0 = now();
		link = bpf_program__attach_uprobe_multi(prog, pid, argv[2], NULL, &mopts);
		if (!link && errno == ENOENT && offsets[0]) {
			LIBBPF_OPTS(bpf_uprobe_multi_opts, oopts, .offsets = offsets, .cnt = count);

			multi_by = "offsets";
			t0 = now();
			link = bpf_program__attach_uprobe_multi(prog, pid, argv[2], NULL, &oopts);
		}
		if (!link) {
			fprintf(stderr, "attach_bench: uprobe_multi on %zu functions: %s\n", count, strerror(errno));
			return 1;
		}
		m_attach = now() - t0;
		t0 = now();
		bpf_link__destroy(link);
		m_detach = now() - t0;
	}
	printf("{\"libbpf\": \"%u.%u\", \"count\": %zu, \"attach\": %.6f, \"detach\": %.6f, "
	       "\"multi_attach\": %.6f, \"multi_detach\": %.6f, \"multi_by\": \"%s\"}\n",
	       libbpf_major_version(), libbpf_minor_version(), count, attach, detach, m_attach, m_detach,
	       multi_by);
	bpf_object__close(obj);
	return 0;
}
