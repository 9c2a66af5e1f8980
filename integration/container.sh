#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the Dockerfile's image with podman and run the test suite in a privileged container.
#
# The podman set-up and the locally made base image: scripts/podman-env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/podman-env.sh
IMAGE=localhost/bpfkit-test:latest
ensure_base_image

echo "container: building $IMAGE" >&2
build_args=()
if [ -n "$HOST_CA" ]; then
  build_args+=(--volume "$HOST_CA:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
podman build -q --network host "${build_args[@]}" -t "$IMAGE" . >/dev/null
echo "container: running the test suite in a privileged container" >&2
run_args=()
# BPFKIT_CONTAINER_RESULTS=dir: the run's junit XML lands in dir (scripts/test-matrix.sh).
if [ -n "${BPFKIT_CONTAINER_RESULTS:-}" ]; then
  mkdir -p "$BPFKIT_CONTAINER_RESULTS"
  run_args+=(--volume "$(cd "$BPFKIT_CONTAINER_RESULTS" && pwd):/results" -e BPFKIT_RESULTS_DIR=/results)
fi
# --pid=host: BPF programs see initial-namespace pids, the tests compare them with os.getpid().
exec podman run --rm --privileged --pid=host --network host -e CI=true "${run_args[@]}" "$IMAGE" scripts/test.sh "$@"
