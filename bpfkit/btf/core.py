# SPDX-License-Identifier: Apache-2.0
"""CO-RE: fit an object's field offsets, sizes, type ids and enum values to the target kernel.

Concepts (the same as libbpf's relo_core.c, reimplemented here):

* A *relocation* (``struct bpf_core_relo`` in .BTF.ext) names an instruction, a *root type*
  in the object's ("local") BTF, an *access string* and a kind. For field kinds the access
  string is a path of indexes: ``0:1:3`` is ``&root[0]``, then member 1, then member 3 (or an
  array index when the type there is an array). For enum kinds it is the enumerator's index;
  for type kinds it is ``0``.
* An *accessor spec* is that path resolved against a BTF: each named member or array index on
  the way, the types they live in, and the bit offset they add up to. Anonymous members (the
  unions and structs C lets you step through silently) are part of the raw path but not of
  the spec, so a field can move into or out of an anonymous union and still be found.
* *Candidates* are the target's types of the root's kind whose names equal the root's name
  without its ``___flavor`` suffix (``task_struct___old`` looks for ``task_struct``); vmlinux
  first, kernel modules only when vmlinux has none. The local spec is *matched* against each
  candidate, member by member by name, with compatibility rules per kind (:func:`fields_compat`,
  :func:`types_compat`, :func:`types_match`). Every candidate that matches must give the same
  answer, or the relocation is ambiguous (an error). Candidates that fail are dropped for the
  later relocations of the same root type (as libbpf does).
* The *result* is an (expected, new) value pair: the instruction must hold the expected value
  (what the compiler computed against the object's own BTF) and gets the new one. ALU
  immediates, LDX/ST/STX offsets (with the memory size adjusted for pointers and unsigned
  integers of another size) and ld_imm64 constants are patched.
* When nothing matches, the existence kinds give 0 and the others *poison* the instruction:
  it becomes a call to helper 0xbad2310 ("bad relo"), which the verifier rejects only if the
  code is reachable. Guarded code (``if (bpf_core_field_exists(...))``) therefore loads on
  kernels that lack the field. :meth:`CoreResolution.explain` says which relocation it was.

Pure: targets are BTF objects the caller supplies (bpfkit.kernel_btf reads the kernel's).
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable, Iterable, Sequence

from .._record import DataRecord
from ..errors import CORERelocationError, ParseError
from .ext import CORERelo
from .spec import BTF, essential_name
from .types import Array, Enum, Float, FuncProto, Fwd, Int, Kind, Pointer, Struct, Type, Void

__all__ = [
    "ReloKind", "Accessor", "AccessSpec", "Result", "CoreResolution", "CORERelocator", "CORERelocationError",
    "POISON_HELPER", "parse_spec", "match_spec", "types_compat", "types_match", "fields_compat",
    "patch_insn", "relocate", "poisoned_insns",
]

POISON_HELPER = 0xBAD2310  # 195896080: "invalid func unknown#195896080" in the verifier log
MAX_SPEC_LEN = 64  # BPF_CORE_SPEC_MAX_LEN
_MAX_DEPTH = 32

_INSN = struct.Struct("<BBhi")
_I32 = struct.Struct("<i")
_CLASS_LD, _CLASS_LDX, _CLASS_ST, _CLASS_STX, _CLASS_ALU, _CLASS_ALU64 = 0x00, 0x01, 0x02, 0x03, 0x04, 0x07
_SIZE_BYTES = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}  # BPF_W, BPF_H, BPF_B, BPF_DW
_BYTES_SIZE = {v: k for k, v in _SIZE_BYTES.items()}


class ReloKind(enum.IntEnum):
    """enum bpf_core_relo_kind (the clang builtins that emit each)."""

    FIELD_BYTE_OFFSET = 0  # __builtin_preserve_field_info(f, 0): offsetof, and every BPF_CORE_READ
    FIELD_BYTE_SIZE = 1  # bpf_core_field_size
    FIELD_EXISTS = 2  # bpf_core_field_exists
    FIELD_SIGNED = 3  # BPF_CORE_READ_BITFIELD*
    FIELD_LSHIFT_U64 = 4
    FIELD_RSHIFT_U64 = 5
    TYPE_ID_LOCAL = 6  # bpf_core_type_id_local
    TYPE_ID_TARGET = 7  # bpf_core_type_id_kernel
    TYPE_EXISTS = 8  # bpf_core_type_exists
    TYPE_SIZE = 9  # bpf_core_type_size
    ENUMVAL_EXISTS = 10  # bpf_core_enum_value_exists
    ENUMVAL_VALUE = 11  # bpf_core_enum_value
    TYPE_MATCHES = 12  # bpf_core_type_matches (clang 15+, libbpf 1.0+)

    @property
    def field_based(self) -> bool:
        return self <= ReloKind.FIELD_RSHIFT_U64

    @property
    def type_based(self) -> bool:
        return self in (ReloKind.TYPE_ID_LOCAL, ReloKind.TYPE_ID_TARGET, ReloKind.TYPE_EXISTS,
                        ReloKind.TYPE_SIZE, ReloKind.TYPE_MATCHES)

    @property
    def enum_based(self) -> bool:
        return self in (ReloKind.ENUMVAL_EXISTS, ReloKind.ENUMVAL_VALUE)

    @property
    def label(self) -> str:
        return self.name.lower()


# ----------------------------------------------------------------------------- specs
@dataclasses.dataclass(slots=True, repr=False, eq=False)  # DataRecord's: see bpfkit._record
class Accessor(DataRecord):
    """One step of a spec: member ``idx`` (called ``name``) of composite ``type_id``, an
    array index (``name`` None, ``type_id`` the element type) or an enumerator."""

    type_id: int
    idx: int
    name: str | None


@dataclasses.dataclass(repr=False, eq=False)
class AccessSpec(DataRecord):
    """A relocation's access path resolved against one BTF (libbpf's bpf_core_spec)."""

    btf: BTF
    root_id: int
    kind: ReloKind
    accessors: list[Accessor] = dataclasses.field(default_factory=list)
    raw: list[int] = dataclasses.field(default_factory=list)
    bit_offset: int = 0

    def describe(self) -> str:
        """``[114] struct task_struct.real_parent->tgid (0:68:3 @ offset 2500)`` and similar,
        close to libbpf's debug output."""
        btf = self.btf
        root = btf.types[self.root_id]
        where = f" in {btf.name}" if btf.name else ""
        text = f"[{self.root_id}] {_kind_word(root)} {root.name or '(anon)'}"
        if self.kind.type_based:
            return text + where
        if self.kind.enum_based:
            acc = self.accessors[0]
            enum_t = btf.types[acc.type_id]
            value = enum_t.values[acc.idx].value if isinstance(enum_t, Enum) else "?"
            return f"{text}::{acc.name} = {value}{where}"
        path = ""
        for i, acc in enumerate(self.accessors):
            if acc.name is None:
                if i or acc.idx:
                    path += f"[{acc.idx}]"
            else:
                path += f".{acc.name}"
        raw = ":".join(map(str, self.raw))
        bits = f".{self.bit_offset % 8}" if self.bit_offset % 8 else ""
        return f"{text}{path} ({raw} @ offset {self.bit_offset // 8}{bits}){where}"


def _kind_word(t: Type) -> str:
    return {Kind.STRUCT: "struct", Kind.UNION: "union", Kind.ENUM: "enum", Kind.ENUM64: "enum",
            Kind.FWD: "fwd", Kind.TYPEDEF: "typedef", Kind.INT: "int", Kind.PTR: "ptr",
            Kind.ARRAY: "array", Kind.FUNC_PROTO: "func_proto", Kind.FLOAT: "float"}.get(t.kind, t.kind.name.lower())


def _skip(btf: BTF, type_id: int) -> Type:
    """The type behind typedefs and qualifiers (libbpf's skip_mods_and_typedefs)."""
    return btf.resolve(type_id)


def _is_flex(btf: BTF, acc: Accessor | None, arr: Array) -> bool:
    """An array of no elements that is the last member of its struct (a flexible array)."""
    if acc is None or acc.name is None or arr.nelems > 0:
        return False
    parent = btf.types[acc.type_id]
    return isinstance(parent, Struct) and acc.idx == len(parent.members) - 1


def parse_spec(btf: BTF, relo: CORERelo) -> AccessSpec:
    """Resolve ``relo``'s access string against the object's own BTF."""
    try:
        kind = ReloKind(relo.kind)
    except ValueError:
        raise CORERelocationError(f"unknown CO-RE relocation kind {relo.kind}") from None
    if not 0 < relo.type_id < len(btf.types):
        raise CORERelocationError(f"CO-RE relocation refers to type {relo.type_id}, which the object's BTF lacks")
    text = relo.access
    spec = AccessSpec(btf, relo.type_id, kind)
    if kind.type_based:
        if text != "0":
            raise CORERelocationError(f"{kind.label} relocation has access string {text!r}, expected '0'")
        spec.raw = [0]
        return spec
    try:
        raw = [int(part) for part in text.split(":")]
    except ValueError:
        raise CORERelocationError(f"malformed CO-RE access string {text!r}") from None
    if not raw or any(i < 0 for i in raw) or text.startswith(":"):
        raise CORERelocationError(f"malformed CO-RE access string {text!r}")
    if len(raw) > MAX_SPEC_LEN:
        raise CORERelocationError(f"CO-RE access string {text!r} is deeper than {MAX_SPEC_LEN}")
    spec.raw = raw
    root = _skip(btf, relo.type_id)
    acc = Accessor(root.id, raw[0], None)
    spec.accessors.append(acc)
    if kind.enum_based:
        if not isinstance(root, Enum) or len(raw) > 1 or raw[0] >= len(root.values):
            raise CORERelocationError(
                f"{kind.label} relocation on [{relo.type_id}] {root.name!r} with access {text!r}: "
                "not an enumerator of an enum"
            )
        acc.name = root.values[raw[0]].name
        return spec
    type_id = root.id
    spec.bit_offset = raw[0] * _size(btf, type_id) * 8
    for idx in raw[1:]:
        t = _skip(btf, type_id)
        type_id = t.id
        if isinstance(t, Struct):  # struct or union
            if idx >= len(t.members):
                raise CORERelocationError(f"access {text!r}: {_kind_word(t)} {t.name!r} has no member #{idx}")
            m = t.members[idx]
            spec.bit_offset += m.bit_offset
            if m.name:
                spec.accessors.append(Accessor(type_id, idx, m.name))
            type_id = m.type
        elif isinstance(t, Array):
            elem = _skip(btf, t.type)
            if not _is_flex(btf, spec.accessors[-1], t) and idx >= t.nelems:
                raise CORERelocationError(f"access {text!r}: index {idx} is past the array's {t.nelems} elements")
            type_id = elem.id
            spec.accessors.append(Accessor(type_id, idx, None))
            spec.bit_offset += idx * _size(btf, type_id) * 8
        else:
            raise CORERelocationError(
                f"access {text!r} on [{relo.type_id}] steps into [{t.id}] {t.kind.name}, which has no members or elements"
            )
    return spec


def _size(btf: BTF, type_id: int) -> int:
    try:
        return btf.size_of(type_id)
    except ParseError as exc:
        raise CORERelocationError(str(exc)) from None


# ------------------------------------------------------------------------ compatibility
def _names_match(a: str, b: str) -> bool:
    """Names equal once flavors are dropped; an anonymous target only matches anonymous."""
    if not b:
        return not a
    return essential_name(a) == essential_name(b)


def _kinds_compat(a: Type, b: Type) -> bool:
    """Same kind, counting ENUM and ENUM64 as one (libbpf's btf_kind_core_compat)."""
    return a.kind == b.kind or (isinstance(a, Enum) and isinstance(b, Enum))


def _compat_kinds(t: Type) -> frozenset[Kind]:
    """The kinds :func:`_kinds_compat` accepts for ``t``."""
    return _ENUM_KINDS if isinstance(t, Enum) else frozenset({t.kind})


_ENUM_KINDS = frozenset({Kind.ENUM, Kind.ENUM64})


def fields_compat(local: BTF, local_id: int, targ: BTF, targ_id: int) -> bool:
    """Can a field of type ``local_id`` be read where the target has ``targ_id``? Composites
    always (their members are matched on their own), pointers and floats of any kind, ints
    unless old-style bitfield ints, enums and forward declarations when their names agree,
    arrays when their elements are compatible."""
    for _ in range(_MAX_DEPTH):
        lt, tt = _skip(local, local_id), _skip(targ, targ_id)
        if isinstance(lt, Struct) and isinstance(tt, Struct):
            return True
        if not _kinds_compat(lt, tt):
            return False
        if isinstance(lt, (Pointer, Float)):
            return True
        if isinstance(lt, (Fwd, Enum)):
            le, te = essential_name(lt.name), essential_name(tt.name)
            return not le or not te or le == te
        if isinstance(lt, Int):
            return lt.bit_offset == 0 and tt.bit_offset == 0  # type: ignore[attr-defined]
        if isinstance(lt, Array):
            local_id, targ_id = lt.type, tt.type  # type: ignore[attr-defined]
            continue
        return False
    raise CORERelocationError(f"type chain deeper than {_MAX_DEPTH} comparing field types")


def types_compat(local: BTF, local_id: int, targ: BTF, targ_id: int, level: int = _MAX_DEPTH) -> bool:
    """Loose compatibility for type-based relocations (names were compared already):
    same kinds behind typedefs and qualifiers, then pointers and arrays by what they point
    at, function prototypes by their parameters and return type."""
    if not _kinds_compat(local.types[local_id], targ.types[targ_id]):
        return False
    for _ in range(_MAX_DEPTH):
        lt, tt = _skip(local, local_id), _skip(targ, targ_id)
        if not _kinds_compat(lt, tt):
            return False
        if isinstance(lt, (Void, Struct, Enum, Fwd)):
            return True
        if isinstance(lt, Int):
            return lt.bit_offset == 0 and tt.bit_offset == 0  # type: ignore[attr-defined]
        if isinstance(lt, (Pointer, Array)):
            local_id, targ_id = lt.type, tt.type  # type: ignore[attr-defined]
            continue
        if isinstance(lt, FuncProto):
            assert isinstance(tt, FuncProto)
            if len(lt.params) != len(tt.params):
                return False
            if level <= 0:
                raise CORERelocationError("function prototypes nest too deeply")
            for lp, tp in zip(lt.params, tt.params):
                if not types_compat(local, _skip(local, lp.type).id, targ, _skip(targ, tp.type).id, level - 1):
                    return False
            local_id, targ_id = _skip(local, lt.return_type).id, _skip(targ, tt.return_type).id
            continue
        return False
    raise CORERelocationError(f"type chain deeper than {_MAX_DEPTH} comparing types")


def types_match(local: BTF, local_id: int, targ: BTF, targ_id: int, behind_ptr: bool = False,
                level: int = _MAX_DEPTH) -> bool:
    """The stricter test of bpf_core_type_matches(): names (minus flavors) equal at every
    level; ints of the same size and signedness; enums whose every local enumerator exists in
    the target; structs/unions whose every local member has a matching target member (behind
    a pointer, any struct matches a same-kind struct or forward declaration); arrays of the
    same length; prototypes parameter by parameter."""
    if level <= 0:
        raise CORERelocationError("types nest too deeply to match")
    for _ in range(_MAX_DEPTH):
        lt, tt = _skip(local, local_id), _skip(targ, targ_id)
        if not _names_match(lt.name, tt.name):
            return False
        if isinstance(lt, Void):
            return isinstance(tt, Void)
        if isinstance(lt, Fwd):
            if behind_ptr:
                if isinstance(tt, Fwd):
                    return lt.union == tt.union
                return (tt.kind == Kind.STRUCT and not lt.union) or (tt.kind == Kind.UNION and lt.union)
            return isinstance(tt, Fwd) and lt.union == tt.union
        if isinstance(lt, Enum):
            if not isinstance(tt, Enum) or lt.size != tt.size or len(lt.values) > len(tt.values):
                return False
            return all(any(_names_match(lv.name, tv.name) for tv in tt.values) for lv in lt.values)
        if isinstance(lt, Struct):
            if behind_ptr:
                if lt.kind == tt.kind:
                    return True
                return isinstance(tt, Fwd) and tt.union == (lt.kind == Kind.UNION)
            if lt.kind != tt.kind:
                return False
            assert isinstance(tt, Struct)
            if len(lt.members) > len(tt.members):
                return False
            for lm in lt.members:
                if not any(_names_match(lm.name, tm.name)
                           and types_match(local, lm.type, targ, tm.type, behind_ptr, level - 1)
                           for tm in tt.members):
                    return False
            return True
        if isinstance(lt, Int):
            return isinstance(tt, Int) and lt.size == tt.size and lt.signed == tt.signed
        if isinstance(lt, Pointer):
            if not isinstance(tt, Pointer):
                return False
            behind_ptr = True
            local_id, targ_id = lt.type, tt.type
            continue
        if isinstance(lt, Array):
            if not isinstance(tt, Array) or lt.nelems != tt.nelems:
                return False
            local_id, targ_id = lt.type, tt.type
            continue
        if isinstance(lt, FuncProto):
            if not isinstance(tt, FuncProto) or len(lt.params) != len(tt.params):
                return False
            for lp, tp in zip(lt.params, tt.params):
                if not types_match(local, lp.type, targ, tp.type, behind_ptr, level - 1):
                    return False
            local_id, targ_id = lt.return_type, tt.return_type
            continue
        return False
    raise CORERelocationError(f"type chain deeper than {_MAX_DEPTH} matching types")


# --------------------------------------------------------------------------- matching
def _match_member(local: BTF, local_acc: Accessor, targ: BTF, targ_id: int, spec: AccessSpec,
                  why: list[str]) -> tuple[bool, int]:
    """Find the local member named by ``local_acc`` in target composite ``targ_id``, looking
    through anonymous members; extends ``spec``. Returns (found, the member's type id)."""
    local_parent = local.types[local_acc.type_id]
    assert isinstance(local_parent, Struct)
    local_member = local_parent.members[local_acc.idx]
    tt = _skip(targ, targ_id)
    if not isinstance(tt, Struct):
        why.append(f"[{tt.id}] {tt.kind.name} {tt.name!r} is not a struct or union")
        return False, 0
    want = local_member.name
    if tt.members and len(spec.raw) >= MAX_SPEC_LEN:  # (raw is the same length at every member)
        raise CORERelocationError(f"target struct nesting deeper than {MAX_SPEC_LEN} looking for {want!r}")
    for i, m in enumerate(tt.members):
        if m.name and m.name != want:
            continue  # a named member that is not the one looked for leaves spec alone
        spec.bit_offset += m.bit_offset
        spec.raw.append(i)
        if not m.name:
            found, next_id = _match_member(local, local_acc, targ, m.type, spec, [])
            if found:
                return True, next_id
        else:
            if not fields_compat(local, local_member.type, targ, m.type):
                why.append(
                    f"member {local_member.name!r} of {_kind_word(tt)} {tt.name or '(anon)'} is "
                    f"{targ.type_name(m.type)}, incompatible with the object's {local.type_name(local_member.type)}"
                )
                return False, 0
            spec.accessors.append(Accessor(tt.id, i, m.name))
            return True, m.type
        spec.bit_offset -= m.bit_offset
        spec.raw.pop()
    why.append(f"{_kind_word(tt)} {tt.name or '(anon)'} has no member {local_member.name!r}")
    return False, 0


def match_spec(local: AccessSpec, targ: BTF, targ_id: int) -> tuple[AccessSpec | None, str]:
    """Match ``local`` against candidate ``targ_id``: (the target spec, '') or (None, why not)."""
    spec = AccessSpec(targ, targ_id, local.kind)
    kind = local.kind
    if kind.type_based:
        if kind == ReloKind.TYPE_MATCHES:
            ok = types_match(local.btf, local.root_id, targ, targ_id)
        else:
            ok = types_compat(local.btf, local.root_id, targ, targ_id)
        spec.raw = [0]
        if ok:
            return spec, ""
        tt = targ.types[targ_id]
        verdict = "does not match" if kind == ReloKind.TYPE_MATCHES else "is incompatible with"
        return None, f"the kernel's {_kind_word(tt)} {tt.name} [{targ_id}] {verdict} the object's definition"
    if kind.enum_based:
        want = essential_name(local.accessors[0].name or "")
        tt = _skip(targ, targ_id)
        if not isinstance(tt, Enum):
            return None, f"[{tt.id}] {tt.name!r} is not an enum"
        for i, v in enumerate(tt.values):
            if essential_name(v.name) == want:
                spec.accessors.append(Accessor(tt.id, i, v.name))
                spec.raw = [i]
                return spec, ""
        return None, f"enum {tt.name or '(anon)'} has no enumerator {want}"
    why: list[str] = []
    type_id = targ_id
    for i, acc in enumerate(local.accessors):
        tt = _skip(targ, type_id)
        type_id = tt.id
        if acc.name is not None:
            found, type_id = _match_member(local.btf, acc, targ, type_id, spec, why)
            if not found:
                return None, why[-1] if why else "no match"
            continue
        if i > 0:
            if not isinstance(tt, Array):
                return None, f"[{tt.id}] {tt.kind.name} {tt.name!r} is not an array"
            if not _is_flex(targ, spec.accessors[-1] if spec.accessors else None, tt) and acc.idx >= tt.nelems:
                return None, f"index {acc.idx} is past the target array's {tt.nelems} elements"
            type_id = _skip(targ, tt.type).id
        if len(spec.raw) >= MAX_SPEC_LEN:
            raise CORERelocationError(f"target access deeper than {MAX_SPEC_LEN}")
        spec.accessors.append(Accessor(type_id, acc.idx, None))
        spec.raw.append(acc.idx)
        spec.bit_offset += acc.idx * _size(targ, type_id) * 8
    return spec, ""


# ----------------------------------------------------------------------------- results
@dataclasses.dataclass(repr=False, eq=False)
class Result(DataRecord):
    """What to do to the instruction: expect ``orig`` there, put ``new`` (unless poisoned).
    ``orig_size``/``new_size`` are memory access sizes for LDX/ST/STX (0: leave alone)."""

    orig: int = 0
    new: int = 0
    poison: bool = False
    validate: bool = True
    orig_size: int = 0
    new_size: int = 0
    orig_type_id: int = 0
    new_type_id: int = 0
    fail_memsz_adjust: bool = False


class _Poison(Exception):
    """Internal: the relocation cannot be satisfied on this target; poison the instruction."""


def _field_value(spec: AccessSpec | None, kind: ReloKind, where: str) -> tuple[int, int, int, bool]:
    """(value, access size, type id of the field, validate) for a field relocation."""
    if kind == ReloKind.FIELD_EXISTS:
        return (1 if spec is not None else 0), 0, 0, True
    if spec is None:
        raise _Poison()
    btf = spec.btf
    acc = spec.accessors[-1]
    if acc.name is None:  # the last step is an array index
        if kind == ReloKind.FIELD_BYTE_OFFSET:
            elem = _skip(btf, acc.type_id)
            while isinstance(elem, Array):
                elem = _skip(btf, elem.type)
            return spec.bit_offset // 8, _size(btf, elem.id), elem.id, True
        if kind == ReloKind.FIELD_BYTE_SIZE:
            return _size(btf, acc.type_id), 0, 0, True
        raise CORERelocationError(f"{where}: {kind.label} cannot be applied to an array element")
    parent = btf.types[acc.type_id]
    assert isinstance(parent, Struct)
    member = parent.members[acc.idx]
    mt = _skip(btf, member.type)
    bit_off = spec.bit_offset
    bit_sz = member.bitfield_size
    bitfield = bit_sz > 0
    if bitfield:
        byte_sz = getattr(mt, "size", 0)
        if byte_sz <= 0:
            raise CORERelocationError(f"{where}: bitfield {member.name!r} has a type without a size")
        byte_off = bit_off // 8 // byte_sz * byte_sz
        # The smallest naturally aligned load that holds the whole bitfield.
        while bit_off + bit_sz - byte_off * 8 > byte_sz * 8:
            if byte_sz >= 8:
                raise CORERelocationError(f"{where}: bitfield {member.name!r} cannot be read with a 64-bit load")
            byte_sz *= 2
            byte_off = bit_off // 8 // byte_sz * byte_sz
    else:
        byte_sz = _size(btf, mt.id)
        byte_off = bit_off // 8
        bit_sz = byte_sz * 8
    # A bitfield's offset/size/shift are where we and the compiler may legitimately disagree
    # (it may use another load size), so only non-bitfields and signedness are validated.
    validate = not bitfield
    if kind == ReloKind.FIELD_BYTE_OFFSET:
        return byte_off, (0 if bitfield else byte_sz), (0 if bitfield else mt.id), validate
    if kind == ReloKind.FIELD_BYTE_SIZE:
        return byte_sz, 0, 0, validate
    if kind == ReloKind.FIELD_SIGNED:
        signed = (isinstance(mt, Enum) and mt.signed) or (isinstance(mt, Int) and mt.signed)
        return int(signed), 0, 0, True
    if kind == ReloKind.FIELD_LSHIFT_U64:  # little-endian: bring the field's top bit to bit 63
        return 64 - (bit_off + bit_sz - byte_off * 8), 0, 0, validate
    if kind == ReloKind.FIELD_RSHIFT_U64:
        return 64 - bit_sz, 0, 0, True
    raise CORERelocationError(f"{where}: unexpected field relocation kind {kind}")  # pragma: no cover


def _type_value(spec: AccessSpec | None, kind: ReloKind) -> tuple[int, bool]:
    if spec is None:
        return 0, True  # type relocations give 0 when the target lacks the type
    if kind == ReloKind.TYPE_ID_TARGET:
        return spec.root_id, False  # ids change when objects are linked: never validated
    if kind in (ReloKind.TYPE_EXISTS, ReloKind.TYPE_MATCHES):
        return 1, True
    if kind == ReloKind.TYPE_SIZE:
        return _size(spec.btf, spec.root_id), True
    raise CORERelocationError(f"unexpected type relocation kind {kind}")  # pragma: no cover


def _enum_value(spec: AccessSpec | None, kind: ReloKind) -> int:
    if kind == ReloKind.ENUMVAL_EXISTS:
        return 1 if spec is not None else 0
    if spec is None:
        raise _Poison()
    acc = spec.accessors[0]
    enum_t = spec.btf.types[acc.type_id]
    assert isinstance(enum_t, Enum)  # an enum-based spec's root is an ENUM/ENUM64 (checked when it was built)
    return enum_t.values[acc.idx].value


def compute(local: AccessSpec, targ: AccessSpec | None, where: str = "relocation") -> Result:
    """The relocation's result for a matched target spec, or for none (``targ`` None)."""
    res = Result()
    kind = local.kind
    try:
        if kind.field_based:
            res.orig, res.orig_size, res.orig_type_id, res.validate = _field_value(local, kind, where)
            res.new, res.new_size, res.new_type_id, _ = _field_value(targ, kind, where)
            if res.orig_size != res.new_size:
                # Loads of another size are fine for pointers (32-bit kernels) and unsigned
                # integers; anything else would read the wrong bits (checked for LDX/ST/STX).
                ot, nt = local.btf.types[res.orig_type_id], targ.btf.types[res.new_type_id]  # type: ignore[union-attr]
                ok = (isinstance(ot, Pointer) and isinstance(nt, Pointer)) or (
                    isinstance(ot, Int) and isinstance(nt, Int) and not ot.signed and not nt.signed)
                res.fail_memsz_adjust = not ok
        elif kind.type_based:
            res.orig, res.validate = _type_value(local, kind)
            res.new, _ = _type_value(targ, kind)
        else:
            res.orig = _enum_value(local, kind)
            res.new = _enum_value(targ, kind)
    except _Poison:
        res.poison = True
    return res


# ------------------------------------------------------------------------ resolutions
@dataclasses.dataclass(repr=False, eq=False)
class CoreResolution(DataRecord):
    """How one relocation of a program resolved against the target."""

    program: str
    insn: int  # in the program's final layout
    index: int  # the relocation's number in its program (for messages)
    relo: CORERelo
    local: AccessSpec
    target: AccessSpec | None
    result: Result
    candidates: list[str] = dataclasses.field(default_factory=list)  # "[id] kind name in btf"
    why: str = ""  # why nothing matched (set when target is None)

    @property
    def kind(self) -> ReloKind:
        return self.local.kind

    @property
    def poisoned(self) -> bool:
        return self.result.poison

    def explain(self) -> str:
        """For error messages: which relocation, on what, and why it failed."""
        what = self.local.describe()
        text = f"CO-RE relocation #{self.index} ({self.kind.label}) at instruction {self.insn} of program {self.program!r}: {what}"
        if self.result.poison:
            text += f": {self.why or 'cannot be satisfied on this kernel'}"
        return text


class CORERelocator:
    """Resolves relocations of one object against target BTF, caching candidates per local
    root type across programs (as libbpf does per object).

    ``targets`` are searched first (vmlinux, or a user-supplied BTF); ``fallback``, called at
    most once and only when a root type has no candidate there, gives more (module BTF)."""

    def __init__(self, local: BTF, targets: Sequence[BTF], fallback: Callable[[], Sequence[BTF]] | None = None) -> None:
        self.local = local
        self.targets = list(targets)
        self._fallback = fallback
        self._more: list[BTF] | None = None
        self._cands: dict[int, list[tuple[BTF, int]]] = {}
        self._prefetched: dict[int, list[tuple[BTF, int]]] = {}  # candidates in targets

    def _extra(self) -> list[BTF]:
        if self._more is None:
            self._more = list(self._fallback()) if self._fallback is not None else []
        return self._more

    def prefetch(self, relos: Iterable[CORERelo]) -> None:
        """Find the target candidates of every root type ``relos`` name in one search per
        target BTF (one pass over vmlinux's strings rather than one per type); the module
        fallback stays per type, in :meth:`candidates`."""
        todo: dict[int, str] = {}
        for relo in relos:
            tid = relo.type_id
            if (relo.kind == ReloKind.TYPE_ID_LOCAL or tid in todo or tid in self._cands
                    or tid in self._prefetched or not 0 < tid < len(self.local.types)):
                continue
            name = self.local.types[tid].name
            if name:
                todo[tid] = essential_name(name)
        if not todo:
            return
        kinds = frozenset(k for tid in todo for k in _compat_kinds(self.local.types[tid]))
        found = [(btf, btf.find_flavors_many(todo.values(), own_only=True, kinds=kinds)) for btf in self.targets]
        for tid, want in todo.items():
            local_t = self.local.types[tid]
            self._prefetched[tid] = [(btf, t.id) for btf, named in found for t in named[want] if _kinds_compat(t, local_t)]

    def candidates(self, type_id: int) -> list[tuple[BTF, int]]:
        """Target types a local root type may be: same kind (ENUM/ENUM64 alike), same name
        without flavors; vmlinux first, modules only when vmlinux has none."""
        cached = self._cands.get(type_id)
        if cached is not None:
            return cached
        local_t = self.local.types[type_id]
        want = essential_name(local_t.name)
        kinds = _compat_kinds(local_t)
        found = self._prefetched.pop(type_id, None)
        if found is None:
            found = [(btf, t.id) for btf in self.targets
                     for t in btf.find_flavors_many([want], own_only=True, kinds=kinds)[want] if _kinds_compat(t, local_t)]
        if not found:
            found = [(btf, t.id) for btf in self._extra()
                     for t in btf.find_flavors_many([want], own_only=True, kinds=kinds)[want] if _kinds_compat(t, local_t)]
        self._cands[type_id] = found
        return found

    def resolve(self, relo: CORERelo, program: str = "", insn: int = 0, index: int = 0) -> CoreResolution:
        """Resolve one relocation (no instruction is touched)."""
        where = f"program {program!r}: CO-RE relocation #{index} at instruction {insn}"
        try:
            local = parse_spec(self.local, relo)
        except CORERelocationError as exc:
            raise exc.wrap(where)
        if local.kind == ReloKind.TYPE_ID_LOCAL:
            res = Result(orig=relo.type_id, new=relo.type_id, validate=False)
            return CoreResolution(program, insn, index, relo, local, None, res)
        root = self.local.types[relo.type_id]
        if not root.name:
            raise CORERelocationError(
                f"{where}: {local.kind.label} relocation on an anonymous {_kind_word(root)} (type {relo.type_id}); "
                "CO-RE finds target types by name"
            )
        cands = self.candidates(relo.type_id)
        chosen: AccessSpec | None = None
        result: Result | None = None
        kept: list[tuple[BTF, int]] = []
        reasons: list[str] = []
        labels = [f"[{tid}] {_kind_word(btf.types[tid])} {btf.types[tid].name}" + (f" in {btf.name}" if btf.name else "")
                  for btf, tid in cands]
        for btf, tid in cands:
            try:
                targ, why = match_spec(local, btf, tid)
            except CORERelocationError as exc:
                raise exc.wrap(f"{where}: matching candidate [{tid}] {btf.types[tid].name!r}")
            if targ is None:
                reasons.append(why)
                continue
            res = compute(local, targ, where)
            if chosen is None:
                chosen, result = targ, res
            elif targ.bit_offset != chosen.bit_offset:
                raise CORERelocationError(
                    f"{where}: {local.describe()} is ambiguous: candidates {chosen.describe()} and "
                    f"{targ.describe()} put the field at different offsets"
                )
            elif res.poison != result.poison or res.new != result.new:  # type: ignore[union-attr]
                raise CORERelocationError(
                    f"{where}: {local.describe()} is ambiguous: candidates {chosen.describe()} and "
                    f"{targ.describe()} give different values ({result.new} and {res.new})"  # type: ignore[union-attr]
                )
            kept.append((btf, tid))
        if kept:
            # Candidates that failed once are not considered for this root type again.
            self._cands[relo.type_id] = kept
            assert result is not None
            return CoreResolution(program, insn, index, relo, local, chosen, result, labels)
        if not cands:
            why = f"the kernel has no {_kind_word(root)} named {essential_name(root.name)!r}"
        else:
            why = "; ".join(dict.fromkeys(reasons)) or "no candidate matched"
        return CoreResolution(program, insn, index, relo, local, None, compute(local, None, where), labels, why)


# ---------------------------------------------------------------------------- patching
def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _poison_at(code: bytearray, at: int) -> None:
    _INSN.pack_into(code, at, 0x85, 0, 0, POISON_HELPER)  # BPF_JMP | BPF_CALL, helper 0xbad2310


def patch_insn(code: bytearray, res: CoreResolution) -> None:
    """Apply ``res`` to instruction ``res.insn`` of ``code`` (patch, or poison)."""
    insn = res.insn
    at = insn * 8
    where = f"program {res.program!r}: CO-RE relocation #{res.index} ({res.kind.label}) at instruction {insn}"
    if at + 8 > len(code):
        raise CORERelocationError(f"{where}: the program has only {len(code) // 8} instructions")
    op, regs, off, imm = _INSN.unpack_from(code, at)
    cls = op & 0x07
    r = res.result
    is_ldimm64 = op == 0x18
    if r.poison:
        if is_ldimm64 and at + 16 <= len(code):
            _poison_at(code, at + 8)  # else the verifier complains about "unknown opcode 00" first
        _poison_at(code, at)
        return
    if cls in (_CLASS_ALU, _CLASS_ALU64):
        if op & 0x08:
            raise CORERelocationError(f"{where}: ALU instruction {op:#04x} takes a register, not an immediate to relocate")
        if r.validate and imm != _signed32(r.orig) and imm != r.orig:
            raise CORERelocationError(f"{where}: the ALU instruction holds {imm}, expected {r.orig} (-> {r.new})")
        _I32.pack_into(code, at + 4, _signed32(r.new))
        return
    if cls in (_CLASS_LDX, _CLASS_ST, _CLASS_STX):
        if r.validate and off != r.orig:
            raise CORERelocationError(f"{where}: the LDX/ST/STX instruction has offset {off}, expected {r.orig} (-> {r.new})")
        if r.new > 0x7FFF:
            raise CORERelocationError(f"{where}: new offset {r.new} does not fit an instruction's 16-bit offset")
        if r.fail_memsz_adjust:
            res.why = (f"the field is {r.new_size} bytes in the kernel but {r.orig_size} in the object, and it is "
                       "neither a pointer nor an unsigned integer, so the load cannot be resized")
            _poison_at(code, at)
            res.result.poison = True
            return
        struct.pack_into("<h", code, at + 2, r.new)
        if r.new_size != r.orig_size:
            size = _SIZE_BYTES[op & 0x18]
            if size != r.orig_size:
                raise CORERelocationError(f"{where}: the instruction accesses {size} bytes, expected {r.orig_size}")
            new_bits = _BYTES_SIZE.get(r.new_size)
            if new_bits is None:
                raise CORERelocationError(f"{where}: no load/store of {r.new_size} bytes")
            code[at] = (op & 0xE0) | new_bits | cls
        return
    if cls == _CLASS_LD:
        if not is_ldimm64 or at + 16 > len(code) or regs >> 4 or off:
            raise CORERelocationError(f"{where}: instruction {op:#04x} is not a plain ld_imm64")
        op2, regs2, off2, imm2 = _INSN.unpack_from(code, at + 8)
        if op2 or regs2 or off2:
            raise CORERelocationError(f"{where}: the second half of the ld_imm64 is malformed")
        value = (imm & 0xFFFFFFFF) | ((imm2 & 0xFFFFFFFF) << 32)
        if r.validate and value != r.orig & 0xFFFFFFFFFFFFFFFF:
            raise CORERelocationError(f"{where}: the ld_imm64 holds {value}, expected {r.orig} (-> {r.new})")
        new = r.new & 0xFFFFFFFFFFFFFFFF
        _I32.pack_into(code, at + 4, _signed32(new))
        _I32.pack_into(code, at + 12, _signed32(new >> 32))
        return
    raise CORERelocationError(f"{where}: cannot relocate instruction {op:#04x} (not ALU, LDX/ST/STX or ld_imm64)")


def relocate(program: str, code: bytes, relos: Iterable[tuple[int, CORERelo]],
             relocator: CORERelocator) -> tuple[bytes, list[CoreResolution]]:
    """Resolve and apply every CO-RE relocation of a program: (new code, resolutions)."""
    out = bytearray(code)
    done: list[CoreResolution] = []
    for index, (insn, relo) in enumerate(relos):
        res = relocator.resolve(relo, program, insn, index)
        patch_insn(out, res)
        done.append(res)
    return bytes(out), done


def poisoned_insns(log: str) -> list[int]:
    """Instruction numbers the verifier log shows calling the poison helper."""
    import re

    return [int(m.group(1)) for m in re.finditer(rf"^(\d+): \(85\) call unknown#{POISON_HELPER}", log, re.M)]
