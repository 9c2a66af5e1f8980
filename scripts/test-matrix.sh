#!/usr/bin/env bash
# The full matrix: the host suite, the integration suite on Debian 5.10 (no perf links: the
# SET_BPF fallback is the real path), 6.1 (kprobes) and 6.12 (kprobe_multi) in VMs, and the
# test image built and run with podman. Takes long under TCG emulation (see docs/vm-runner.md).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
scripts/vm-setup.sh .venv/bin/python >/dev/null || exit 1

source scripts/results-dir.sh
.venv/bin/python -m pytest -p no:cacheprovider --junitxml="$results/host.xml" tests integration
runs=("host=$results/host.xml")
for kernel in 5.10 6.1 6.12; do
  .venv/bin/python integration/vm.py --kernel "$kernel" --timeout "${BPFKIT_VM_TIMEOUT:-3600}" \
    --results "$results/vm" -- -p no:hypothesispytest -p no:benchmark integration
  runs+=("vm-$kernel=$results/vm/$kernel/junit.xml")
done
# The image's run writes its junit XML here too: the summary checks its counts equal the host's.
mkdir -p "$results/container"
BPFKIT_CONTAINER_RESULTS="$results/container" integration/container.sh
runs+=("container=$results/container/host.xml")
exec .venv/bin/python scripts/summarize.py --same host,container "${runs[@]}"
