#!/usr/bin/env bash
# Fetch newer kernel UAPI headers (linux-libc-dev from bookworm-backports, Linux 6.12-ish) for
# tests/test_layout.py, without touching /etc or the host's apt state, and print the include
# directory (the one holding linux/bpf.h).
#
#   scripts/uapi-headers.sh            # prints e.g. ~/.cache/bpfkit/uapi/root/usr/include
#
# Why: the host's linux-libc-dev (6.1) lacks fields bpfkit declares from 6.12 (uprobe_multi,
# tcx, netkit, log_true_size, token fds, link info cookies ...), so the layout test needs newer
# headers to check them. How: a private APT_CONFIG (own sources list, lists and cache dirs under
# ${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}/uapi), the mirror URI read from the
# machine's own apt sources at run time, `apt-get download` and `dpkg-deb -x`. Cached: a second
# run prints the directory without any network access. Needs no root.
set -euo pipefail

SUITE_SUFFIX=-backports
PACKAGE=linux-libc-dev
CACHE_ROOT=${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}
DIR=$CACHE_ROOT/uapi
INCLUDE=$DIR/root/usr/include

if [ -f "$INCLUDE/linux/bpf.h" ] && [ -f "$DIR/root/.complete" ]; then
  echo "$INCLUDE"
  exit 0
fi

log() { echo "uapi-headers: $*" >&2; }

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

mkdir -p "$DIR/etc/sources.list.d" "$DIR/etc/preferences.d" "$DIR/lists/partial" \
  "$DIR/cache/archives/partial" "$DIR/download"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[ -f "$keyring" ] && signed="[signed-by=$keyring] "
echo "deb ${signed}$mirror $codename$SUITE_SUFFIX main" > "$DIR/etc/sources.list"
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
APT::Sandbox::User "$(id -un)";
EOF
export APT_CONFIG=$DIR/etc/apt.conf

log "fetching $PACKAGE from $codename$SUITE_SUFFIX (private apt state in $DIR)"
apt-get -qq update >&2
rm -f "$DIR"/download/*.deb
(cd "$DIR/download" && apt-get -qq download "$PACKAGE/$codename$SUITE_SUFFIX" >&2)
deb=$(ls "$DIR"/download/"$PACKAGE"_*.deb 2>/dev/null | head -n1)
if [ -z "$deb" ]; then
  log "apt-get download left no $PACKAGE package in $DIR/download"
  exit 1
fi
rm -rf "$DIR/root.tmp"
mkdir -p "$DIR/root.tmp"
dpkg-deb -x "$deb" "$DIR/root.tmp"
dpkg-deb -f "$deb" Version > "$DIR/root.tmp/.complete"
rm -rf "$DIR/root"
mv "$DIR/root.tmp" "$DIR/root"
log "unpacked $(basename "$deb")"
echo "$INCLUDE"
