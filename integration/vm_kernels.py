# SPDX-License-Identifier: Apache-2.0
"""Fetch and cache Debian kernels for integration/vm.py.

A kernel name ("5.10", "6.1", "6.12") maps to the newest plain ``-amd64`` linux-image package
of one Debian release. Every look-up goes through a private APT configuration (own sources
list, lists and cache dirs under the cache dir), so /etc is never touched, the host's
``apt-get update`` state does not matter, and bullseye (not in the host's sources) works the
same way as bookworm. The mirror URIs are taken from the host's apt sources at run time.

Layout under ``cache_root()``::

    apt/<codename>/...           private apt state (sources list, lists, archives)
    kernels/<name>/kernel.json   what was fetched (package, version, release, paths)
    kernels/<name>/root/         dpkg-deb -x of the package(s): boot/vmlinuz-* or usr/lib/modules/*/vmlinuz
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

# name -> (Debian release, package name glob). The cloud flavour lacks 9p (virtme-ng's root
# fs) and rt is another kernel, so plain -amd64 only. The `*` is the number that orders a
# series' packages (the ABI, or for 6.12 the upstream stable release).
KERNELS: dict[str, tuple[str, str]] = {
    "5.10": ("bullseye", "linux-image-5.10.0-*-amd64"),
    "6.1": ("bookworm", "linux-image-6.1.0-*-amd64"),
    "6.12": ("bookworm", "linux-image-6.12.*+deb12-amd64"),
    # Debian sid (unstable). Its linux-image-* is a meta package: the kernel comes split into
    # linux-binary-* (vmlinuz under usr/lib/modules/RELEASE/), linux-base-* (config,
    # System.map) and linux-modules-* (110 MB; 9p and virtio are modules there).
    "7.2": ("sid", "linux-image-7.2.*-amd64"),
}
# `--kernel newest`: the highest plain -amd64 kernel Debian offers (sid's), run under its series
# name ("7.2"); when sid moves to a newer series the runner follows it.
NEWEST = "newest"
NEWEST_CODENAME = "sid"
# Suites without -updates and -security.
ROLLING = ("sid",)
# Packages a split kernel's meta image package depends on, unpacked into one root.
SPLIT_PARTS = re.compile(r"^linux-(binary|base|modules)-")
# Kernels built from source rather than downloaded: name -> the script that builds one and
# caches it as kernels/<name>/kernel.json + root/ (the layout of the downloaded ones).
BUILT_KERNELS: dict[str, str] = {
    "user-events": "integration/build_user_events_kernel.sh",  # CONFIG_USER_EVENTS=y (6.12)
}
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
HOST_SOURCES = ("/etc/apt/sources.list.d", "/etc/apt/sources.list")


class KernelError(RuntimeError):
    """A kernel could not be found, downloaded or unpacked."""


@dataclasses.dataclass(frozen=True)
class Kernel:
    """An unpacked kernel ready for ``vng --run``."""

    name: str
    package: str
    version: str  # Debian package version
    release: str  # uname -r inside the guest
    vmlinuz: str
    modules: str  # lib/modules/<release> (virtme-ng links it into the guest)


def cache_root() -> Path:
    """$BPFKIT_CACHE, else $XDG_CACHE_HOME/bpfkit, else ~/.cache/bpfkit."""
    if os.environ.get("BPFKIT_CACHE"):
        return Path(os.environ["BPFKIT_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(xdg) / "bpfkit"


# ---------------------------------------------------------------- host apt sources

def _host_source_entries() -> list[tuple[str, list[str]]]:
    """(uri, suites) of every enabled Debian entry in the host's apt sources."""
    entries: list[tuple[str, list[str]]] = []
    paths: list[str] = []
    for p in HOST_SOURCES:
        if os.path.isdir(p):
            paths += sorted(glob.glob(os.path.join(p, "*.sources")))
            paths += sorted(glob.glob(os.path.join(p, "*.list")))
        elif os.path.isfile(p):
            paths.append(p)
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        if path.endswith(".sources"):
            entries += _parse_deb822(text)
        else:
            entries += _parse_one_line(text)
    return entries


def _parse_deb822(text: str) -> list[tuple[str, list[str]]]:
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
            if m:
                fields[m.group(1).lower()] = m.group(2).strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            out.append((uri, fields.get("suites", "").split()))
    return out


def _parse_one_line(text: str) -> list[tuple[str, list[str]]]:
    out = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            out.append((words[1], [words[2]]))
    return out


def mirror_uris() -> tuple[str, str | None]:
    """(archive URI, security URI) of the host's Debian sources; security is None when the
    sources name no security suite (debootstrap's sources.list names only `CODENAME main`):
    the archive does not carry `CODENAME-security`, and apt-get update would fail on it."""
    archive = security = None
    for uri, suites in _host_source_entries():
        for suite in suites:
            if suite.endswith("-security"):
                security = security or uri
            elif "/" not in suite and not suite.endswith("-backports"):
                archive = archive or uri
    if not archive:
        raise KernelError(f"no Debian archive entry found in the host's apt sources {HOST_SOURCES}")
    return archive, security


# ---------------------------------------------------------------- private apt

def _apt_env(codename: str) -> dict[str, str]:
    """Environment whose APT_CONFIG points at a private config for `codename`."""
    base = cache_root() / "apt" / codename
    conf = base / "apt.conf"
    if not conf.exists():
        _write_private_apt(base, codename)
    env = dict(os.environ, APT_CONFIG=str(conf), DEBIAN_FRONTEND="noninteractive")
    return env


def _write_private_apt(base: Path, codename: str) -> None:
    archive, security = mirror_uris()
    for d in ("lists/partial", "archives/partial", "sources.list.d", "preferences.d"):
        (base / d).mkdir(parents=True, exist_ok=True)
    signed = f"[arch=amd64 signed-by={KEYRING}]"
    lines = [f"deb {signed} {archive} {codename} main"]
    if codename not in ROLLING:
        lines.append(f"deb {signed} {archive} {codename}-updates main")
    if security and codename not in ROLLING:
        lines.append(f"deb {signed} {security} {codename}-security main")
    (base / "sources.list").write_text("\n".join(lines) + "\n")
    (base / "status").touch()
    # The host's apt.conf.d is still read (it may hold proxy or mirror-date settings).
    settings = {
        "Dir::State": base,
        "Dir::State::Lists": base / "lists",
        "Dir::State::status": base / "status",
        "Dir::Cache": base,
        "Dir::Cache::Archives": base / "archives",
        "Dir::Etc::SourceList": base / "sources.list",
        "Dir::Etc::SourceParts": base / "sources.list.d",
        "Dir::Etc::PreferencesParts": base / "preferences.d",
        "APT::Architecture": "amd64",
        "APT::Architectures": "amd64",
        # The cache dir is usually not readable by the _apt sandbox user.
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else os.environ.get("USER", ""),
        "Debug::NoLocking": "true",
    }
    (base / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in settings.items()))


def _run(cmd: list[str], env: dict[str, str], cwd: str | None = None) -> str:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc.stdout


def _apt_update(codename: str, env: dict[str, str]) -> None:
    _run(["apt-get", "update", "-q"], env)


def newest_package(name: str, env: dict[str, str]) -> str:
    """Name of the newest plain -amd64 image package for kernel `name`."""
    codename, glob_ = KERNELS[name]
    prefix, suffix = (re.escape(part) for part in glob_.split("*"))
    # sid names its kernels 7.2.13+deb14-amd64: the Debian tag may follow the number.
    pattern = re.compile(rf"^{prefix}(\d+)(?:\+deb\d+)?{suffix}(-unsigned)?$")
    found: dict[int, list[str]] = {}
    names = _run(["apt-cache", "pkgnames", glob_.split("*")[0]], env).split()
    for pkg in names:
        m = pattern.match(pkg)
        if m:
            found.setdefault(int(m.group(1)), []).append(pkg)
    if not found:
        raise KernelError(f"cannot find {glob_} in {codename} (with -updates and "
                          f"-security where the host has it): apt-cache lists {len(names)} packages "
                          f"starting {glob_.split('*')[0]!r}, none plain -amd64")
    # Prefer the signed package (no '-unsigned' suffix): both hold the same vmlinuz.
    return min(found[max(found)], key=len)


def newest_series(env: dict[str, str]) -> str:
    """The highest kernel series ("7.2") with a plain -amd64 image package in sid."""
    pattern = re.compile(r"^linux-image-(\d+)\.(\d+)\.(\d+)(?:\+deb\d+)?-amd64$")
    versions = [tuple(int(g) for g in m.groups()) for pkg in _run(["apt-cache", "pkgnames", "linux-image-"], env).split()
                if (m := pattern.match(pkg))]
    if not versions:
        raise KernelError(f"no plain linux-image-X.Y.Z-amd64 package in {NEWEST_CODENAME}")
    major, minor, _ = max(versions)
    return f"{major}.{minor}"


def resolve_name(name: str, log: Callable[[str], None] = print) -> str:
    """`name` itself, or for NEWEST the series sid has now (added to KERNELS)."""
    if name != NEWEST:
        return name
    with _apt_lock(NEWEST_CODENAME):
        env = _apt_env(NEWEST_CODENAME)
        log(f"[{name}] apt-get update ({NEWEST_CODENAME}, private APT_CONFIG)")
        _apt_update(NEWEST_CODENAME, env)
        series = newest_series(env)
    KERNELS.setdefault(series, (NEWEST_CODENAME, f"linux-image-{series}.*-amd64"))
    log(f"[{name}] the newest kernel Debian offers is {series} ({NEWEST_CODENAME})")
    return series


# ---------------------------------------------------------------- fetch and unpack

def _package_version(deb: Path) -> str:
    return _run(["dpkg-deb", "-f", str(deb), "Version"], dict(os.environ)).strip()


def _download(package: str, env: dict[str, str], into: Path) -> Path:
    _run(["apt-get", "download", "-q", package], env, cwd=str(into))
    debs = list(into.glob(f"{package}_*.deb"))
    if len(debs) != 1:
        raise KernelError(f"apt-get download {package} left {len(debs)} .deb files in {into}")
    return debs[0]


def _modules_dir(root: Path, release: str) -> Path | None:
    return next((m for m in (root / "lib/modules" / release, root / "usr/lib/modules" / release)
                 if m.is_dir()), None)


def split_parts(deb: Path) -> list[str]:
    """The linux-binary/base/modules packages a split (sid) image package depends on."""
    depends = _run(["dpkg-deb", "-f", str(deb), "Depends"], dict(os.environ))
    names = [alt.split()[0] for dep in depends.split(",") for alt in dep.split("|") if alt.strip()]
    return [n for n in names if SPLIT_PARTS.match(n)]


def _vmlinuz(root: Path) -> tuple[Path, str]:
    """The kernel image in an unpacked root and its release: boot/vmlinuz-RELEASE (bookworm and
    older) or usr/lib/modules/RELEASE/vmlinuz (sid's linux-binary-*)."""
    images = [(p, p.name[len("vmlinuz-"):]) for p in sorted(root.glob("boot/vmlinuz-*"))]
    images += [(p, p.parent.name) for p in sorted(root.glob("usr/lib/modules/*/vmlinuz"))]
    if len(images) != 1:
        raise KernelError(f"expected one kernel image (boot/vmlinuz-* or usr/lib/modules/*/vmlinuz) "
                          f"in {root}, found {len(images)}")
    return images[0]


def _unpack(debs: list[Path], root: Path) -> str:
    """dpkg-deb -x the kernel's packages into `root` and run depmod; returns the release."""
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)], dict(os.environ))
    _, release = _vmlinuz(root)
    modules = _modules_dir(root, release)
    if modules is None:
        raise KernelError(f"{debs[0].name}: no lib/modules/{release} inside")
    # The .deb ships no modules.dep (its postinst makes it); without it modprobe in the guest
    # fails and virtme-ng would run depmod itself on every boot.
    _run(["depmod", "-a", "-b", str(modules.parents[2]), release], dict(os.environ))
    return release


def _load_cached(meta: Path) -> Kernel | None:
    try:
        k = Kernel(**json.loads(meta.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return k if os.path.isfile(k.vmlinuz) and os.path.isdir(k.modules) else None


def fetch_kernel(name: str, log: Callable[[str], None] = print) -> Kernel:
    """Return kernel `name`, downloading and unpacking it on first use only."""
    if name in BUILT_KERNELS:
        built = _load_cached(cache_root() / "kernels" / name / "kernel.json")
        if built is None:
            raise KernelError(f"kernel {name!r} is built, not downloaded, and is not in the cache: "
                              f"run {BUILT_KERNELS[name]} first (a long build, done once)")
        return built
    name = resolve_name(name, log)
    if name not in KERNELS:
        raise KernelError(f"unknown kernel {name!r}; known: {', '.join([*KERNELS, *BUILT_KERNELS, NEWEST])} "
                          "(or 'host')")
    kdir = cache_root() / "kernels" / name
    kdir.mkdir(parents=True, exist_ok=True)
    meta = kdir / "kernel.json"
    with open(kdir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runners must not unpack the same kernel at once
        cached = _load_cached(meta)
        if cached:
            return cached
        codename = KERNELS[name][0]
        package, deb_version = "", ""
        with tempfile.TemporaryDirectory(dir=kdir, prefix="tmp-") as tmp:
            with _apt_lock(codename):  # 6.1 and 6.12 share bookworm's private apt state
                env = _apt_env(codename)
                log(f"[{name}] apt-get update ({codename}, private APT_CONFIG)")
                _apt_update(codename, env)
                package = newest_package(name, env)
                log(f"[{name}] downloading and unpacking {package}")
                debs = [_download(package, env, Path(tmp))]
                for part in split_parts(debs[0]):
                    log(f"[{name}] downloading {part} (part of the split kernel)")
                    debs.append(_download(part, env, Path(tmp)))
            release = _unpack(debs, Path(tmp) / "root")
            deb_version = _package_version(debs[0])
            shutil.rmtree(kdir / "root", ignore_errors=True)
            os.rename(Path(tmp) / "root", kdir / "root")
        root = kdir / "root"
        kernel = Kernel(name, package, deb_version, release, str(_vmlinuz(root)[0]),
                        str(_modules_dir(root, release)))
        meta.write_text(json.dumps(dataclasses.asdict(kernel), indent=1) + "\n")
        return kernel


@contextlib.contextmanager
def _apt_lock(codename: str) -> Iterator[None]:
    path = cache_root() / "apt" / f"{codename}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:] or list(KERNELS):
        print(fetch_kernel(arg))
