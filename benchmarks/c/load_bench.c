// SPDX-License-Identifier: Apache-2.0
// The libbpf side of benchmarks/bench_load.py's in-process rows: bpf_object__open_file() of
// OBJ (parsing the ELF), then bpf_object__load() (maps created, programs relocated and
// loaded: what bpfkit's Collection(spec) does with a parsed spec), then bpf_object__close(),
// ROUNDS times.
//
//   load_bench OBJ ROUNDS
//
// Prints one line per round: "open_seconds load_seconds load_cpu_seconds" (the CPU time,
// user and system, of the load: the verifier's work included, the wait for a CPU not).
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <bpf/libbpf.h>
#include "bench_common.h"

int main(int argc, char **argv)
{
	int rounds, r, err;

	if (argc != 3) {
		fprintf(stderr, "usage: %s OBJ ROUNDS\n", argv[0]);
		return 2;
	}
	libbpf_set_print(quiet);
	rounds = atoi(argv[2]);
	for (r = 0; r < rounds; r++) {
		double t0 = now(), t1, t2, c1, c2;
		struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);

		if (!obj) {
			fprintf(stderr, "bpf_object__open_file %s: %d\n", argv[1], -errno);
			return 1;
		}
		t1 = now();
		c1 = cpu();
		err = bpf_object__load(obj);
		c2 = cpu();
		t2 = now();
		if (err) {
			fprintf(stderr, "bpf_object__load %s: %d\n", argv[1], err);
			return 1;
		}
		printf("%.9f %.9f %.9f\n", t1 - t0, t2 - t1, c2 - c1);
		bpf_object__close(obj);
	}
	return 0;
}
