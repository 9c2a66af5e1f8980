#!/usr/bin/env bash
# Fetch newer kernel UAPI headers (linux-libc-dev from bookworm-backports, Linux 6.12-ish) for
# tests/test_layout.py, without touching /etc or the host's apt state, and print the include
# directory (the one holding linux/bpf.h).
#
#   scripts/uapi-headers.sh            # prints e.g. ~/.cache/bpfkit/uapi/root/usr/include
#
# Why: the host's linux-libc-dev (6.1) lacks fields bpfkit declares from 6.12 (uprobe_multi,
# tcx, netkit, log_true_size, token fds, link info cookies ...), so the layout test needs newer
# headers to check them. How: scripts/backports-fetch.sh (cached; no network the second time).
set -euo pipefail
root=$("$(dirname "$0")/backports-fetch.sh" uapi linux-libc-dev)
if [ ! -f "$root/usr/include/linux/bpf.h" ]; then
  echo "uapi-headers: no linux/bpf.h in $root/usr/include" >&2
  exit 1
fi
echo "$root/usr/include"
