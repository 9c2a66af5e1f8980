#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fetch libbpf >= 1.3 (for bpf_program__attach_uprobe_multi) without touching the system:
# Debian bookworm's libbpf-dev is 1.1.2, bookworm-backports has 1.4.x. scripts/backports-fetch.sh
# unpacks libbpf-dev and libbpf1 from backports (private apt state, the machine's own mirror)
# into ~/.cache/bpfkit/libbpf-backports/root. Prints that directory.
set -eu
root=$("$(dirname "$0")/../../scripts/backports-fetch.sh" libbpf-backports libbpf-dev libbpf1)
[ -f "$root/usr/lib/x86_64-linux-gnu/libbpf.a" ] || { echo "fetch_libbpf: no libbpf.a in $root" >&2; exit 1; }
echo "$root"
