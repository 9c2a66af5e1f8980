// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The bundled example lives in the package (bpfkit/examples/opensnoop.bpf.c); this wrapper
// lets `make -C bpf` build it into bpf/.output/cli_opensnoop.bpf.o with the shared vmlinux.h.
#include "../bpfkit/examples/opensnoop.bpf.c"
