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
# tests/test_layout.py checks bpfkit's structs against the UAPI headers of the machine's
# backports suite, strictly: trixie-backports has Linux 7.3's, whose structs have grown past
# what bpfkit declares (union bpf_attr 168 bytes, bpfkit's 152), so this leg checks against the
# same bookworm-backports headers as the other legs: it tests the Python, not newer headers.
set -uo pipefail
cd "$(dirname "$0")/.."
BPFKIT_FRESH_SUITE=${1:-trixie} BPFKIT_FRESH_ENV="BPFKIT_SKIP_VM=1 BPFKIT_APT_SUITE=bookworm-backports" \
  exec scripts/fresh-machine.sh
