# SPDX-License-Identifier: Apache-2.0
# Sourced by integration/container.sh and scripts/fresh-machine.sh: podman set up for this kind
# of machine, and a bare Debian 12 (bookworm, debootstrap minbase) image made locally.
#
# No Docker engine or image registry is reachable here, so the base image
# `debian:bookworm-slim` is made with debootstrap from the machine's own apt mirror and tagged
# so that the Dockerfile's ordinary FROM line resolves to it. crun refuses this host's hybrid
# cgroups, and default rlimits need CAP_SYS_RESOURCE: hence runc and the ulimits in the
# containers.conf below (shared ENVIRONMENT.md). Everything cached lives under $CACHE.
#
# Sets: CACHE, BASE_IMAGE, CONTAINERS_CONF (exported), HOST_CA (the host's CA bundle, or empty).
# Defines: ensure_base_image.

CACHE=${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}
BASE_IMAGE=docker.io/library/debian:bookworm-slim
mkdir -p "$CACHE/podman"

_need=()
for _bin in podman runc debootstrap; do command -v "$_bin" >/dev/null || _need+=("$_bin"); done
if [ ${#_need[@]} -gt 0 ]; then
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

# Behind a TLS-intercepting proxy the host's CA bundle is what makes the package index
# reachable from a container: it is lent (read-only), never copied into an image.
HOST_CA=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$HOST_CA" ] || HOST_CA=""

apt_mirror() {
  # The first Debian URI of the machine's apt sources (deb822 or one-line format).
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || { echo "podman-env: no Debian mirror found in the apt sources" >&2; return 1; }
  echo "$uri"
}

# The base image: debootstrap's minbase of bookworm (cached root filesystem), imported once.
# `ensure_base_image SUITE IMAGE` makes another suite's (scripts/python-leg.sh: trixie).
ensure_base_image() {
  local suite=${1:-bookworm} image=${2:-$BASE_IMAGE}
  podman image exists "$image" && return 0
  local root="$CACHE/podman/$suite-root" mirror
  if [ ! -x "$root/bin/sh" ]; then
    rm -rf "$root"
    mirror=$(apt_mirror) || return 1
    echo "podman-env: debootstrap --variant=minbase $suite into $root" >&2
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >/dev/null
  fi
  tar -C "$root" -c . | podman import - "$image" >/dev/null
}
