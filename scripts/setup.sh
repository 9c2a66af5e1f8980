#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set up a fresh Debian 12 machine for bpfkit: toolchain, a virtualenv with bpfkit installed,
# tracefs/bpffs mounted, and the BPF programs in bpf/ built. Idempotent; fast when done before.
# Run as root (loading BPF programs needs CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN anyway).
set -euo pipefail
cd "$(dirname "$0")/.."

# libelf-dev, zlib1g-dev: benchmarks/bench_attach.py links its C loader statically to libbpf.
# iproute2: the network tests make namespaces and veth pairs with `ip`.
# python3, python3-venv: the interpreter and its venv/ensurepip (minbase Debian has neither);
# ca-certificates: pip reaches the package index over TLS; mount: mount(8) for tracefs/bpffs.
# kmod: depmod, which the VM runner (and tests/test_vm_kernels.py) runs on unpacked kernels
# (minbase Debian has none: the fresh-machine run of 75253b9 failed two tests on it).
# prometheus: integration/test_metrics_prometheus.py runs a real server (as a plain process on
# 127.0.0.1; where systemd runs, the package also starts its own service on :9090).
# zsh: tests/test_completion.py runs `bpfkit completion zsh` in a real zsh.
# groff-base: tests/test_manpage.py renders the man pages with groff's man macros.
# pci.ids (1.4 MB): /usr/share/misc/pci.ids, which ebpf_exporter's pci_* label decoders read
# (tests/test_eex_decoders.py checks them against it).
APT_PACKAGES=(python3 python3-venv ca-certificates mount clang-19 llvm-19 libbpf-dev bpftool gcc make
              libc6-dev linux-libc-dev systemtap-sdt-dev libelf-dev zlib1g-dev iproute2 kmod prometheus zsh groff-base
              pci.ids)
# linux-perf (+79 MB, ~5 s): integration/test_stacks_vs_perf.py compares bpfkit's profile with
# `perf record -g` (Debian 12's perf 6.1; it records on newer kernels too, checked on 6.18).
APT_PACKAGES+=(linux-perf)
# golang-go (+476 MB with golang-1.19-src, ~14 s): integration/test_profile_tools.py opens
# bpfkit's pprof output with `go tool pprof -top`.
APT_PACKAGES+=(golang-go)
# chromium (+640 MB with its dependencies, ~32 s; measured on a minbase bookworm with the
# packages above): the headless-Chromium check of the SVG flame graph in
# integration/test_profile_tools.py, which skips without it. Installed by default so CI runs
# that check; BPFKIT_SETUP_CHROMIUM=0 scripts/setup.sh leaves it out (docs/stacks.md).
if [ "${BPFKIT_SETUP_CHROMIUM:-1}" != 0 ]; then APT_PACKAGES+=(chromium); fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The virtualenv lives in the repo (ignored by git); BPFKIT_PYTHON picks the interpreter.
PYTHON=${BPFKIT_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.bpfkit-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
  touch "$stamp"
fi
# Machines of this kind export PYTHONDONTWRITEBYTECODE=1: an editable install would then
# compile every bpfkit module again in every process (measured: `bpfkit load` 153 -> 87 ms,
# first event 247 -> 122 ms). A wheel ships bytecode; the checkout gets it here.
.venv/bin/python -m compileall -q -j 0 bpfkit >/dev/null

# tracefs, bpffs and cgroup2 are not always mounted (ENVIRONMENT.md); bpfkit copes itself, but the
# tests and bpftool expect them.
mountpoint -q /sys/kernel/tracing 2>/dev/null || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
mountpoint -q /sys/fs/bpf 2>/dev/null || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
# cgroup v2: the cgroup link tests make their own cgroup under a cgroup2 mount, found in
# /proc/self/mountinfo (hybrid hosts have it at /sys/fs/cgroup/unified; a container may have none).
if ! grep -q ' - cgroup2 ' /proc/self/mountinfo; then
  cg2=/sys/fs/cgroup/unified
  mkdir -p "$cg2" 2>/dev/null || { cg2=/run/bpfkit-cgroup2; mkdir -p "$cg2"; }
  mount -t cgroup2 none "$cg2" 2>/dev/null || echo "setup: note: could not mount cgroup2 at $cg2: the cgroup tests will fail" >&2
fi

# Newer kernel UAPI headers for tests/test_layout.py (the host's linux-libc-dev is older than
# the structs bpfkit declares; sid's has the names newer than 6.12); cached after the first run,
# and the test falls back without them.
scripts/uapi-headers.sh >/dev/null || echo "setup: could not fetch newer UAPI headers (tests/test_layout.py will use /usr/include)" >&2
scripts/uapi-headers.sh newest >/dev/null || echo "setup: could not fetch sid's UAPI headers (names newer than 6.12 go unchecked)" >&2

make -s -C bpf

# Opt-in: bcc for benchmarks/bench_maps.py (BPFKIT_BENCH_BCC=1 scripts/setup.sh). bcc compiles
# C at run time against kernel headers; where the running kernel has none (no
# /lib/modules/$(uname -r)/build), Debian's header packages are merged into
# .venv/bcc-kernel-src, which the benchmark passes to bcc as BCC_KERNEL_SOURCE.
if [ "${BPFKIT_BENCH_BCC:-0}" = 1 ]; then
  for pkg in python3-bpfcc linux-headers-amd64; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || bcc_missing+=("$pkg")
  done
  if [ -n "${bcc_missing[*]:-}" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${bcc_missing[@]}" >/dev/null
  fi
  if [ ! -d "/lib/modules/$(uname -r)/build" ] && [ ! -d .venv/bcc-kernel-src ]; then
    arch_dir=$(ls -d /usr/src/linux-headers-*-amd64 | sort -V | tail -1)
    common_dir=${arch_dir%-amd64}-common
    mkdir -p .venv/bcc-kernel-src
    cp -rs "$common_dir/." .venv/bcc-kernel-src/
    cp -rs --remove-destination "$arch_dir/." .venv/bcc-kernel-src/
  fi
fi
