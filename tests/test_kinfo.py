# SPDX-License-Identifier: Apache-2.0
"""Where bpfkit looks for the kernel configuration (no privileges needed)."""

import gzip
import os
from pathlib import Path

import pytest

from bpfkit._kernel import kinfo
from bpfkit.errors import NotFoundError


def test_candidates_follow_libbpf_then_the_modules_dir() -> None:
    release = os.uname().release
    assert kinfo.kconfig_candidates() == [
        f"/boot/config-{release}",
        "/proc/config.gz",
        # Debian's split 7.x packages (sid) keep the configuration beside the modules only.
        f"/usr/lib/modules/{release}/config",
    ]


def test_first_existing_candidate_wins_and_gzip_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules_config = tmp_path / "config"
    modules_config.write_bytes(gzip.compress(b"CONFIG_HZ=250\n"))
    monkeypatch.setattr(kinfo, "kconfig_candidates",
                        lambda: [str(tmp_path / "absent"), str(modules_config)])
    assert kinfo.read_kconfig() == ("CONFIG_HZ=250\n", str(modules_config))


def test_nothing_found_names_every_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    places = [str(tmp_path / "a"), str(tmp_path / "b")]
    monkeypatch.setattr(kinfo, "kconfig_candidates", lambda: places)
    with pytest.raises(NotFoundError, match=f"looked at {places[0]}, {places[1]}"):
        kinfo.read_kconfig()
