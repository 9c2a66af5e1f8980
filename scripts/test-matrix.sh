#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The full matrix: the host suite, the integration suite on Debian 5.10 (no perf links: the
# SET_BPF fallback is the real path), 6.1 (kprobes), 6.12 (kprobe_multi) and Debian sid's
# newest (7.2: sched_ext, netkit, sessions) in VMs, the test image built and run with podman,
# and a fresh machine (scripts/fresh-machine.sh: the README's two commands in a bare Debian 12
# container), and the packaging legs (scripts/wheel-legs.sh: the built wheel installed with the
# lowest and the newest versions its metadata allows). Takes about two hours under TCG
# emulation (see docs/vm-runner.md).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
scripts/vm-setup.sh .venv/bin/python >/dev/null || exit 1

source scripts/results-dir.sh
.venv/bin/python -m pytest -p no:cacheprovider --junitxml="$results/host.xml" tests integration
runs=("host=$results/host.xml")
# Per VM leg, boot included: the 6.1 leg's 737 tests were 90% done after 3600 s at load 3-4
# (Nov 2026); 5.10 is slower still.
for kernel in 5.10 6.1 6.12 7.2; do
  .venv/bin/python integration/vm.py --kernel "$kernel" --timeout "${BPFKIT_VM_TIMEOUT:-7200}" \
    --results "$results/vm" -- -p no:hypothesispytest -p no:benchmark integration
  runs+=("vm-$kernel=$results/vm/$kernel/junit.xml")
done
# The image's run writes its junit XML here too: the summary checks its counts equal the host's.
mkdir -p "$results/container"
BPFKIT_CONTAINER_RESULTS="$results/container" integration/container.sh
runs+=("container=$results/container/host.xml")
# The fresh machine: its demo and test exit codes, then its host and 6.1 runs' junit. Its host
# run must count what this host's did: a difference is a set-up step only this machine has.
fresh_status=0
BPFKIT_FRESH_RESULTS="$results/fresh" scripts/fresh-machine.sh || fresh_status=$?
runs+=("fresh-host=$results/fresh/host.xml" "fresh-vm-6.1=$results/fresh/vm/6.1/junit.xml")
# The packaging legs (scripts/wheel-legs.sh): the sdist and wheel built and checked, then the
# host suite against the installed wheel with the lowest versions its metadata allows and with
# the newest.
wheel_status=0
BPFKIT_RESULTS_DIR="$results/wheel" scripts/wheel-legs.sh build lowest highest || wheel_status=$?
runs+=("wheel-lowest=$results/wheel/lowest.xml" "wheel-highest=$results/wheel/highest.xml")
summary_status=0
.venv/bin/python scripts/summarize.py --same host,container --same host,fresh-host "${runs[@]}" || summary_status=$?
if [ "$fresh_status" != 0 ]; then
  echo "fresh machine: scripts/fresh-machine.sh exited $fresh_status (see its lines above)"
fi
if [ "$wheel_status" != 0 ]; then
  echo "wheel legs: scripts/wheel-legs.sh exited $wheel_status (see its 'wheel legs:' lines above)"
fi
matrix_status=0
[ "$fresh_status" = 0 ] && [ "$summary_status" = 0 ] && [ "$wheel_status" = 0 ] || matrix_status=1

# A second Python: the host suite under Debian 13 (trixie)'s python3 3.13 in a fresh container
# (scripts/python-leg.sh); pyproject.toml's classifiers name only the versions that pass.
BPFKIT_FRESH_RESULTS="$results/python-3.13" scripts/python-leg.sh trixie || matrix_status=1
exit "$matrix_status"
