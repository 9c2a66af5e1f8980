#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run a command as user nobody (uid and gid 65534, no groups, no capabilities), as
# scripts/test.sh runs tests/ a second time unprivileged:
#
#   scripts/as-nobody.sh DIR -- CMD [ARG...]
#
# DIR is made (0700, owned by nobody) for the command's HOME and TMPDIR; no bytecode is written
# (PYTHONDONTWRITEBYTECODE). Run as root from the checkout. The checkout and the command's
# interpreter must be reachable by nobody: where a directory on the way is not searchable by
# others (a clone or a pyenv Python under /root, which is 0700), the command runs in a private
# mount namespace in which each such directory is covered by a 0711 tmpfs holding only the
# entries on the way, bind-mounted from the real ones: nothing changes outside that namespace,
# and nobody sees nothing else of the covered directory.
set -euo pipefail
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: $0 DIR -- CMD [ARG...]" >&2; exit 2; }
dir=$1
shift 2
[ "$(id -u)" = 0 ] || { echo "as-nobody: needs root (to switch to user nobody)" >&2; exit 2; }
command -v setpriv >/dev/null || { echo "as-nobody: needs setpriv(1) from util-linux" >&2; exit 2; }
mkdir -p "$dir"
chown 65534:65534 "$dir"
chmod 0700 "$dir"

# The paths nobody must reach: DIR, the checkout (here), the command, and, for a Python, the
# real files of its interpreter and its standard library (sys.base_prefix).
need=("$(readlink -f "$dir")" "$PWD" "$(readlink -f "$(command -v "$1")")")
if base=$("$1" -c 'import sys; print(sys.base_prefix)' 2>/dev/null); then
  need+=("$base")
fi

# {directory others cannot search: the entries below it on the way to a needed path}
declare -A covered=()
for path in "${need[@]}"; do
  at=/
  IFS=/ read -ra parts <<<"${path#/}"
  for part in "${parts[@]}"; do
    [ -n "$part" ] || continue
    if [ $(( 0$(stat -c %a "$at") & 1 )) = 0 ]; then
      case ",${covered[$at]:-}," in *",$part,"*) ;; *) covered[$at]="${covered[$at]:+${covered[$at]},}$part" ;; esac
    fi
    at="${at%/}/$part"
  done
done

drop=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
if [ ${#covered[@]} = 0 ]; then
  HOME="$dir" TMPDIR="$dir" PYTHONDONTWRITEBYTECODE=1 exec "${drop[@]}" "$@"
fi
hold=$(mktemp -d)  # the covered directories' real contents, seen by root alone (before TMPDIR changes)
trap 'rm -rf "$hold"' EXIT
export HOME="$dir" TMPDIR="$dir" PYTHONDONTWRITEBYTECODE=1
# Outer directories first (a covered directory may lie inside another).
order=$(for d in "${!covered[@]}"; do printf '%s\t%s\n' "$(tr -cd / <<<"$d" | wc -c)" "$d"; done | sort -n | cut -f2)
echo "as-nobody: $(tr '\n' ' ' <<<"$order")cannot be searched by others: covering them in a private mount namespace" >&2
specs=()
while IFS= read -r d; do specs+=("$d" "${covered[$d]}"); done <<<"$order"
unshare --mount --propagation private bash -euo pipefail -c '
  hold=$1 n=$2; shift 2
  for ((i = 0; i < n; i++)); do
    d=$1 entries=$2; shift 2
    mkdir "$hold/$i"
    mount --bind "$d" "$hold/$i"
    mount -t tmpfs -o mode=0711 bpfkit-as-nobody "$d"
    IFS=, read -ra names <<<"$entries"
    for e in "${names[@]}"; do
      if [ -d "$hold/$i/$e" ]; then mkdir "$d/$e"; else touch "$d/$e"; fi
      mount --bind "$hold/$i/$e" "$d/$e"
    done
  done
  exec "$@"
' as-nobody "$hold" "$(( ${#specs[@]} / 2 ))" "${specs[@]}" "${drop[@]}" "$@"
