# SPDX-License-Identifier: Apache-2.0
# Sourced by scripts/test.sh and scripts/test-matrix.sh: sets $results, the directory the runs
# write their junit XML to. BPFKIT_RESULTS_DIR keeps them there; by default they go to a
# temporary directory removed when the script exits.
if [[ -n "${BPFKIT_RESULTS_DIR:-}" ]]; then
  results=$BPFKIT_RESULTS_DIR
  mkdir -p "$results"
else
  results=$(mktemp -d)
  trap 'rm -rf "$results"' EXIT
fi
