# SPDX-License-Identifier: Apache-2.0
"""bpfkit._files.read_regular: the one way bpfkit reads a file it is pointed at."""

from __future__ import annotations

import gzip
import os

import pytest

from bpfkit import _files
from bpfkit._kernel import kinfo
from bpfkit.errors import KernelError, NotFoundError, UsageError


def test_reads_a_regular_file(tmp_path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100_000)
    assert _files.read_regular(tmp_path / "f", "object", 1 << 20) == b"x" * 100_000


def test_reads_proc_files_whose_size_is_zero() -> None:
    assert os.stat("/proc/self/status").st_size == 0
    assert b"Name:" in _files.read_regular("/proc/self/status", "file", 1 << 20)


def test_fifo_does_not_block(tmp_path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(UsageError, match=r"^object .*/p is a FIFO, not a regular file$"):
        _files.read_regular(tmp_path / "p", "object", 1 << 20)


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"), ("/", "a directory")])
def test_other_kinds(path: str, kind: str) -> None:
    with pytest.raises(UsageError, match=f"^binary {path} is {kind}, not a regular file$"):
        _files.read_regular(path, "binary", 1 << 20)


def test_size_limit_by_stat_and_by_reading(tmp_path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 2048)
    with pytest.raises(UsageError, match=r"is 2048 bytes, over bpfkit's size limit for it \(1024 bytes\)$"):
        _files.read_regular(tmp_path / "f", "object", 1024)
    # procfs reports size 0: the limit holds on what is read.
    with pytest.raises(UsageError, match=r"^file /proc/self/maps is over bpfkit's size limit for it \(10 bytes\)$"):
        _files.read_regular("/proc/self/maps", "file", 10)


def test_missing_and_unreadable(tmp_path) -> None:
    with pytest.raises(NotFoundError, match="no such file"):
        _files.read_regular(tmp_path / "none", "object", 10)
    with pytest.raises(KernelError, match=r"^read binary: EIO \(Input/output error\): /proc/self/mem$"):
        _files.read_regular("/proc/self/mem", "binary", 1 << 20)


def test_kernel_config_gzip_bomb_is_bounded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(kinfo, "CONFIG_LIMIT", 1 << 20)
    (tmp_path / "config.gz").write_bytes(gzip.compress(b"#" * (4 << 20)))
    with pytest.raises(UsageError, match=r"decompresses to more than bpfkit's limit for a kernel config \(1 MiB\)"):
        kinfo.read_kconfig(str(tmp_path / "config.gz"))
    (tmp_path / "ok.gz").write_bytes(gzip.compress(b"CONFIG_BPF=y\n"))
    assert kinfo.read_kconfig(str(tmp_path / "ok.gz"))[0] == "CONFIG_BPF=y\n"
