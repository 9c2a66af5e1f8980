#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build, once, a small Linux 6.12 with CONFIG_USER_EVENTS=y for the user_events VM tests.
#
#   integration/build_user_events_kernel.sh          # prints the cached kernel.json path
#   JOBS=4 integration/build_user_events_kernel.sh    # more parallel jobs (default 2)
#
# Why: no Debian kernel enables CONFIG_USER_EVENTS (user_events left "depends on BROKEN" only in
# 6.4 and distributions have not turned it on), so integration/test_user_events.py needs its
# own kernel. integration/vm.py boots it as `--kernel user-events`.
#
# What: Debian's linux-source-6.12 package (bookworm-security carries it; when the host's apt
# does not offer it, scripts/backports-fetch.sh reaches bookworm-backports, the mirror read
# from the host's apt sources at run time); configured with virtme-ng's defconfig for guests
# (virtme-configkernel --defconfig: 9p root, virtio, serial console, BPF/tracing helpers),
# then the options below (user_events, BPF, BTF, kprobes/uprobes), minus what a guest that
# shares the host's root over 9p does not use (graphics, sound, USB, disks and their file
# systems, IP networking, ...) to keep the build short on a shared 2-core machine. make is
# incremental: after an interruption, running the script again resumes the build.
#
# Layout (the same as integration/vm_kernels.py's downloaded kernels):
#   kernels/user-events/kernel.json       name, package, version, release, vmlinuz, modules
#   kernels/user-events/root/boot/vmlinuz-<release>, root/lib/modules/<release>/
#   kernels/user-events/build/            source tree and objects (kept for incremental rebuilds)
#   kernels/user-events/build.log         the make output
# A second run only prints the kernel.json path. Needs: gcc, make, flex, bison, bc, libelf-dev,
# libssl-dev, dwarves (pahole, for BTF), virtme-ng (pip).
set -euo pipefail

NAME=user-events
SERIES=6.12
PACKAGE=linux-source-$SERIES
CACHE_ROOT=${BPFKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bpfkit}
KDIR=$CACHE_ROOT/kernels/$NAME
BUILD=$KDIR/build
SRC=$BUILD/src
LOG=$KDIR/build.log
JOBS=${JOBS:-2}
REPO=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "build_user_events_kernel: $*" >&2; }

if [ -f "$KDIR/kernel.json" ] && [ -f "$KDIR/.complete" ]; then
  echo "$KDIR/kernel.json"
  exit 0
fi

missing=()
for tool in gcc make flex bison bc pahole xz virtme-configkernel; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  log "missing tools: ${missing[*]} (apt-get install flex bison bc dwarves libelf-dev libssl-dev; pip install virtme-ng)"
  exit 1
fi

mkdir -p "$KDIR" "$BUILD"
exec 9>"$KDIR/.lock"
flock 9  # one build at a time

# ------------------------------------------------------------------ source package
fetch_source() {
  local dl=$BUILD/download
  mkdir -p "$dl"
  if ls "$dl"/"$PACKAGE"_*.deb >/dev/null 2>&1; then
    return
  fi
  if apt-cache show "$PACKAGE" >/dev/null 2>&1; then
    log "downloading $PACKAGE with the host's apt"
    (cd "$dl" && apt-get -qq download "$PACKAGE")
    return
  fi
  # Not in the host's sources: bookworm-backports through scripts/backports-fetch.sh's
  # private apt state (it also unpacks the package, which is not needed here).
  log "$PACKAGE is not in the host's apt sources: fetching it from backports"
  "$REPO/scripts/backports-fetch.sh" "$PACKAGE" "$PACKAGE" >/dev/null
  cp "$CACHE_ROOT/$PACKAGE"/download/"$PACKAGE"_*.deb "$dl"/
  rm -rf "${CACHE_ROOT:?}/$PACKAGE/root"
}

if [ ! -f "$SRC/Makefile" ]; then
  fetch_source
  deb=$(ls "$BUILD"/download/"$PACKAGE"_*.deb | head -n1)
  log "unpacking $(basename "$deb")"
  rm -rf "$BUILD/pkg" "$SRC"
  dpkg-deb -x "$deb" "$BUILD/pkg"
  tarball=$(ls "$BUILD"/pkg/usr/src/linux-source-*.tar.* | head -n1)
  mkdir -p "$SRC.tmp"
  tar -C "$SRC.tmp" --strip-components=1 -xf "$tarball"
  dpkg-deb -f "$deb" Version > "$SRC.tmp/.debian-version"
  mv "$SRC.tmp" "$SRC"
  rm -rf "$BUILD/pkg"
fi
DEB_VERSION=$(cat "$SRC/.debian-version")

# ------------------------------------------------------------------ configuration
# Applied after virtme-ng's own list (which turns graphics and sound on for `vng --graphics`).
OPTIONS=(
  # the point of this kernel (kernel/trace/Kconfig; 6.4+)
  USER_EVENTS=y
  # BPF and the attach points bpfkit uses
  BPF=y BPF_SYSCALL=y BPF_JIT=y BPF_EVENTS=y CGROUP_BPF=y
  FTRACE=y TRACING=y FUNCTION_TRACER=y DYNAMIC_FTRACE=y FTRACE_SYSCALLS=y
  KPROBES=y KPROBE_EVENTS=y UPROBES=y UPROBE_EVENTS=y PERF_EVENTS=y
  FPROBE=y DYNAMIC_EVENTS=y
  # BTF: /sys/kernel/btf/vmlinux for CO-RE (pahole turns DWARF into BTF at link time)
  DEBUG_INFO=y DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=y DEBUG_INFO_BTF=y
  DEBUG_INFO_REDUCED=n DEBUG_INFO_SPLIT=n DEBUG_INFO_NONE=n
  # what the guest does not need (its root is the host's over 9p, its console serial, it has
  # no network: 9p and udev need CONFIG_NET and unix/netlink sockets, not IP): a shorter build
  INET=n NETDEVICES=n PACKET=n IO_URING=n RTC_CLASS=n X86_PLATFORM_DEVICES=n NUMA=n X86_MCE=n
  PROFILING=n CPU_SUP_CENTAUR=n CPU_SUP_ZHAOXIN=n CPU_SUP_HYGON=n
  DRM=n SOUND=n SND=n USB_SUPPORT=n WLAN=n WIRELESS=n CFG80211=n HID=n AGP=n FB=n
  NETFILTER=n NET_SCHED=n ETHERNET=n PCCARD=n ATA=n SCSI=n MD=n
  EXT4_FS=n ISO9660_FS=n VFAT_FS=n MSDOS_FS=n AUTOFS_FS=n QUOTA=n
  HIBERNATION=n SUSPEND=n VIRTUALIZATION=n XEN=n HYPERV=n EFI=n KEXEC=n CRASH_DUMP=n
  MICROCODE=n HWMON=n WATCHDOG=n EDAC=n INPUT_MOUSE=n INPUT_JOYSTICK=n INPUT_TABLET=n
  INPUT_TOUCHSCREEN=n PERF_EVENTS_INTEL_UNCORE=n PERF_EVENTS_INTEL_RAPL=n
  PERF_EVENTS_INTEL_CSTATE=n
  LOCALVERSION_AUTO=n
)
LOCALVERSION=-bpfkit-user-events

cd "$SRC"
if [ ! -f .config ] || [ ! -f "$BUILD/.configured" ]; then
  log "configuring (virtme-configkernel --defconfig, then ${#OPTIONS[@]} options)"
  snippet=$BUILD/options.config
  : > "$snippet"
  for o in "${OPTIONS[@]}"; do
    k=${o%%=*} v=${o#*=}
    if [ "$v" = n ]; then echo "# CONFIG_$k is not set"; else echo "CONFIG_$k=$v"; fi
  done >> "$snippet"
  echo "CONFIG_LOCALVERSION=\"$LOCALVERSION\"" >> "$snippet"
  virtme-configkernel --defconfig >>"$LOG" 2>&1
  # Our options last: Kconfig keeps the last assignment of a symbol.
  cat "$snippet" >> .config
  make olddefconfig >>"$LOG" 2>&1
  bad=()
  for o in "${OPTIONS[@]}"; do
    k=${o%%=*} v=${o#*=}
    if [ "$v" = n ]; then
      grep -q "^CONFIG_$k=" .config && bad+=("CONFIG_$k (wanted off)") || true
    else
      grep -q "^CONFIG_$k=$v\$" .config || bad+=("CONFIG_$k=$v")
    fi
  done
  # Options whose absence would defeat the purpose; the others only trim.
  for k in USER_EVENTS BPF_SYSCALL DEBUG_INFO_BTF BPF_EVENTS KPROBES UPROBES NET_9P_VIRTIO 9P_FS VIRTIO_PCI; do
    if ! grep -q "^CONFIG_$k=y" .config; then
      log "CONFIG_$k did not survive olddefconfig (see $LOG); not building"
      exit 1
    fi
  done
  ((${#bad[@]})) && log "note: olddefconfig changed ${bad[*]}"
  touch "$BUILD/.configured"
fi

log "building $PACKAGE $DEB_VERSION with nice -n 19 make -j$JOBS (log: $LOG)"
start=$(date +%s)
if ! nice -n 19 make -j"$JOBS" bzImage modules >>"$LOG" 2>&1; then
  log "make failed; last lines of $LOG:"
  tail -n 30 "$LOG" >&2
  exit 1
fi
log "built in $(( $(date +%s) - start )) s"
# Only now: kernelrelease reads CONFIG_LOCALVERSION from include/config/auto.conf, which the
# build writes (olddefconfig does not).
RELEASE=$(make -s kernelrelease)

ROOT=$KDIR/root
rm -rf "$ROOT.tmp"
mkdir -p "$ROOT.tmp/boot"
cp arch/x86/boot/bzImage "$ROOT.tmp/boot/vmlinuz-$RELEASE"
cp .config "$ROOT.tmp/boot/config-$RELEASE"
cp System.map "$ROOT.tmp/boot/System.map-$RELEASE"
make -s INSTALL_MOD_PATH="$ROOT.tmp" modules_install >>"$LOG" 2>&1
mkdir -p "$ROOT.tmp/lib/modules/$RELEASE"
rm -f "$ROOT.tmp/lib/modules/$RELEASE/build" "$ROOT.tmp/lib/modules/$RELEASE/source"
rm -rf "$ROOT"
mv "$ROOT.tmp" "$ROOT"

cat > "$KDIR/kernel.json" <<EOF
{
 "name": "$NAME",
 "package": "$PACKAGE (built by integration/build_user_events_kernel.sh)",
 "version": "$DEB_VERSION",
 "release": "$RELEASE",
 "vmlinuz": "$ROOT/boot/vmlinuz-$RELEASE",
 "modules": "$ROOT/lib/modules/$RELEASE"
}
EOF
touch "$KDIR/.complete"
echo "$KDIR/kernel.json"
