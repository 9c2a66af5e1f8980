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


# ------------------------------------------------------------------------- write_atomic
VICTIM = b"another file, not to be written\n"


def _files_in(d) -> set[str]:
    return set(os.listdir(d))


def test_write_atomic_replaces_a_symlink_never_its_target(tmp_path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    (tmp_path / "out").symlink_to(victim)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    _files.write_atomic(tmp_path / "out", "new\n")
    _files.write_atomic(str(tmp_path / "dangling"), b"new\n")
    assert victim.read_bytes() == VICTIM and not (tmp_path / "nowhere").exists()
    for name in ("out", "dangling"):
        assert not (tmp_path / name).is_symlink() and (tmp_path / name).read_bytes() == b"new\n"
    assert _files_in(tmp_path) == {"victim", "out", "dangling"}


def test_write_atomic_mode_follows_the_umask(tmp_path) -> None:
    old = os.umask(0o027)
    try:
        _files.write_atomic(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o640  # mkstemp's 0600 widened as open() would


def test_write_atomic_long_name_and_undecodable_bytes(tmp_path) -> None:
    name = "é" * 127  # 254 bytes: the temporary name must still fit NAME_MAX
    _files.write_atomic(tmp_path / name, "path: \udcff\n")
    assert (tmp_path / name).read_bytes() == b"path: \xff\n"
    assert _files_in(tmp_path) == {name}


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "a FIFO"),
    (os.mkdir, "a directory"),
    (lambda p: os.symlink("/dev/null", p), r"a character device \(through a symbolic link\)"),
])
def test_write_atomic_refuses_what_a_rename_would_wrongly_replace(tmp_path, make, kind) -> None:
    target = tmp_path / "out"
    make(target)
    before = os.lstat(target)
    with pytest.raises(UsageError, match=f"^profile {target} is {kind}: bpfkit writes a new file and renames it"):
        _files.write_atomic(target, b"x", "profile")
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert _files_in(tmp_path) == {"out"}


def test_write_atomic_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(NotFoundError, match=r"^write skeleton .*/none/f.py: no such directory .*/none$"):
        _files.write_atomic(tmp_path / "none" / "f.py", b"x", "skeleton")
    with pytest.raises(KernelError, match=r"^write profile: ENOENT .*: a new file in /proc$"):
        _files.write_atomic("/proc/out.svg", b"x", "profile")


def test_write_atomic_removes_its_file_when_a_write_fails(tmp_path) -> None:
    """A real EFBIG: RLIMIT_FSIZE in a child process (SIGXFSZ ignored) lets the first write
    through in part and refuses the next; the target keeps its old content."""
    import subprocess
    import sys

    (tmp_path / "out").write_bytes(b"old")
    code = ("import resource, signal, sys; from bpfkit import _files; from bpfkit.errors import KernelError\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
            "try: _files.write_atomic(sys.argv[1], b'x' * 5000, 'profile')\n"
            "except KernelError as e: print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("write profile: EFBIG (File too large): ") and out.rstrip().endswith("/out")
    assert (tmp_path / "out").read_bytes() == b"old" and _files_in(tmp_path) == {"out"}


def test_write_atomic_removes_its_file_on_keyboard_interrupt(tmp_path, monkeypatch) -> None:
    """Mock: a Ctrl-C landing between the write and the rename cannot be timed with a real
    signal, so fsync raises it."""
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _files.write_atomic(tmp_path / "out", b"x" * 100)
    assert _files_in(tmp_path) == set()
