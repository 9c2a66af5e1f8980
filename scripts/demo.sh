#!/usr/bin/env bash
# Set up everything (scripts/setup.sh) and run bpfkit's main job on a bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/bpfkit features
