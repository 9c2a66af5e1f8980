#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what integration/vm.py needs to boot other Debian kernels under qemu/TCG.
#
#   scripts/vm-setup.sh [PYTHON]
#
# PYTHON is the interpreter that will run integration/vm.py (default: python3); virtme-ng is
# pip-installed into it. Idempotent: when everything is present it only checks and exits.
# Facts (docs/vm-runner.md, shared ENVIRONMENT.md):
#   - udev is needed in the guest, or virtme-ng loses the guest's exit code;
#   - busybox-static + kmod are what virtme-ng's init uses inside the guest;
#   - file and binutils (strings) are run by virtme-ng on the host;
#   - the kernels are fetched later, on demand, by integration/vm.py (apt-get download).
set -euo pipefail

PYTHON="${1:-${PYTHON:-python3}}"
# file, binutils: virtme-ng runs `file -L` (is busybox static?) and `strings` (kernel version)
# by name; a minbase Debian has neither (seen on a fresh machine: FileNotFoundError 'file').
APT_PKGS=(qemu-system-x86 kmod busybox-static udev file binutils)
VNG_VERSION="${VNG_VERSION:-1.42}"

missing=()
for p in "${APT_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    echo "vm-setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! "$PYTHON" -c 'import virtme_ng' 2>/dev/null; then
    echo "vm-setup: pip installing virtme-ng==$VNG_VERSION into $("$PYTHON" -c 'import sys; print(sys.executable)')"
    "$PYTHON" -m pip install -q "virtme-ng==$VNG_VERSION"
fi

# The runner calls vng through this interpreter (python -m virtme_ng.run), so PATH does not
# matter; still make sure the module's entry point works.
"$PYTHON" -m virtme_ng.run --help >/dev/null
echo "vm-setup: ok (qemu $(qemu-system-x86_64 --version | head -1 | awk '{print $4}'), virtme-ng $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("virtme-ng"))'))"
