// SPDX-License-Identifier: Apache-2.0
// The libbpf side of benchmarks/bench_btf.py: btf__parse() of a BTF blob (what libbpf does
// with /sys/kernel/btf/vmlinux before a CO-RE load: read, check and index every type), then
// btf__find_by_name_kind() of each NAME (a struct), ROUNDS times.
//
//   btf_bench BTF ROUNDS [NAME...]
//
// Prints one line per round: "parse_seconds lookup_seconds types parse_cpu_seconds".
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <bpf/btf.h>
#include "bench_common.h"

int main(int argc, char **argv)
{
	int rounds, r, i;

	if (argc < 3) {
		fprintf(stderr, "usage: %s BTF ROUNDS [NAME...]\n", argv[0]);
		return 2;
	}
	rounds = atoi(argv[2]);
	for (r = 0; r < rounds; r++) {
		double c0 = cpu(), t0 = now(), t1, t2, c1;
		struct btf *btf = btf__parse(argv[1], NULL);

		if (!btf) {
			fprintf(stderr, "btf__parse %s: %d\n", argv[1], -errno);
			return 1;
		}
		t1 = now();
		c1 = cpu();
		for (i = 3; i < argc; i++)
			if (btf__find_by_name_kind(btf, argv[i], BTF_KIND_STRUCT) < 0)
				fprintf(stderr, "no struct %s\n", argv[i]);
		t2 = now();
		printf("%.9f %.9f %u %.9f\n", t1 - t0, t2 - t1, btf__type_cnt(btf), c1 - c0);
		btf__free(btf);
	}
	return 0;
}
