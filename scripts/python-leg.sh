#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A second Python: the host suite (scripts/test.sh with BPFKIT_SKIP_VM=1: tests/ and
# integration/ on the real kernel, mypy and ruff) under Debian 13 (trixie)'s python3, 3.13, in a
# privileged container whose root filesystem is a bare debootstrap minbase of trixie, built and
# run as scripts/fresh-machine.sh builds and runs its Debian 12 one (a clean clone of HEAD;
# the README's demo runs there too). pyproject.toml's classifiers name the versions that pass.
#
#   scripts/python-leg.sh [SUITE]        # default trixie; prints exit codes and the test summary
#
# BPFKIT_FRESH_RESULTS=dir keeps the logs and junit XML (test.log, host.xml, python.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
BPFKIT_FRESH_SUITE=${1:-trixie} BPFKIT_FRESH_SKIP_VM=1 exec scripts/fresh-machine.sh
