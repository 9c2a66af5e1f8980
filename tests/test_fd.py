# SPDX-License-Identifier: Apache-2.0
"""bpfkit._kernel.fd.FD: one owner per descriptor, closed exactly once, never fd 0."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from bpfkit._kernel.fd import FD
from bpfkit.errors import UsageError

REPO = Path(__file__).resolve().parent.parent


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_close_is_explicit_and_idempotent() -> None:
    r, w = os.pipe()
    os.close(w)
    fd = FD(r)
    assert fd.raw == r and int(fd) == r and fd.fileno() == r and not fd.closed
    fd.close()
    assert fd.closed and not _is_open(r)
    fd.close()  # nothing happens
    # Another file may reuse the number; a second close must not touch it.
    r2, w2 = os.pipe()
    try:
        fd.close()
        assert _is_open(r2) and _is_open(w2)
    finally:
        os.close(r2)
        os.close(w2)
    with pytest.raises(UsageError, match="closed"):
        fd.raw
    assert repr(fd) == "FD(closed)"


def test_context_manager_closes() -> None:
    r, w = os.pipe()
    os.close(w)
    with FD(r) as fd:
        assert repr(fd) == f"FD({r})"
    assert fd.closed and not _is_open(r)


def test_dup_is_independent_and_cloexec() -> None:
    r, w = os.pipe()
    with FD(r) as fd, FD(w) as wfd:
        dup = fd.dup()
        assert dup.raw not in (r, w, 0)
        assert not os.get_inheritable(dup.raw)
        fd.close()
        os.write(wfd.raw, b"x")
        assert os.read(dup.raw, 1) == b"x"  # still the same pipe
        dup.close()
        assert not _is_open(r)


def test_release_gives_up_ownership() -> None:
    r, w = os.pipe()
    os.close(w)
    fd = FD(r)
    assert fd.release() == r
    assert fd.closed
    del fd
    gc.collect()
    assert _is_open(r)
    os.close(r)


def test_finalizer_closes_a_leaked_fd_with_a_warning() -> None:
    r, w = os.pipe()
    os.close(w)
    fd = FD(r)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del fd
        gc.collect()
    assert not _is_open(r)
    assert any(issubclass(c.category, ResourceWarning) and str(r) in str(c.message) for c in caught)


def test_negative_fd_is_rejected() -> None:
    with pytest.raises(UsageError):
        FD(-1)


def test_never_fd_zero() -> None:
    """With stdin closed the next descriptor is 0; FD moves it (0 means "no fd" in bpf_attr)."""
    code = textwrap.dedent(
        """
        import os, sys
        sys.path.insert(0, sys.argv[1])
        from bpfkit._kernel.fd import FD
        os.close(0)
        r, w = os.pipe()          # r lands on 0
        assert r == 0, r
        fd = FD(r)
        assert fd.raw != 0, fd.raw
        try:
            os.fstat(0)
            print("fd 0 still open")
        except OSError:
            pass
        os.write(w, b"ok")
        print(os.read(fd.raw, 2).decode(), fd.raw)
        dup = fd.dup()
        assert dup.raw != 0
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert words[0] == "ok" and int(words[1]) > 0, proc.stdout


def test_memlock_is_raised_only_before_5_11(monkeypatch):
    """Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; newer ones must be left alone.
    The kernel release is faked (the host's is 6.18); setrlimit is observed, not called."""
    import resource

    from bpfkit._kernel import rlimit

    calls = []
    monkeypatch.setattr(resource, "setrlimit", lambda *a: calls.append(a))
    for release, raised in (("5.10.0-46-amd64", True), ("5.11.0", False), ("6.18.44-fc", False)):
        rlimit.bump_memlock.cache_clear()
        monkeypatch.setattr(rlimit.os, "uname", lambda r=release: type("U", (), {"release": r})())
        assert rlimit.bump_memlock() is raised
    assert len(calls) == 1
    rlimit.bump_memlock.cache_clear()
