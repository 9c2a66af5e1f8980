#!/usr/bin/env bash
# Set up everything (scripts/setup.sh) and run bpfkit's test suites: the unprivileged tests in
# tests/ and the kernel tests in integration/, on this host. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@" tests integration
