# SPDX-License-Identifier: Apache-2.0
"""Externs: ``__kconfig`` and ``__ksym`` declarations an object leaves for the loader to fill.

clang leaves an undefined symbol per extern and describes it in BTF: a VAR (or, for kernel
functions, a FUNC) with extern linkage in a DATASEC named ``.kconfig`` or ``.ksyms``. As in
libbpf (bpf_object__collect_externs / bpf_object__resolve_externs):

``.kconfig``
    Values laid out in one read-only, frozen array map ``.kconfig`` (larger alignment first),
    which programs read like global data. ``LINUX_KERNEL_VERSION``,
    ``LINUX_HAS_SYSCALL_WRAPPER`` and ``LINUX_HAS_BPF_COOKIE`` are computed by the loader;
    ``CONFIG_*`` come from the kernel's configuration, typed by the C declaration: ``bool``
    (y/n), ``enum libbpf_tristate`` (y/m/n as 1/2/0), ``char`` (the letter), integers, and
    ``char[N]`` for strings. An option the configuration does not set is an error unless the
    extern is ``__weak`` (then 0).
``.ksyms``
    Kernel variables and functions. A typed variable is looked up in kernel BTF (vmlinux,
    then modules) and its type checked for CO-RE compatibility; the ld_imm64 that takes its
    address becomes a BPF_PSEUDO_BTF_ID reference (5.10+). An untyped one (``extern const void
    sym __ksym``) gets its address from /proc/kallsyms. A function is a kfunc: its calls become
    BPF_PSEUDO_KFUNC_CALL with the kernel's BTF id (and, for a module, an index into the
    program's fd_array). ``__weak`` ones the kernel lacks resolve to 0/NULL, and calls to a
    missing weak kfunc are poisoned (the verifier only complains if they are reachable);
    ``bpf_ksym_exists()`` guards them. A ``___flavor`` suffix is dropped when looking names up.

The object's BTF is fixed up here, as libbpf does, so the kernel accepts it: extern VARs get
allocated linkage, the .kconfig DATASEC gets the real offsets and size, and .ksyms entries
become 4-byte int VARs (FUNCs are replaced by a dummy VAR; nameless kfunc parameters get
that dummy's name, since the kernel requires named parameters in global functions).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from .._record import record_dataclass
from ..btf.spec import BTF, essential_name
from ..btf.types import (
    Array,
    Datasec,
    Enum,
    Func,
    FuncProto,
    Int,
    IntEncoding,
    Linkage,
    Var,
    VarLinkage,
    Void,
)
from ..errors import NotFoundError, ParseError, UsageError

__all__ = [
    "ExternKind", "KconfigType", "ExternSpec", "KsymTarget", "collect_externs", "parse_kconfig",
    "kconfig_data", "kconfig_size", "resolve_ksym", "VIRTUAL_KCONFIG", "POISON_KFUNC_BASE",
]

KCONFIG_SEC = ".kconfig"
KSYMS_SEC = ".ksyms"
# libbpf's POISON_CALL_KFUNC_BASE: a call to a missing __weak kfunc becomes a helper call with
# this id plus the extern's index ("invalid func unknown#2002000000" if reachable).
POISON_KFUNC_BASE = 2002000000
# __kconfig names the loader computes rather than reads from the configuration.
VIRTUAL_KCONFIG = ("LINUX_KERNEL_VERSION", "LINUX_HAS_SYSCALL_WRAPPER", "LINUX_HAS_BPF_COOKIE")


class ExternKind(enum.Enum):
    KCONFIG = "kconfig"
    KSYM = "ksym"


class KconfigType(enum.Enum):
    """How a __kconfig extern's C type takes a configuration value (libbpf's kcfg_type)."""

    BOOL = "bool"
    CHAR = "char"
    TRISTATE = "tristate"  # enum libbpf_tristate
    INT = "int"
    CHAR_ARRAY = "char[]"


@record_dataclass  # a dataclass whose methods are not generated: see bpfkit._record
class ExternSpec:
    """One extern declaration of the object."""

    name: str
    kind: ExternKind
    weak: bool
    btf_id: int  # the VAR or FUNC in the object's BTF
    type_id: int = 0  # ksym: the declared type behind qualifiers (FUNC_PROTO for kfuncs; 0: untyped)
    is_func: bool = False
    index: int = 0  # position among the object's externs (poison ids)
    # __kconfig only:
    kconfig_type: KconfigType | None = None
    size: int = 0
    align: int = 0
    signed: bool = False
    offset: int = 0  # in the .kconfig map's value

    @property
    def essential_name(self) -> str:
        """The name without a ``___flavor`` suffix: what is looked up in the kernel."""
        return essential_name(self.name)

    @property
    def typed(self) -> bool:
        return self.kind == ExternKind.KSYM and bool(self.type_id)


@dataclasses.dataclass(frozen=True)
class KsymTarget:
    """What a __ksym extern resolved to. ``btf_id`` set: a BTF object (vmlinux when ``module``
    is '', else that module); else ``address`` (kallsyms, or 0 for a missing __weak one)."""

    name: str
    found: bool
    btf_id: int = 0
    module: str = ""
    address: int = 0
    why: str = ""  # for a missing one


# ------------------------------------------------------------------------------ parsing
def _kconfig_type(btf: BTF, type_id: int) -> tuple[KconfigType | None, bool]:
    """(kind, signed) of a __kconfig declaration's type, or (None, False) when unusable."""
    t = btf.resolve(type_id)
    if isinstance(t, Int):
        if t.encoding & IntEncoding.BOOL:
            return (KconfigType.BOOL if t.size == 1 else None), False
        if t.size == 1:
            return KconfigType.CHAR, t.signed
        if t.size not in (2, 4, 8):
            return None, False
        return KconfigType.INT, t.signed
    if isinstance(t, Enum):
        if t.name == "libbpf_tristate" and (t.size == 4 or t.kind.name == "ENUM64"):
            return KconfigType.TRISTATE, False
        return None, False
    if isinstance(t, Array) and t.nelems and _kconfig_type(btf, t.type)[0] == KconfigType.CHAR:
        return KconfigType.CHAR_ARRAY, False
    return None, False


def collect_externs(btf: BTF | None, undefined: list[tuple[str, bool]]) -> dict[str, ExternSpec]:
    """Externs from the undefined symbols ``(name, weak)`` an object refers to, described by
    its BTF; fixes the BTF up for the kernel (see the module docstring). Lays out .kconfig."""
    if not undefined:
        return {}
    if btf is None:
        names = ", ".join(repr(n) for n, _ in undefined)
        raise ParseError(f"extern {names} needs BTF to be described (compile with -g)")
    sections: dict[int, Datasec] = {}
    for t in btf.types:
        if isinstance(t, Datasec) and t.name in (KCONFIG_SEC, KSYMS_SEC):
            for vsi in t.vars:
                sections[vsi.type] = t
    externs: dict[str, ExternSpec] = {}
    for index, (name, weak) in enumerate(sorted(undefined)):
        decl = next((t for t in btf.find(name) if isinstance(t, (Var, Func))
                     and (t.linkage == VarLinkage.EXTERN if isinstance(t, Var) else t.linkage == Linkage.EXTERN)), None)
        if decl is None:
            raise ParseError(f"extern {name!r} has no extern VAR or FUNC in the object's BTF")
        sec = sections.get(decl.id)
        if sec is None:
            what = "function" if isinstance(decl, Func) else "variable"
            raise ParseError(
                f"extern {what} {name!r} is neither __kconfig nor __ksym (not in a .kconfig/.ksyms section); "
                "bpfkit does not link objects together"
            )
        if sec.name == KSYMS_SEC:
            type_id = btf.resolve(decl.type).id
            if isinstance(btf.types[type_id], Void):
                type_id = 0
            externs[name] = ExternSpec(name, ExternKind.KSYM, weak, decl.id, type_id, isinstance(decl, Func), index)
            continue
        if isinstance(decl, Func):
            raise ParseError(f"extern {name!r} in .kconfig is a function")
        kind, signed = _kconfig_type(btf, decl.type)
        if kind is None:
            raise ParseError(f"__kconfig extern {name!r} has type {btf.type_name(decl.type)}, which cannot hold a "
                             "config value (use bool, enum libbpf_tristate, char, an integer or char[N])")
        if not (name.startswith("CONFIG_") or name.startswith("LINUX_")):
            raise ParseError(f"__kconfig extern {name!r}: only CONFIG_* and LINUX_* names are known")
        size = btf.size_of(decl.type)
        externs[name] = ExternSpec(name, ExternKind.KCONFIG, weak, decl.id, index=index, kconfig_type=kind,
                                   size=size, align=btf.align_of(decl.type), signed=signed)
    _layout_kconfig(externs)
    _fix_btf(btf, externs)
    return externs


def _layout_kconfig(externs: dict[str, ExternSpec]) -> int:
    """Offsets in .kconfig: larger alignment first, then smaller size, then name (libbpf's
    order, so both loaders build the same map). Returns the value size."""
    kcfg = sorted((e for e in externs.values() if e.kind == ExternKind.KCONFIG),
                  key=lambda e: (-e.align, e.size, e.name))
    off = 0
    for e in kcfg:
        off = (off + e.align - 1) // e.align * e.align
        e.offset = off
        off += e.size
    return off


def kconfig_size(externs: Mapping[str, ExternSpec]) -> int:
    return max((e.offset + e.size for e in externs.values() if e.kind == ExternKind.KCONFIG), default=0)


def _fix_btf(btf: BTF, externs: dict[str, ExternSpec]) -> None:
    by_id = {e.btf_id: e for e in externs.values()}
    for t in list(btf.types):
        if not isinstance(t, Datasec) or t.name not in (KCONFIG_SEC, KSYMS_SEC):
            continue
        if t.name == KCONFIG_SEC:
            for vsi in t.vars:
                ext = by_id.get(vsi.type)
                var = btf.types[vsi.type]
                if ext is not None and isinstance(var, Var):
                    var.linkage = VarLinkage.GLOBAL
                    vsi.offset, vsi.size = ext.offset, ext.size
            t.vars.sort(key=lambda v: v.offset)
            t.size = kconfig_size(externs)
            continue
        int_id = _int_type(btf)
        dummy_id = 0
        for i, vsi in enumerate(t.vars):
            entry = btf.types[vsi.type]
            if isinstance(entry, Func):
                if not dummy_id:
                    dummy_id = btf.add(Var(0, "dummy_ksym", int_id, VarLinkage.GLOBAL))
                proto = btf.types[entry.type]
                if isinstance(proto, FuncProto):
                    for p in proto.params:
                        if p.type and not p.name:
                            p.name = "dummy_ksym"
                entry.linkage = Linkage.GLOBAL
                vsi.type = dummy_id
            elif isinstance(entry, Var):
                entry.linkage = VarLinkage.GLOBAL
                entry.type = int_id
            vsi.offset, vsi.size = 4 * i, 4
        t.size = 4 * len(t.vars)


def _int_type(btf: BTF) -> int:
    """A 4-byte int in ``btf`` (added if there is none)."""
    for t in btf.types:
        if isinstance(t, Int) and t.size == 4 and not t.encoding & IntEncoding.BOOL:
            return t.id
    return btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))


# ------------------------------------------------------------------------------ kconfig
def parse_kconfig(text: str) -> dict[str, str]:
    """``CONFIG_X=value`` lines of a kernel configuration as {name: raw value}; options
    "is not set" are absent."""
    values: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line.startswith("CONFIG_"):
            continue
        name, sep, value = line.partition("=")
        if sep and value:
            values[name] = value
    return values


def _encode_kconfig(ext: ExternSpec, raw: str) -> bytes:
    """The bytes of configuration value ``raw`` for ``ext``'s type, as libbpf writes them."""
    kind = ext.kconfig_type
    what = f"__kconfig extern {ext.name!r}"
    if raw in ("y", "n", "m"):
        if kind == KconfigType.BOOL:
            if raw == "m":
                raise UsageError(f"{what}: value 'm' needs enum libbpf_tristate or char, not bool")
            return bytes([raw == "y"])
        if kind == KconfigType.TRISTATE:
            return {"n": 0, "y": 1, "m": 2}[raw].to_bytes(ext.size, "little")
        if kind == KconfigType.CHAR:
            return raw.encode()
        raise UsageError(f"{what}: value {raw!r} needs bool, enum libbpf_tristate or char")
    if raw.startswith('"'):
        if kind != KconfigType.CHAR_ARRAY:
            raise UsageError(f"{what}: value {raw} needs a char array")
        if len(raw) < 2 or not raw.endswith('"'):
            raise UsageError(f"{what}: malformed string value {raw}")
        text = raw[1:-1].encode()[: ext.size - 1]
        return text + bytes(ext.size - len(text))
    try:
        number = int(raw, 0)
    except ValueError:
        raise UsageError(f"{what}: cannot read value {raw!r}") from None
    if kind == KconfigType.BOOL:
        if number not in (0, 1):
            raise UsageError(f"{what}: value {number} is not a boolean")
        return bytes([number])
    if kind not in (KconfigType.INT, KconfigType.CHAR):
        raise UsageError(f"{what}: value {number} needs an integer, char or bool")
    bits = ext.size * 8
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if ext.signed else (0, 1 << bits)
    if ext.size < 8 and not low <= number < high:
        raise UsageError(f"{what}: value {number} does not fit in {ext.size} {'signed' if ext.signed else 'unsigned'} bytes")
    return (number & ((1 << bits) - 1)).to_bytes(ext.size, "little")


def kconfig_data(externs: Mapping[str, ExternSpec], config: Mapping[str, str] | None,
                 virtual: Mapping[str, Any], source: str = "") -> bytes:
    """The .kconfig map's value: every __kconfig extern's value at its offset.

    ``config``: {CONFIG_X: raw value} (None when no configuration could be found: weak
    CONFIG_* externs are then 0, strong ones an error); ``virtual``: values of the LINUX_*
    names (ints, bools). ``source`` names where the configuration came from, for errors."""
    data = bytearray(kconfig_size(externs))
    for ext in externs.values():
        if ext.kind != ExternKind.KCONFIG:
            continue
        raw: str | None
        if ext.name.startswith("LINUX_"):
            if ext.name not in virtual:
                if ext.weak:
                    continue
                raise NotFoundError(f"__kconfig extern {ext.name!r}: not a LINUX_* value bpfkit knows "
                                    f"({', '.join(VIRTUAL_KCONFIG)})")
            value = virtual[ext.name]
            raw = ("y" if value else "n") if isinstance(value, bool) else str(int(value))
        else:
            raw = config.get(ext.name) if config is not None else None
            if raw is None:
                if ext.weak:
                    continue
                where = f"in {source}" if source and config is not None else "(no kernel configuration found)"
                raise NotFoundError(f"__kconfig extern {ext.name!r} is not set {where}; declare it __weak "
                                    "to get 0 when the option is off")
        data[ext.offset : ext.offset + ext.size] = _encode_kconfig(ext, raw)
    return bytes(data)


# ------------------------------------------------------------------------------- ksyms
def resolve_ksym(ext: ExternSpec, local: BTF, kernel: list[BTF], modules: Callable[[], list[BTF]] | None,
                 kallsyms: Mapping[str, int] | None) -> KsymTarget:
    """Find a __ksym extern in the kernel: typed variables and functions in kernel BTF
    (``kernel`` first, then ``modules()``), untyped variables in ``kallsyms``. A __weak one the
    kernel lacks resolves to "not found"; a strong one raises NotFoundError, and a type that
    does not fit the kernel's raises UsageError (a __weak kfunc with the wrong prototype is
    treated as missing, as libbpf does)."""
    from ..btf.core import types_compat
    from ..btf.types import Kind

    name = ext.essential_name
    what = "function" if ext.is_func else "variable"
    if not ext.is_func and not ext.typed:
        table = kallsyms or {}
        address = table.get(name)
        if address is None or address == -1:
            if address == -1:
                raise UsageError(f"__ksym {ext.name!r}: /proc/kallsyms has several addresses for {name!r}")
            if ext.weak:
                return KsymTarget(ext.name, False, why="not in /proc/kallsyms")
            raise NotFoundError(f"__ksym variable {ext.name!r}: {name!r} is not in /proc/kallsyms")
        if address == 0 and not any(table.values()):
            raise UsageError(f"__ksym {ext.name!r}: /proc/kallsyms shows every address as 0 "
                             "(kptr_restrict): reading them needs CAP_SYSLOG")
        return KsymTarget(ext.name, True, address=address)
    kind = Kind.FUNC if ext.is_func else Kind.VAR
    found = None
    for group in (kernel, None):
        btfs = group if group is not None else (modules() if modules is not None else [])
        for btf in btfs:
            hits = btf.find(name, kind, own_only=True)
            if hits:
                found = (btf, hits[0])
                break
        if found is not None:
            break
    if found is None:
        if ext.weak:
            return KsymTarget(ext.name, False, why="not in the kernel's BTF")
        raise NotFoundError(f"__ksym {what} {ext.name!r}: the kernel's BTF (vmlinux and modules) has no "
                            f"{kind.name} named {name!r}")
    btf, target = found
    module = btf.name if btf.base is not None else ""
    if ext.is_func:
        local_proto, kernel_proto = ext.type_id, target.type  # type: ignore[attr-defined]
    else:
        local_proto, kernel_proto = ext.type_id, btf.resolve(target.type).id  # type: ignore[attr-defined]
    if not types_compat(local, local_proto, btf, kernel_proto):
        if ext.weak and ext.is_func:
            return KsymTarget(ext.name, False, why="its prototype differs from the kernel's")
        raise UsageError(
            f"__ksym {what} {ext.name!r}: declared as {local.type_name(local_proto)}, but the kernel has "
            f"{btf.type_name(kernel_proto)} ([{target.id}] in {btf.name or 'kernel BTF'})"
        )
    return KsymTarget(ext.name, True, btf_id=target.id, module=module)
