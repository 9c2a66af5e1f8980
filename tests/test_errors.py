# SPDX-License-Identifier: Apache-2.0
"""bpfkit.errors: messages name what, on what and why; wrap keeps class and attributes."""

from __future__ import annotations

import errno

import pytest

from bpfkit.errors import (
    BPFKitError,
    BusyError,
    KernelError,
    KernelNotSupportedError,
    KernelPermissionError,
    NotFoundError,
    NotSupportedError,
    ParseError,
    RingBufferFullError,
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
    assert issubclass(KernelError, OSError) and not issubclass(NotSupportedError, OSError)
    assert issubclass(KernelNotSupportedError, KernelError) and issubclass(KernelNotSupportedError, NotSupportedError)


def test_kernel_error_is_an_oserror_with_the_kernels_errno() -> None:
    exc = kernel_error("BPF_MAP_CREATE", errno.EINVAL, "map 'events'")
    assert isinstance(exc, OSError)
    assert (exc.errno, exc.strerror, exc.filename) == (errno.EINVAL, "Invalid argument", None)
    assert str(exc) == "BPF_MAP_CREATE: EINVAL (Invalid argument): map 'events'"  # not "[Errno 22] ..."
    assert exc.args == (str(exc),)
    with pytest.raises(OSError) as info:
        raise kernel_error("BPF_OBJ_GET", errno.ENOENT, "/sys/fs/bpf/gone", "/sys/fs/bpf/gone")
    assert info.value.errno == errno.ENOENT and info.value.filename == "/sys/fs/bpf/gone"
    assert type(info.value) is KernelError  # not FileNotFoundError: the class is bpfkit's
    for err in (errno.EPERM, errno.EBUSY):
        assert isinstance(kernel_error("BPF_LINK_CREATE", err), OSError)
    assert isinstance(VerifierError("BPF_PROG_LOAD", errno.EACCES, "p", "R0 !read_ok"), OSError)


@pytest.mark.parametrize("err", [errno.EOPNOTSUPP, 524])  # ENOTSUP is EOPNOTSUPP on Linux
def test_unsupported_errnos_are_not_supported_errors(err: int) -> None:
    """One except for "this kernel cannot", from bpfkit's probes or from the kernel."""
    for exc in (kernel_error("BPF_LINK_CREATE", err, "kprobe_multi"), KernelError("BPF_LINK_CREATE", err, "kprobe_multi")):
        assert type(exc) is KernelNotSupportedError
        assert isinstance(exc, NotSupportedError) and isinstance(exc, KernelError) and isinstance(exc, OSError)
        assert exc.errno == err
        assert str(exc) == f"BPF_LINK_CREATE: {errno_name(err)} ({exc.strerror}): kprobe_multi"  # KernelError's words
        assert exc.feature == "BPF_LINK_CREATE" and exc.reason == f"{errno_name(err)} ({exc.strerror}): kprobe_multi"
        assert exc.min_version == ""
    assert type(kernel_error("x", errno.EINVAL)) is KernelError and not isinstance(kernel_error("x", errno.EINVAL),
                                                                                NotSupportedError)
    # a rejected load stays a VerifierError (its log says why), whatever the errno
    assert not isinstance(VerifierError("BPF_PROG_LOAD", 524, "p", "kfunc not supported"), NotSupportedError)


def test_not_supported_fields_are_set_when_built() -> None:
    exc = NotSupportedError("uprobe_multi links", "BPF_LINK_CREATE gave EINVAL", "6.6",
                            hints=("attach with mode='perf'", ""))
    assert (exc.feature, exc.reason, exc.min_version, exc.hints) == (
        "uprobe_multi links", "BPF_LINK_CREATE gave EINVAL", "6.6", ("attach with mode='perf'",))
    assert str(exc) == ("uprobe_multi links is not supported: BPF_LINK_CREATE gave EINVAL (needs Linux 6.6 or newer); "
                        "attach with mode='perf'")
    kernel = KernelNotSupportedError("create netkit pair nk0/nk1", errno.EOPNOTSUPP, feature="netkit devices",
                                     min_version="6.7", hints=("CONFIG_NETKIT=y",))
    assert (kernel.feature, kernel.min_version, kernel.hints) == ("netkit devices", "6.7", ("CONFIG_NETKIT=y",))
    assert kernel.reason == "EOPNOTSUPP (Operation not supported)"
    assert str(kernel) == ("create netkit pair nk0/nk1: EOPNOTSUPP (Operation not supported) (needs Linux 6.7 or newer); "
                           "CONFIG_NETKIT=y")
    assert NotSupportedError("x").hints == () and KernelError("x", errno.EIO).hints == ()


def test_hints_are_fields_rendered_after_the_detail() -> None:
    exc = KernelError("BPF_MAP_CREATE", errno.EINVAL, "map 'm'", hints=("set value_size", "or --map-size"))
    assert exc.hints == ("set value_size", "or --map-size") and exc.detail == "map 'm'"
    assert str(exc) == "BPF_MAP_CREATE: EINVAL (Invalid argument): map 'm'; set value_size; or --map-size"
    assert str(KernelError("op", errno.EINVAL, hints=("h",))) == "op: EINVAL (Invalid argument): h"
    perm = KernelPermissionError("BPF_PROG_LOAD", errno.EPERM, "CAP_BPF", "program 'p'")
    assert perm.hint == "needs CAP_BPF" and perm.hints == ("needs CAP_BPF",) and perm.detail == "program 'p'"
    assert str(perm) == "BPF_PROG_LOAD: EPERM (Operation not permitted): program 'p'; needs CAP_BPF"
    same = perm.add_hint("tracing programs also need CAP_PERFMON")
    assert same is perm and perm.hints == ("needs CAP_BPF", "tracing programs also need CAP_PERFMON")
    assert str(perm).endswith("; needs CAP_BPF; tracing programs also need CAP_PERFMON") and perm.args == (str(perm),)
    assert str(ParseError("bad", hints=("h",))) == "bad; h"
    perm.replace_hint("needs CAP_BPF", "needs CAP_BPF and CAP_PERFMON")
    assert perm.hints[0] == "needs CAP_BPF and CAP_PERFMON" and "program 'p'; needs CAP_BPF and CAP_PERFMON; " in str(perm)
    assert perm.replace_hint("not a hint", "x").hints[0] == "needs CAP_BPF and CAP_PERFMON"


def test_rebuilding_from_the_detail_does_not_repeat_the_permission_hint() -> None:
    """The detail is what the raise site said, the hint a field: an error rebuilt from
    ``op, errno, detail`` (link/_prog_arg.py's explained()) carries its permission hint once."""
    exc = kernel_error("BPF_PROG_ATTACH", errno.EPERM, "cgroup /sys/fs/cgroup")
    hint = exc.hints[0]
    again = kernel_error(exc.op, exc.errno, f"what it means here; {exc.detail}")
    assert str(again).count(hint) == 1


def test_ring_buffer_full_error_lives_with_the_tree() -> None:
    from bpfkit.events import RingBufferFullError as from_events
    from bpfkit.events.ringbuf import RingBufferFullError as from_ringbuf

    assert from_events is from_ringbuf is RingBufferFullError
    assert issubclass(RingBufferFullError, BPFKitError) and RingBufferFullError.__module__ == "bpfkit.errors"


def test_errors_pickle_whole() -> None:
    """An error crosses a process pool or multiprocessing queue as it was: class, message,
    errno, hints and fields (a KernelError's constructor takes op and errno, not its message,
    so the default pickling of exceptions failed: TypeError on loads)."""
    import errno
    import pickle

    from bpfkit.errors import (
        BusyError,
        KernelError,
        KernelNotSupportedError,
        KernelPermissionError,
        NotSupportedError,
        UsageError,
        VerifierError,
    )

    cases = [
        KernelError("BPF_MAP_CREATE", errno.EINVAL, "max_entries 0", hints=["give it a size"]),
        KernelError("BPF_LINK_CREATE", errno.EOPNOTSUPP),
        KernelPermissionError("BPF_PROG_LOAD", errno.EPERM, "CAP_BPF"),
        BusyError("BPF_LINK_CREATE", errno.EBUSY),
        VerifierError("BPF_PROG_LOAD", errno.EACCES, "prog", "0: R0 !read_ok\n"),
        NotSupportedError("kprobe_multi", "no CONFIG_FPROBE", min_version="5.18"),
        UsageError("bad spec").add_hint("see docs/links.md"),
    ]
    for error in cases:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error) and back.args == error.args and back.hints == error.hints
        assert vars(back) == vars(error)
        if isinstance(error, OSError):
            assert isinstance(back, OSError) and (back.errno, back.strerror) == (error.errno, error.strerror)
    assert isinstance(pickle.loads(pickle.dumps(cases[1])), KernelNotSupportedError)
