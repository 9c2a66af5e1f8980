#!/bin/sh
# Fetch libbpf >= 1.3 (for bpf_program__attach_uprobe_multi) without touching the system:
# Debian bookworm's libbpf-dev is 1.1.2, bookworm-backports has 1.4.x. A private APT_CONFIG
# (own sources list, lists, cache and state dirs) downloads libbpf-dev and libbpf1 from
# backports, and dpkg-deb -x unpacks them into DEST (default ~/.cache/bpfkit/libbpf-1.4).
# The mirror is the one the machine's apt sources already use; /etc is only read.
# Prints DEST; exits 0 at once when DEST already holds libbpf.a.
set -eu
DEST=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit/libbpf-1.4}
LIBA=$DEST/usr/lib/x86_64-linux-gnu/libbpf.a
if [ -f "$LIBA" ]; then echo "$DEST"; exit 0; fi
WORK=${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit/apt-backports
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
    [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || { echo "fetch_libbpf: no Debian mirror found in /etc/apt sources" >&2; exit 1; }
mkdir -p "$WORK/lists/partial" "$WORK/archives/partial" "$WORK/sources.list.d" "$WORK/preferences.d" "$DEST"
: > "$WORK/status"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $mirror bookworm main" > "$WORK/sources.list"
echo "deb [signed-by=$keyring] $mirror bookworm-backports main" >> "$WORK/sources.list"
cat > "$WORK/apt.conf" <<CONF
Dir::Etc::SourceList "$WORK/sources.list";
Dir::Etc::SourceParts "$WORK/sources.list.d";
Dir::Etc::Preferences "$WORK/preferences";
Dir::Etc::PreferencesParts "$WORK/preferences.d";
Dir::State::Lists "$WORK/lists";
Dir::State::Status "$WORK/status";
Dir::Cache "$WORK";
Dir::Cache::Archives "$WORK/archives";
CONF
export APT_CONFIG="$WORK/apt.conf"
apt-get -q update >&2
cd "$WORK/archives"
apt-get -q download -t bookworm-backports libbpf-dev libbpf1 >&2
for deb in libbpf-dev_*.deb libbpf1_*.deb; do dpkg-deb -x "$deb" "$DEST"; done
[ -f "$LIBA" ] || { echo "fetch_libbpf: $LIBA missing after unpacking" >&2; exit 1; }
echo "$DEST"
