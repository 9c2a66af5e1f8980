#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prove the README's two commands on a fresh machine: a bare Debian 12 root filesystem
# (debootstrap --variant=minbase, nothing else installed), a clean clone of HEAD copied in, and
# `scripts/demo.sh` then `scripts/test.sh` run exactly as the README writes them, inside a
# privileged container with only the standard PATH and HOME. The VM leg of test.sh runs in
# there too (qemu under TCG needs no /dev/kvm).
#
#   scripts/fresh-machine.sh            # prints both commands' exit codes and the test summary
#
# Why: CI runs on the submitting machine, where leftovers (a tool on PATH, a cache in ~/.cache,
# an apt package) can hide a missing set-up step; in here there are none.
# BPFKIT_FRESH_RESULTS=dir keeps the logs and junit XML (scripts/test-matrix.sh reads them).
# BPFKIT_FRESH_SUITE=trixie makes the machine another Debian release (its own python3);
# BPFKIT_FRESH_ENV="VAR=VALUE ..." adds variables to the commands' bare environment
# (scripts/python-leg.sh sets both: BPFKIT_SKIP_VM=1 runs test.sh's host suite only).
# The host's CA bundle is lent read-only (PIP_CERT) for a TLS-intercepting proxy: that is the
# network's, not a set-up step.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/podman-env.sh || exit 1
suite=${BPFKIT_FRESH_SUITE:-bookworm}
image=$BASE_IMAGE
[ "$suite" = bookworm ] || image=localhost/bpfkit-base:$suite
ensure_base_image "$suite" "$image" || exit 1
extra_env=${BPFKIT_FRESH_ENV:-}

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "fresh-machine: note: uncommitted changes are not part of the test (it clones HEAD)" >&2
fi
work=$(mktemp -d /var/tmp/bpfkit-fresh.XXXXXX)
if [ -n "${BPFKIT_FRESH_RESULTS:-}" ]; then
  results=$BPFKIT_FRESH_RESULTS
  mkdir -p "$results"
  rm -f "$results"/{demo,test}.{rc,seconds,log} "$results/python.txt"
else
  results=$work/results
  mkdir -p "$results"
fi
trap 'rm -rf "$work"' EXIT
git clone -q --no-hardlinks "$PWD" "$work/bpfkit" || exit 1
commit=$(git -C "$work/bpfkit" log -1 --format='%h %s' | cut -c1-72)

volumes=(--volume "$work/bpfkit:/src/bpfkit" --volume "$(cd "$results" && pwd):/results")
cert_env=""
if [ -n "$HOST_CA" ]; then
  volumes+=(--volume "$HOST_CA:/run/host-ca.crt:ro")
  cert_env="PIP_CERT=/run/host-ca.crt"
fi

# Inside: each command as a user types it, from the clone, in a bare environment (the variables
# this kind of machine exports, CI's, and where to keep junit XML). Output to a log and the
# terminal; exit code and seconds to files.
read -r -d '' inside <<SCRIPT
cd /src/bpfkit
run() {
  local name=\$1 start=\$(date +%s); shift
  env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true \
    PYTHONDONTWRITEBYTECODE=1 BPFKIT_RESULTS_DIR=/results $cert_env $extra_env "\$@" 2>&1 \
    | tee /results/\$name.log | sed -u "s/^/[\$name] /"
  echo "\${PIPESTATUS[0]}" > /results/\$name.rc
  echo \$((\$(date +%s) - start)) > /results/\$name.seconds
}
run demo scripts/demo.sh
run test scripts/test.sh
.venv/bin/python -VV > /results/python.txt 2>&1
SCRIPT

echo "fresh-machine: debootstrap minbase $suite + clone of $commit" >&2
podman run --rm --privileged --pid=host --network host "${volumes[@]}" "$image" bash -c "$inside"
podman_rc=$?

status=0
echo
echo "fresh machine (Debian $suite minbase, $(head -n1 "$results/python.txt" 2>/dev/null || echo 'python ?'), commit $commit):"
for name in demo test; do
  rc=$(cat "$results/$name.rc" 2>/dev/null || echo "none (podman exit $podman_rc)")
  echo "  scripts/$name.sh: exit $rc after $(cat "$results/$name.seconds" 2>/dev/null || echo '?') s"
  [ "$rc" = 0 ] || status=1
done
# The demo must have printed decoded events and detached.
grep -q '^events: .*filename=' "$results/demo.log" 2>/dev/null || { echo "  demo printed no decoded event"; status=1; }
grep -qx 'detached' "$results/demo.log" 2>/dev/null || { echo "  demo did not say it detached"; status=1; }
echo "  test summary:"
sed -n '/^host: /,$p' "$results/test.log" 2>/dev/null | sed 's/^/    /'
exit "$status"
