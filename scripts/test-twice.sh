#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run two copies of the host suite at the same time, on the same machine and the same tree,
# to show that each copy finds only its own kernel objects (by id, by owning process, by names
# holding its pid) and passes beside another BPF user: here, a second copy of itself.
#
#   scripts/test-twice.sh                     # tests/ and integration/, twice at once
#   scripts/test-twice.sh integration         # a part of it (any pytest arguments)
#
# Each copy has its own junit XML, log and pytest --basetemp under the results directory
# (scripts/results-dir.sh: BPFKIT_RESULTS_DIR keeps them). The summary adds both up, and
# --same fails unless the two copies came out alike. Needs root, as integration/ does.
# On 2 cores the pair of full runs takes about twice one run: see CONTRIBUTING.md.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/results-dir.sh
python=${BPFKIT_PYTHON:-.venv/bin/python}
[ $# -gt 0 ] || set -- tests integration

start=$(date +%s)
pids=()
for copy in 1 2; do
  mkdir -p "$results/copy$copy"
  "$python" -m pytest -p no:cacheprovider -q --basetemp="$results/copy$copy/tmp" \
    --junitxml="$results/copy$copy.xml" "$@" >"$results/copy$copy.log" 2>&1 &
  pids+=($!)
done
for copy in 1 2; do
  wait "${pids[$((copy - 1))]}"
  echo "copy $copy: $(tail -n 1 "$results/copy$copy.log") (log: $results/copy$copy.log)"
done
echo "both copies took $(( $(date +%s) - start )) s"
"$python" scripts/summarize.py --same copy1,copy2 "copy1=$results/copy1.xml" "copy2=$results/copy2.xml"
