# SPDX-License-Identifier: Apache-2.0
"""bpfkit.errors: messages name what, on what and why; wrap keeps class and attributes."""

from __future__ import annotations

import errno

import pytest

from bpfkit.errors import (
    BPFKitError,
    BusyError,
    KernelError,
    KernelPermissionError,
    NotFoundError,
    NotSupportedError,
    ParseError,
    UsageError,
    VerifierError,
    errno_name,
    kernel_error,
)


def test_errno_names_as_the_kernel_spells_them() -> None:
    assert errno_name(errno.EPERM) == "EPERM"
    assert errno_name(errno.EINVAL) == "EINVAL"
    assert errno_name(errno.EOPNOTSUPP) == "EOPNOTSUPP"  # Python's table says ENOTSUP
    assert errno_name(524) == "ENOTSUPP"  # kernel-internal, leaks out of bpf()
    assert errno_name(9999) == "errno 9999"


def test_kernel_error_message_names_op_errno_and_detail() -> None:
    exc = KernelError("BPF_MAP_CREATE", errno.EINVAL, "map 'events'")
    assert str(exc) == "BPF_MAP_CREATE: EINVAL (Invalid argument): map 'events'"
    assert exc.errno == errno.EINVAL and exc.op == "BPF_MAP_CREATE" and exc.detail == "map 'events'"
    assert isinstance(exc, BPFKitError)


@pytest.mark.parametrize(
    "op, capability",
    [
        ("perf_event_open", "CAP_PERFMON"),
        ("BPF_PROG_LOAD", "CAP_BPF"),
        ("BPF_LINK_CREATE", "CAP_PERFMON"),
        ("BPF_PROG_GET_NEXT_ID", "CAP_SYS_ADMIN"),
        ("BPF_ENABLE_STATS", "CAP_SYS_ADMIN"),
        ("BPF_MAP_CREATE", "CAP_BPF"),  # the default
    ],
)
def test_eperm_names_the_capability(op: str, capability: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mapping from operation to capability, against a given effective set (the real
    /proc/self/status reading is tested with dropped capabilities in test_cap_hints.py)."""
    from bpfkit._kernel import caps

    everything = (1 << 41) - 1
    without = everything & ~(1 << {v: k for k, v in caps.CAP_NAMES.items()}[capability]) & ~(1 << caps.CAP_SYS_ADMIN)
    monkeypatch.setattr(caps, "_kernel_release", lambda: (6, 18))
    for err in (errno.EPERM, errno.EACCES):
        monkeypatch.setattr(caps, "effective", lambda: without)
        exc = kernel_error(op, err)
        assert isinstance(exc, KernelPermissionError)
        assert capability in exc.capability
        assert f"needs {capability}" in str(exc) and "which this process lacks" in str(exc)
        assert "(or root)" not in str(exc)
        assert str(exc).startswith(f"{op}: {errno_name(err)}")
        monkeypatch.setattr(caps, "effective", lambda: everything)
        exc = kernel_error(op, err)
        assert exc.capability == "" and "not a missing capability" in str(exc), str(exc)


def test_kernel_error_picks_the_subclass() -> None:
    assert type(kernel_error("x", errno.EBUSY)) is BusyError
    assert type(kernel_error("x", errno.EEXIST)) is BusyError
    assert type(kernel_error("x", errno.EINVAL)) is KernelError
    exc = kernel_error("BPF_PROG_LOAD", errno.EPERM, "program 'p'")
    assert type(exc) is KernelPermissionError and "program 'p'; " in str(exc)


def test_wrap_keeps_class_errno_and_attributes() -> None:
    exc = kernel_error("BPF_LINK_CREATE", errno.EPERM)
    same = exc.wrap("attach uprobe /bin/true:main")
    assert same is exc
    assert type(exc) is KernelPermissionError and exc.errno == errno.EPERM
    assert str(exc).startswith("attach uprobe /bin/true:main: BPF_LINK_CREATE: EPERM")
    exc.wrap("outer")
    assert str(exc).startswith("outer: attach uprobe /bin/true:main: ")
    assert exc.args == (str(exc),)
    with pytest.raises(KernelPermissionError, match="^outer: attach"):
        raise exc


def test_verifier_error_carries_the_log_and_shows_its_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(50)) + "\nR0 !read_ok\n"
    exc = VerifierError("BPF_PROG_LOAD", errno.EACCES, "handler", log)
    assert exc.log == log and exc.name == "handler" and not exc.truncated
    text = str(exc)
    assert "load 'handler' rejected" in text and text.endswith("R0 !read_ok")
    assert "line 0\n" not in text and "line 49" in text
    assert exc.tail(2) == "line 49\nR0 !read_ok"
    exc.wrap("load program 'handler' (kprobe)")
    assert exc.log == log and isinstance(exc, KernelError) and exc.errno == errno.EACCES


def test_verifier_error_with_empty_log_says_refused_before_verification() -> None:
    exc = VerifierError("BPF_PROG_LOAD", errno.EPERM, "fentry", "")
    assert "empty verifier log" in str(exc)


def test_not_supported_names_feature_reason_and_version() -> None:
    exc = NotSupportedError("BPF_LINK_TYPE_PERF_EVENT", "BPF_LINK_CREATE gave EINVAL", "5.15")
    assert str(exc) == ("BPF_LINK_TYPE_PERF_EVENT is not supported: BPF_LINK_CREATE gave EINVAL "
                        "(needs Linux 5.15 or newer)")
    assert (exc.feature, exc.reason, exc.min_version) == ("BPF_LINK_TYPE_PERF_EVENT", "BPF_LINK_CREATE gave EINVAL", "5.15")
    assert str(NotSupportedError("x")) == "x is not supported"
    assert str(exc.wrap("attach")).startswith("attach: BPF_LINK_TYPE_PERF_EVENT")
    assert exc.min_version == "5.15"


def test_tree() -> None:
    for cls in (KernelError, NotSupportedError, NotFoundError, ParseError, UsageError):
        assert issubclass(cls, BPFKitError)
    for cls in (KernelPermissionError, BusyError, VerifierError):
        assert issubclass(cls, KernelError)
    assert not issubclass(NotSupportedError, KernelError)
