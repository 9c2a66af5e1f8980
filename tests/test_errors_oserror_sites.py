# SPDX-License-Identifier: Apache-2.0
"""The ``except OSError`` sites a KernelError reaches since it is an OSError keep what they did
before: an error bpfkit already built passes through (or is worded by its message), and only a
plain OSError from the os module is turned into a KernelError or a NotFoundError there."""

from __future__ import annotations

import errno
import types
from pathlib import Path

import pytest

from bpfkit import probelist
from bpfkit._kernel import bpffs
from bpfkit.collection import Collection
from bpfkit.errors import KernelError, NotFoundError, kernel_error


def test_pin_dir_check_failure_is_wrapped_not_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: str, what: str = "") -> str:
        raise kernel_error("mount bpffs", errno.EPERM, "at /sys/fs/bpf (for pin_dir /sys/fs/bpf/x)")

    monkeypatch.setattr(bpffs, "check_pin_dir", refuse)
    fake = types.SimpleNamespace(pin_dir="/sys/fs/bpf/x", _made_dirs=[])
    with pytest.raises(KernelError) as info:
        Collection._prepare_pin_dir(fake)  # type: ignore[arg-type]
    assert str(info.value).startswith("prepare pin directory /sys/fs/bpf/x: mount bpffs: EPERM")
    assert info.value.op == "mount bpffs"


def test_kernel_btf_file_read_error_stays_a_kernel_error(tmp_path: Path) -> None:
    from bpfkit.spec.core import btf_arg

    (tmp_path / "file").write_bytes(b"")
    under_a_file = tmp_path / "file" / "vmlinux.btf"  # ENOTDIR: read_regular's KernelError
    with pytest.raises(KernelError) as info:
        btf_arg(str(under_a_file))
    assert not isinstance(info.value, NotFoundError) and info.value.errno == errno.ENOTDIR
    assert str(info.value) == f"open BTF file: ENOTDIR (Not a directory): {under_a_file}"


def test_probe_list_words_a_kernel_error_by_its_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable() -> list[tuple[str, str]]:
        raise KernelError("read available_filter_functions", errno.EACCES, "/sys/kernel/tracing/x")

    monkeypatch.setattr(probelist.tracefs, "available_filter_functions", unreadable)
    notes: list[str] = []
    assert probelist._kprobe_functions(notes) == []
    assert "read available_filter_functions: EACCES (Permission denied): /sys/kernel/tracing/x" in notes[0]
    # a plain OSError is still worded by its errno
    monkeypatch.setattr(probelist.tracefs, "available_filter_functions",
                        lambda: (_ for _ in ()).throw(PermissionError(errno.EPERM, "Operation not permitted")))
    notes = []
    probelist._kprobe_functions(notes)
    assert "available_filter_functions: EPERM (Operation not permitted)" in notes[0]


def test_auto_attach_skips_a_bare_section_only_for_bpfkits_own_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare SEC("fentry") that bpfkit cannot attach is skipped; one the kernel refused with
    EOPNOTSUPP (a NotSupportedError too, now) is an error, as before."""
    from bpfkit.errors import NotSupportedError
    from bpfkit.link import attach

    prog = types.SimpleNamespace(section="fentry")
    monkeypatch.setattr(attach, "_attach_at_section", lambda *a: (_ for _ in ()).throw(NotSupportedError("x")))
    assert attach.auto_attach("p", prog) == "section 'fentry' names no target: x is not supported"  # type: ignore[arg-type]
    refused = KernelError("BPF_LINK_CREATE", errno.EOPNOTSUPP)
    monkeypatch.setattr(attach, "_attach_at_section", lambda *a: (_ for _ in ()).throw(refused))
    with pytest.raises(KernelError, match="^auto-attach program 'p': BPF_LINK_CREATE: EOPNOTSUPP"):
        attach.auto_attach("p", prog)  # type: ignore[arg-type]
