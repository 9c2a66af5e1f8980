#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set up everything (scripts/setup.sh) and run bpfkit's main job on the bundled example:
# `bpfkit attach` loads bpfkit/examples/opensnoop.bpf.c (built by setup.sh's `make -C bpf` into
# bpf/.output/cli_opensnoop.bpf.o), attaches its tracepoint (openat) and uprobe (libc fopen)
# and prints the ring buffer's records, decoded through the object's BTF, for a few seconds
# while something opens files; then SIGINT detaches it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
OBJ=bpf/.output/cli_opensnoop.bpf.o
# bpf/cli_opensnoop.bpf.c only #includes the example, so make cannot see the example change.
if [ bpfkit/examples/opensnoop.bpf.c -nt "$OBJ" ]; then
  make -s -C bpf -W cli_opensnoop.bpf.c .output/cli_opensnoop.bpf.o
fi
SECONDS_TO_RUN=${BPFKIT_DEMO_SECONDS:-5}
# Something to watch: a few opens (openat) and fopen()s (the uprobe) every half second.
(
  for _ in $(seq $((SECONDS_TO_RUN * 2))); do
    sleep 0.5
    cat /etc/hostname /etc/os-release >/dev/null 2>&1 || true
    .venv/bin/python -c "import ctypes; ctypes.CDLL(None).fopen(b'/etc/hostname', b'r')" || true
  done
) &
watcher=$!
status=0
timeout -s INT --preserve-status "$SECONDS_TO_RUN" .venv/bin/bpfkit attach "$OBJ" --events events || status=$?
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
exit "$status"
