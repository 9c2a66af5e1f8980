#!/usr/bin/env bash
# Build the Dockerfile's image with podman and run the test suite in a privileged container.
#
# No Docker engine or image registry is reachable on the machines bpfkit is developed on, so the
# base image `debian:bookworm-slim` is made locally with debootstrap (from the machine's own apt
# mirror) and tagged so the Dockerfile's ordinary FROM line resolves to it. crun refuses this
# host's hybrid cgroups, and default rlimits need CAP_SYS_RESOURCE: hence runc and the ulimits in
# the containers.conf below (ENVIRONMENT.md). Everything cached lives under ~/.cache/bpfkit.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}
BASE=docker.io/library/debian:bookworm-slim
IMAGE=localhost/bpfkit-test:latest
mkdir -p "$CACHE/podman"

need=()
for bin in podman runc debootstrap; do command -v "$bin" >/dev/null || need+=("$bin"); done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
fi

export CONTAINERS_CONF="$CACHE/podman/containers.conf"
cat > "$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF

mirror() {
  # The first Debian URI of the machine's apt sources (deb822 or one-line format).
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || { echo "container: no Debian mirror found in the apt sources" >&2; exit 1; }
  echo "$uri"
}

if ! podman image exists "$BASE"; then
  root="$CACHE/podman/bookworm-root"
  if [ ! -x "$root/bin/sh" ]; then
    rm -rf "$root"
    echo "container: debootstrap bookworm into $root" >&2
    debootstrap --variant=minbase bookworm "$root" "$(mirror)" >/dev/null
  fi
  tar -C "$root" -c . | podman import - "$BASE" >/dev/null
fi

echo "container: building $IMAGE" >&2
build_args=()
# Behind a TLS-intercepting proxy the host's CA bundle is what makes PyPI reachable: lend it.
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [ -r "$host_ca" ]; then
  build_args+=(--volume "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
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
