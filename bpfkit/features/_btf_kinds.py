# SPDX-License-Identifier: Apache-2.0
"""The BTF-kind feature probes (``btf``, ``btf_func``, ... ``btf_enum64``): load a hand-made
BTF blob using the kind. Loading an object asks them (bpfkit.btf.sanitize rewrites the kinds
the kernel lacks), so :mod:`bpfkit.features` runs them from here without importing
:mod:`bpfkit.features.probes`, whose ~120 probes cost ~1.4 ms to define; that module registers
them from :data:`KINDS` and re-exports the shared helpers (outcomes, errno wording, BTFBuilder).
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable

from .._kernel import bpf as _bpf
from ..errors import BPFKitError, KernelError, VerifierError, errno_name

ENOTSUPP = 524  # kernel-internal "operation not supported"; leaks to user space from bpf()

Outcome = tuple[bool, str]


def describe_errno(err: int) -> str:
    """``EINVAL (Invalid argument)``; ENOTSUPP (524), which has no libc name, spelled out."""
    if err == ENOTSUPP:
        return "ENOTSUPP (524, kernel-internal 'not supported')"
    return f"{errno_name(err)} ({os.strerror(err)})"


class Inconclusive(tuple):  # type: ignore[type-arg]
    """An Outcome that is no answer from the kernel about the feature (a transient or
    unexpected failure): reported as unsupported now, never cached, asked again next time."""


# Failures that say nothing about the feature and may pass: a signal (EINTR), memory pressure
# or a memcg limit (ENOMEM, ENOBUFS), "try again" (EAGAIN: the verifier under memory pressure,
# a busy tracefs), a resource held by someone else (EBUSY).
TRANSIENT_ERRNOS = frozenset({errno.EINTR, errno.EAGAIN, errno.ENOMEM, errno.ENOBUFS, errno.EBUSY})


def inconclusive(reason: str) -> Outcome:
    return Inconclusive((False, f"{reason} (inconclusive: not cached, asked again next time)"))


def is_definite(outcome: Outcome) -> bool:
    return not isinstance(outcome, Inconclusive)


def _failure(exc: BaseException) -> Outcome:
    """An error nobody expected: unsupported. A refusal (EPERM/EACCES) is the kernel's definite
    answer for this process; anything else is inconclusive and not cached."""
    err = getattr(exc, "errno", None)
    if err in (errno.EPERM, errno.EACCES):
        hint = getattr(exc, "hint", "") or "not permitted"
        return False, f"{describe_errno(err)}: {hint}"
    if isinstance(exc, BPFKitError):
        return inconclusive(f"probe failed: {exc}")
    return inconclusive(f"probe failed: {type(exc).__name__}: {exc}")


# ------------------------------------------------------------------------- BTF blobs
BTF_MAGIC = 0xEB9F
(KIND_INT, KIND_PTR, KIND_ARRAY, KIND_STRUCT, KIND_UNION, KIND_ENUM, KIND_FWD, KIND_TYPEDEF,
 KIND_VOLATILE, KIND_CONST, KIND_RESTRICT, KIND_FUNC, KIND_FUNC_PROTO, KIND_VAR, KIND_DATASEC,
 KIND_FLOAT, KIND_DECL_TAG, KIND_TYPE_TAG, KIND_ENUM64) = range(1, 20)


class BTFBuilder:
    """Just enough of the BTF encoding (Documentation/bpf/btf.rst) to hand-make probe blobs."""

    def __init__(self) -> None:
        self.types: list[bytes] = []
        self.strings = bytearray(b"\0")

    def name(self, text: str) -> int:
        if not text:
            return 0
        off = len(self.strings)
        self.strings += text.encode() + b"\0"
        return off

    def add(self, name: str, kind: int, vlen: int, size_or_type: int, extra: bytes = b"", kflag: int = 0) -> int:
        info = (kflag << 31) | (kind << 24) | vlen
        self.types.append(struct.pack("<III", self.name(name), info, size_or_type) + extra)
        return len(self.types)  # type ids start at 1

    def int_(self, name: str = "int", size: int = 4, signed: bool = True) -> int:
        return self.add(name, KIND_INT, 0, size, struct.pack("<I", ((1 if signed else 0) << 24) | (size * 8)))

    def encode(self) -> bytes:
        types = b"".join(self.types)
        strs = bytes(self.strings)
        header = struct.pack("<HBBIIIII", BTF_MAGIC, 1, 0, 24, 0, len(types), len(types), len(strs))
        return header + types + strs


def _btf_int_only() -> bytes:
    b = BTFBuilder()
    b.int_()
    return b.encode()


def _btf_func(linkage: int) -> bytes:
    b = BTFBuilder()
    i = b.int_()  # [1] int
    proto = b.add("", KIND_FUNC_PROTO, 1, i, struct.pack("<II", b.name("a"), i))  # [2] int (int a)
    b.add("probe_func", KIND_FUNC, linkage, proto)  # [3] static/global int probe_func(int a)
    return b.encode()


def _btf_datasec() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    var = b.add("probe_var", KIND_VAR, 0, i, struct.pack("<I", 1))  # global allocated
    b.add(".data", KIND_DATASEC, 1, 4, struct.pack("<III", var, 0, 4))
    return b.encode()


def _btf_qmark_datasec() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    var = b.add("probe_var", KIND_VAR, 0, i, struct.pack("<I", 0))
    b.add("?.data", KIND_DATASEC, 1, 4, struct.pack("<III", var, 0, 4))
    return b.encode()


def _btf_float() -> bytes:
    b = BTFBuilder()
    b.add("float", KIND_FLOAT, 0, 4)
    return b.encode()


def _btf_decl_tag() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    var = b.add("probe_var", KIND_VAR, 0, i, struct.pack("<I", 0))
    b.add("probe_tag", KIND_DECL_TAG, 0, var, struct.pack("<i", -1))
    return b.encode()


def _btf_type_tag() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    tag = b.add("probe_tag", KIND_TYPE_TAG, 0, i)
    b.add("", KIND_PTR, 0, tag)
    return b.encode()


def _btf_enum64() -> bytes:
    b = BTFBuilder()
    value = 1 << 40
    b.add("probe_enum", KIND_ENUM64, 1, 8, struct.pack("<III", b.name("PROBE_A"), value & 0xFFFFFFFF, value >> 32))
    return b.encode()


BTF_BLOBS: dict[str, Callable[[], bytes]] = {
    "btf": _btf_int_only,
    "btf_func": lambda: _btf_func(0),
    "btf_func_global": lambda: _btf_func(1),
    "btf_datasec": _btf_datasec,
    "btf_qmark_datasec": _btf_qmark_datasec,
    "btf_float": _btf_float,
    "btf_decl_tag": _btf_decl_tag,
    "btf_type_tag": _btf_type_tag,
    "btf_enum64": _btf_enum64,
}


def _btf_probe(feature: str, kind: str) -> Callable[[], Outcome]:
    def run() -> Outcome:
        try:
            _bpf.btf_load(BTF_BLOBS[feature]()).close()
        except KernelError as exc:
            if exc.errno in (errno.EINVAL, errno.E2BIG):
                log = exc.tail(1) if isinstance(exc, VerifierError) else ""
                return False, f"BPF_BTF_LOAD of a blob with {kind} gave {describe_errno(exc.errno)}" + (
                    f": {log.strip()}" if log else ""
                )
            return _failure(exc)
        return True, f"BPF_BTF_LOAD accepted a blob with {kind}"

    return run


# name -> (first release, the kind the blob uses, what the feature is); the order is the table's.
KINDS: dict[str, tuple[str, str, str]] = {
    "btf": ("4.18", "one BTF_KIND_INT", "BPF_BTF_LOAD: loading BPF Type Format blobs"),
    "btf_func": ("5.0", "BTF_KIND_FUNC and BTF_KIND_FUNC_PROTO", "BTF_KIND_FUNC/FUNC_PROTO (func_info for programs)"),
    "btf_func_global": ("5.6", "a BTF_KIND_FUNC of global linkage", "global function linkage in BTF_KIND_FUNC"),
    "btf_datasec": ("5.2", "BTF_KIND_VAR and BTF_KIND_DATASEC", "BTF_KIND_VAR/DATASEC (global data sections)"),
    "btf_qmark_datasec": ("6.10", "a DATASEC named '?.data'",
                          "DATASEC names starting with '?' (SEC(\"?.struct_ops\") variables; refused by 6.1, "
                          "accepted from about 6.10)"),
    "btf_float": ("5.13", "BTF_KIND_FLOAT", "BTF_KIND_FLOAT"),
    "btf_decl_tag": ("5.16", "BTF_KIND_DECL_TAG", "BTF_KIND_DECL_TAG (__attribute__((btf_decl_tag)))"),
    "btf_type_tag": ("5.17", "BTF_KIND_TYPE_TAG", "BTF_KIND_TYPE_TAG (__attribute__((btf_type_tag)))"),
    "btf_enum64": ("6.0", "BTF_KIND_ENUM64", "BTF_KIND_ENUM64 (64-bit enumerators)"),
}


def run(name: str) -> Outcome:
    """Run BTF-kind probe ``name`` now, as :func:`bpfkit.features.probes.run` does."""
    from .._kernel.rlimit import bump_memlock

    bump_memlock()  # before 5.11 BTF is charged to RLIMIT_MEMLOCK (probes.run does the same)
    try:
        return _btf_probe(name, KINDS[name][1])()
    except (BPFKitError, OSError) as exc:
        return _failure(exc)
