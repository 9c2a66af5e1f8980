# SPDX-License-Identifier: Apache-2.0
"""integration/vm_kernels.py: how Debian kernel packages are found and unpacked.

Package lists are stand-ins for `apt-cache pkgnames` (the names are sid's and bookworm's as of
November 2026); the .deb files are real ones built here with dpkg-deb."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
import vm_kernels  # noqa: E402

SID_IMAGES = """linux-image-7.2.13+deb14-amd64 linux-image-7.2.13+deb14-amd64-dbg
linux-image-7.2.13+deb14-cloud-amd64 linux-image-7.2.13+deb14-rt-amd64 linux-image-6.19.9+deb14-amd64
linux-image-7.2.9+deb14-amd64 linux-image-amd64"""


# The unpacking runs depmod (kmod's; scripts/setup.sh installs it): say so instead of failing.
NEEDS_DEPMOD = pytest.mark.skipif(shutil.which("depmod") is None,
                                  reason="needs depmod on PATH (Debian's kmod package; scripts/setup.sh installs it)")


def fake_apt(monkeypatch: pytest.MonkeyPatch, names: str) -> None:
    monkeypatch.setattr(vm_kernels, "_run", lambda cmd, env, cwd=None: names)


def test_sid_kernels_are_found_by_series_and_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_apt(monkeypatch, SID_IMAGES)
    assert vm_kernels.newest_package("7.2", {}) == "linux-image-7.2.13+deb14-amd64"
    assert vm_kernels.newest_series({}) == "7.2"
    fake_apt(monkeypatch, "linux-image-6.12.111+deb12-amd64 linux-image-6.12.94+deb12-amd64 "
                          "linux-image-6.12.111+deb12-cloud-amd64")
    assert vm_kernels.newest_package("6.12", {}) == "linux-image-6.12.111+deb12-amd64"


def build_deb(tmp: Path, name: str, depends: str | None, files: dict[str, bytes]) -> Path:
    root = tmp / f"pkg-{name}"
    (root / "DEBIAN").mkdir(parents=True)
    control = f"Package: {name}\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n"
    if depends:
        control += f"Depends: {depends}\n"
    (root / "DEBIAN" / "control").write_text(control)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    deb = tmp / f"{name}.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "-b", str(root), str(deb)], check=True, capture_output=True)
    return deb


@NEEDS_DEPMOD
def test_a_split_kernel_unpacks_into_one_root(tmp_path: Path) -> None:
    """sid's image package holds no kernel: its linux-binary/base/modules dependencies do."""
    rel = "7.2.13+deb14-amd64"
    meta = build_deb(tmp_path, f"linux-image-{rel}", f"dracut | initramfs-tools (>= 0.120), "
                     f"linux-base-{rel} (= 1.0-1), linux-binary-{rel} (= 1.0-1), linux-modules-{rel} (= 1.0-1)",
                     {"usr/share/doc/x/copyright": b"x"})
    assert vm_kernels.split_parts(meta) == [f"linux-base-{rel}", f"linux-binary-{rel}", f"linux-modules-{rel}"]
    binary = build_deb(tmp_path, f"linux-binary-{rel}", None, {f"usr/lib/modules/{rel}/vmlinuz": b"kernel"})
    modules = build_deb(tmp_path, f"linux-modules-{rel}", None,
                        {f"usr/lib/modules/{rel}/kernel/fs/9p/9p.ko": b"", f"usr/lib/modules/{rel}/modules.order": b""})
    root = tmp_path / "root"
    assert vm_kernels._unpack([meta, binary, modules], root) == rel
    assert vm_kernels._vmlinuz(root) == (root / f"usr/lib/modules/{rel}/vmlinuz", rel)
    assert (root / f"usr/lib/modules/{rel}/modules.dep").exists()  # depmod ran


@NEEDS_DEPMOD
def test_a_bookworm_image_keeps_its_boot_layout(tmp_path: Path) -> None:
    rel = "6.1.0-99-amd64"
    deb = build_deb(tmp_path, f"linux-image-{rel}", "kmod, linux-base (>= 4.3~)",
                    {f"boot/vmlinuz-{rel}": b"kernel", f"lib/modules/{rel}/modules.order": b""})
    assert vm_kernels.split_parts(deb) == []
    root = tmp_path / "root"
    assert vm_kernels._unpack([deb], root) == rel
    assert vm_kernels._vmlinuz(root)[0] == root / f"boot/vmlinuz-{rel}"
