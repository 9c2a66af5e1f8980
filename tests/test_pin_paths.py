# SPDX-License-Identifier: Apache-2.0
"""Pin names and pin directories (bpfkit._kernel.bpffs): names from the object must be one path
component that stays in its directory; directories are judged by statfs before creation."""

from __future__ import annotations

import os

import pytest

from bpfkit._kernel import bpffs
from bpfkit.errors import UsageError


@pytest.mark.parametrize("name, why", [
    ("../x", "it contains '/', so its pin would leave the pin directory"),
    ("/sys/fs/bpf/other", "it contains '/', so its pin would leave the pin directory"),
    ("a/b", "it contains '/', so its pin would leave the pin directory"),
    (".", "'.' names a directory, not a pin"),
    ("..", "'..' names a directory, not a pin"),
    ("", "it is empty"),
    ("a\0b", "it contains a NUL byte"),
])
def test_bad_names_are_refused_with_the_reason(name: str, why: str) -> None:
    with pytest.raises(UsageError) as info:
        bpffs.pin_path("/sys/fs/bpf/x", name, "map pinned by name")
    assert str(info.value) == f"map pinned by name {name!r} cannot be pinned: {why}; rename it in the object"


def test_good_names_pass() -> None:
    assert bpffs.pin_path("/sys/fs/bpf/x", "counter", "map") == "/sys/fs/bpf/x/counter"
    assert bpffs.pin_path("/sys/fs/bpf/x", "..rodata", "map") == "/sys/fs/bpf/x/..rodata"  # not '..'


def test_derived_pin_name_is_checked_too() -> None:
    with pytest.raises(UsageError, match=r"^map '\.\./m': pin name '/m' cannot be pinned") as info:
        bpffs.check_pin_name("/m", "map '../m': pin name")
    assert info.value
    with pytest.raises(UsageError, match=r"^map '\.\.' cannot be pinned"):
        bpffs.pin_path("/d", "..", "map", "")


def test_a_symlink_out_of_the_directory_is_refused(tmp_path) -> None:
    (tmp_path / "pins").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "pins" / "counter")
    with pytest.raises(UsageError, match=r"resolves to .*/elsewhere, outside .*/pins$"):
        bpffs.pin_path(str(tmp_path / "pins"), "counter", "map")


def test_a_directory_off_bpffs_is_refused_before_creation(tmp_path) -> None:
    with pytest.raises(UsageError) as info:
        bpffs.check_pin_dir(str(tmp_path / "a" / "b"), "--pin")
    assert str(info.value) == (f"--pin {tmp_path}/a/b is not on a bpf filesystem ({tmp_path} is not bpffs); "
                               "pins live in bpffs (mount -t bpf bpf DIR); nothing was created")
    assert not (tmp_path / "a").exists()


def test_dotdot_is_resolved_before_judging() -> None:
    with pytest.raises(UsageError, match=r"^PIN_DIR /sys/fs/bpf/\.\./\.\./tmp/x \(resolved: /sys/tmp/x\) is not on a "
                                         r"bpf filesystem \(/sys is not bpffs\)"):
        bpffs.check_pin_dir("/sys/fs/bpf/../../tmp/x", "PIN_DIR")


@pytest.mark.skipif(not os.path.ismount("/sys/fs/bpf"), reason="needs bpffs mounted at /sys/fs/bpf")
def test_statfs_magic_of_bpffs() -> None:
    assert bpffs.fs_magic("/sys/fs/bpf") == bpffs.BPF_FS_MAGIC == 0xCAFE4A11
    assert bpffs.is_bpffs("/sys/fs/bpf/does/not/exist/yet")
    assert not bpffs.is_bpffs("/tmp")


def test_make_dirs_records_what_it_made_and_undoes_it(tmp_path) -> None:
    made: list[str] = []
    bpffs.make_dirs(str(tmp_path / "a" / "b"), made)
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    bpffs.remove_dirs(made)
    assert not (tmp_path / "a").exists() and made == []
