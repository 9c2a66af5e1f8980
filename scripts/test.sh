#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set up everything (scripts/setup.sh) and run bpfkit's tests:
#   1. the host suite: tests/ (no privileges) and integration/ (the real kernel), then tests/
#      again as user nobody (scripts/as-nobody.sh), and
#   2. the kernel tests this host cannot run in a Debian 6.1 VM (integration/vm.py;
#      docs/vm-runner.md): kprobes, kretprobes and the kprobe CLI (no CONFIG_KPROBES here),
#      fentry/fexit/fmod_ret/tp_btf/lsm (this host refuses BPF trampolines).
# Extra arguments go to the host pytest run. BPFKIT_SKIP_VM=1 skips step 2 (e.g. inside the
# container image, which has no qemu). scripts/test-matrix.sh runs every kernel and podman.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1

source scripts/results-dir.sh

# Static checks of bpfkit/ (configured in pyproject.toml: [tool.mypy], [tool.ruff]). They run
# first and their result lines are printed, but the tests still run; a failure makes the
# whole run fail at the end.
static_failed=()
mypy_out=$(.venv/bin/mypy 2>&1); mypy_rc=$?
printf '%s\n' "$mypy_out" | { [ $mypy_rc = 0 ] && tail -n 1 || cat; } | sed 's/^/mypy: /'
[ $mypy_rc = 0 ] || static_failed+=("mypy --strict")
ruff_out=$(.venv/bin/ruff check --output-format concise bpfkit 2>&1); ruff_rc=$?
printf '%s\n' "$ruff_out" | sed 's/^/ruff: /'
[ $ruff_rc = 0 ] || static_failed+=("ruff check")

.venv/bin/python -m pytest -p no:cacheprovider --junitxml="$results/host.xml" "$@" tests integration
runs=("host=$results/host.xml")

# tests/ a second time as user nobody: it needs no privileges (what does is marked root and
# skips). scripts/as-nobody.sh gives it a HOME, TMPDIR and pytest --basetemp of its own, and
# reaches a checkout or Python under a directory others cannot search (/root is 0700) through a
# private mount namespace. BPFKIT_SKIP_UNPRIVILEGED=1 skips it; it needs root to switch user.
if [ "${BPFKIT_SKIP_UNPRIVILEGED:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  unpriv=$(mktemp -d)
  scripts/as-nobody.sh "$unpriv/home" -- .venv/bin/python -m pytest -p no:cacheprovider -q \
    --basetemp="$unpriv/home/pytest" --junitxml="$unpriv/home/unprivileged.xml" tests
  cp "$unpriv/home/unprivileged.xml" "$results/unprivileged.xml"
  rm -rf "$unpriv"
  runs+=("unprivileged=$results/unprivileged.xml")
fi

if [ "${BPFKIT_SKIP_VM:-0}" != 1 ]; then
  scripts/vm-setup.sh .venv/bin/python >/dev/null || exit 1
  .venv/bin/python integration/vm.py --kernel 6.1 --results "$results/vm" -- \
    -p no:hypothesispytest -p no:benchmark integration/test_vm_kprobe.py integration/test_cli_vm.py \
    integration/test_link_tracing.py
  runs+=("vm-6.1=$results/vm/6.1/junit.xml")
fi
.venv/bin/python scripts/summarize.py "${runs[@]}"; rc=$?
if [ ${#static_failed[@]} -gt 0 ]; then
  echo "STATIC CHECKS FAILED: ${static_failed[*]} (see the mypy:/ruff: lines above)"
  exit 1
fi
echo "static checks: mypy --strict and ruff check passed"
exit $rc
