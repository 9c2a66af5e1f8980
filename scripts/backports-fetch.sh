#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unpack Debian packages from the host release's backports suite into a cache directory,
# without touching /etc or the host's apt state, and print the directory they were unpacked in.
#
#   scripts/backports-fetch.sh NAME PACKAGE...   # prints ~/.cache/bpfkit/NAME/root
#   BPFKIT_APT_SUITE=sid scripts/backports-fetch.sh NAME PACKAGE...   # another suite of the mirror
#
# How: a private APT_CONFIG (own sources list, lists and cache dirs under
# ${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}/NAME), the mirror URI read from the
# machine's own apt sources at run time, `apt-get download` and `dpkg-deb -x`. Cached: a second
# run prints the directory without any network access. Needs no root. Used by
# scripts/uapi-headers.sh and benchmarks/c/fetch_libbpf.sh.
set -euo pipefail

SUITE_SUFFIX=${BACKPORTS_SUFFIX:--backports}
# A whole suite name (sid) instead of the host codename plus SUITE_SUFFIX.
SUITE_OVERRIDE=${BPFKIT_APT_SUITE:-}
NAME=${1:?usage: backports-fetch.sh NAME PACKAGE...}
shift
[ $# -gt 0 ] || { echo "usage: backports-fetch.sh NAME PACKAGE..." >&2; exit 2; }
CACHE_ROOT=${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}
DIR=$CACHE_ROOT/$NAME

if [ -f "$DIR/root/.complete" ] && [ "$(cat "$DIR/root/.packages" 2>/dev/null)" = "$*" ]; then
  echo "$DIR/root"
  exit 0
fi

log() { echo "backports-fetch ($NAME): $*" >&2; }

# The Debian archive URI and codename the host already uses (deb822 .sources or one-line
# sources.list), so no mirror is written down here.
host_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no") for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j]; types = ""; enabled = ""; nu = 0; ns = 0 }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "types:" { types = ""; for (i = 2; i <= NF; i++) types = types " " $i; types = types " " }
      tolower($1) == "enabled:" { enabled = tolower($2) }
      tolower($1) == "uris:" { nu = 0; for (i = 2; i <= NF; i++) u[++nu] = $i }
      tolower($1) == "suites:" { ns = 0; for (i = 2; i <= NF; i++) s[++ns] = $i }
      END { flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -e 's/#.*//' -e 's/\[[^]]*\]//g' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
  done
}

mirror=""
codename=""
while read -r uri suite; do
  case "$suite" in
    */*|*-security|*-updates|*-backports|*-proposed-updates) continue ;;
  esac
  mirror=$uri
  codename=$suite
  break
done < <(host_sources)
if [ -z "$mirror" ]; then
  log "no Debian archive entry found in /etc/apt/sources.list or /etc/apt/sources.list.d"
  exit 1
fi

suite=${SUITE_OVERRIDE:-$codename$SUITE_SUFFIX}
mkdir -p "$DIR/etc/sources.list.d" "$DIR/etc/preferences.d" "$DIR/lists/partial" \
  "$DIR/cache/archives/partial" "$DIR/download"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[ -f "$keyring" ] && signed="[signed-by=$keyring] "
echo "deb ${signed}$mirror $suite main" > "$DIR/etc/sources.list"
# Check-Valid-Until off: a mirror serving a snapshot of sid keeps a Release file past its
# Valid-Until date, which apt refuses (the fresh machine's test_layout_against_newest_headers
# skipped for it); signatures are still checked. Only this private state is affected.
cat > "$DIR/etc/apt.conf" <<EOF
Dir::Etc::sourcelist "$DIR/etc/sources.list";
Dir::Etc::sourceparts "$DIR/etc/sources.list.d";
Dir::Etc::preferences "$DIR/etc/preferences";
Dir::Etc::preferencesparts "$DIR/etc/preferences.d";
Dir::State::lists "$DIR/lists";
Dir::Cache "$DIR/cache";
Dir::Cache::archives "$DIR/cache/archives";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
Acquire::Check-Valid-Until "false";
APT::Sandbox::User "$(id -un)";
EOF
export APT_CONFIG=$DIR/etc/apt.conf

log "fetching $* from $suite (private apt state in $DIR)"
apt-get -qq update >&2
rm -f "$DIR"/download/*.deb
(cd "$DIR/download" && apt-get -qq download $(printf "%s/$suite " "$@") >&2)
rm -rf "$DIR/root.tmp"
mkdir -p "$DIR/root.tmp"
for package in "$@"; do
  deb=$(ls "$DIR"/download/"$package"_*.deb 2>/dev/null | head -n1)
  if [ -z "$deb" ]; then
    log "apt-get download left no $package package in $DIR/download"
    exit 1
  fi
  dpkg-deb -x "$deb" "$DIR/root.tmp"
  log "unpacked $(basename "$deb")"
done
echo "$*" > "$DIR/root.tmp/.packages"
touch "$DIR/root.tmp/.complete"
rm -rf "$DIR/root"
mv "$DIR/root.tmp" "$DIR/root"
echo "$DIR/root"
