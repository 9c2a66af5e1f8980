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
from collections.abc import Callable

from .._kernel import bpf as _bpf
from ..btf import types as bt
from ..btf.spec import BTF
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
class BTFBuilder:
    """Hand-made probe blobs: bpfkit.btf types, numbered as added (ids from 1), encoded by
    bpfkit.btf's writer (:meth:`bpfkit.btf.BTF.to_bytes`)."""

    def __init__(self) -> None:
        self.types: list[bt.Type] = [bt.Void(0, "")]

    def add(self, t: bt.Type) -> int:
        """Append ``t`` (its id is set here); its id."""
        t.id = len(self.types)
        self.types.append(t)
        return t.id

    def int_(self, name: str = "int", size: int = 4, signed: bool = True) -> int:
        return self.add(bt.Int(0, name, size, bt.IntEncoding.SIGNED if signed else bt.IntEncoding.NONE, 0, size * 8))

    def encode(self) -> bytes:
        return BTF(self.types).to_bytes()


def _btf_int_only() -> bytes:
    b = BTFBuilder()
    b.int_()
    return b.encode()


def _btf_func(linkage: bt.Linkage) -> bytes:
    b = BTFBuilder()
    i = b.int_()  # [1] int
    proto = b.add(bt.FuncProto(0, "", i, [bt.Param("a", i)]))  # [2] int (int a)
    b.add(bt.Func(0, "probe_func", proto, linkage))  # [3] static/global int probe_func(int a)
    return b.encode()


def _btf_datasec(name: str = ".data", linkage: bt.VarLinkage = bt.VarLinkage.GLOBAL) -> bytes:
    b = BTFBuilder()
    i = b.int_()
    var = b.add(bt.Var(0, "probe_var", i, linkage))
    b.add(bt.Datasec(0, name, 4, [bt.VarSecinfo(var, 0, 4)]))
    return b.encode()


def _btf_float() -> bytes:
    b = BTFBuilder()
    b.add(bt.Float(0, "float", 4))
    return b.encode()


def _btf_decl_tag() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    var = b.add(bt.Var(0, "probe_var", i))
    b.add(bt.DeclTag(0, "probe_tag", var, -1))
    return b.encode()


def _btf_type_tag() -> bytes:
    b = BTFBuilder()
    i = b.int_()
    tag = b.add(bt.TypeTag(0, "probe_tag", i))
    b.add(bt.Pointer(0, "", tag))
    return b.encode()


def _btf_enum64() -> bytes:
    b = BTFBuilder()
    b.add(bt.Enum64(0, "probe_enum", 8, [bt.EnumValue("PROBE_A", 1 << 40)]))
    return b.encode()


BTF_BLOBS: dict[str, Callable[[], bytes]] = {
    "btf": _btf_int_only,
    "btf_func": lambda: _btf_func(bt.Linkage.STATIC),
    "btf_func_global": lambda: _btf_func(bt.Linkage.GLOBAL),
    "btf_datasec": _btf_datasec,
    "btf_qmark_datasec": lambda: _btf_datasec("?.data", bt.VarLinkage.STATIC),
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
