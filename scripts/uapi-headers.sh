#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetch newer kernel UAPI headers for tests/test_layout.py, without touching /etc or the host's
# apt state, and print the include directory (the one holding linux/bpf.h).
#
#   scripts/uapi-headers.sh            # linux-libc-dev from bookworm-backports (Linux 6.12-ish)
#   scripts/uapi-headers.sh newest     # linux-libc-dev from Debian sid (the newest, 7.x)
#
# Why: the host's linux-libc-dev (6.1) lacks fields bpfkit declares from 6.12 (uprobe_multi,
# tcx, netkit, log_true_size, token fds, link info cookies ...), so the layout test needs newer
# headers to check them; names newer than 6.12 (BPF_TRACE_UPROBE_SESSION, 6.16 ...) are checked
# against sid's. How: scripts/backports-fetch.sh (cached; no network the second time).
set -euo pipefail
case "${1:-backports}" in
  backports) root=$("$(dirname "$0")/backports-fetch.sh" uapi linux-libc-dev) ;;
  newest) root=$(BPFKIT_APT_SUITE=sid "$(dirname "$0")/backports-fetch.sh" uapi-sid linux-libc-dev) ;;
  *) echo "usage: uapi-headers.sh [backports|newest]" >&2; exit 2 ;;
esac
if [ ! -f "$root/usr/include/linux/bpf.h" ]; then
  echo "uapi-headers: no linux/bpf.h in $root/usr/include" >&2
  exit 1
fi
echo "$root/usr/include"
