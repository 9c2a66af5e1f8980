# SPDX-License-Identifier: Apache-2.0
"""Typed skeletons: what one object offers (programs, maps, variables, the structs and enums
they use) as Python names and annotations, and the source of a module that declares them.

    plan = skeleton_plan(spec)                  # names and types, from the object's BTF
    text = generate(spec, "Syscount", object_path="../../bpf/.output/examples/syscount.bpf.o")

`bpfkit gen skeleton OBJ` writes ``generate``'s text; :func:`bpfkit.open` builds the same class
at run time from the same plan (bpfkit.skeleton). The spec layer: no kernel access.

Naming. Programs, maps and global variables share C's one namespace of globals, so each keeps
its C name as an attribute (one leading underscore less for ``__names``, which a class body
would mangle); a name that is a Python keyword or a method of the skeleton base
class gets a trailing underscore (``load_``), a data section map is named after its section
without the dot (``.bss`` -> ``bss``, ``.rodata.str1.1`` -> ``rodata_str1_1``), and a name taken
twice gets ``_map``/``_2`` appended. Static variables are left out (libbpf's skeletons hide them).

Types. Each annotation is what :mod:`bpfkit.btf.values` decodes the BTF type into: ``int``
(enums too: their IntEnum members are ints), ``bool``, ``float``, ``str | bytes`` for char
arrays, ``list[...]`` for other arrays, a generated :class:`Record` subclass per named struct or
union (anonymous members flattened as C names them), ``Record`` for an anonymous struct.
Records are generated for the structs reachable from map keys and values and from global
variables (through pointers too: ``struct event *unused_event`` puts a ring buffer's record type
in BTF), and for any struct named ``event``, ``event_t`` or ``*_event_t`` (event structs sent through rings).
"""

from __future__ import annotations

import dataclasses
import keyword
import re

from .btf import BTF
from .btf.types import Array, Enum, Float, Int, IntEncoding, Pointer, Struct, Type, Union
from .errors import UsageError
from .spec.collection import CollectionSpec
from .spec.maps import PERCPU_TYPES

__all__ = ["Attr", "RecordPlan", "EnumPlan", "SkeletonPlan", "skeleton_plan", "generate", "class_name_for",
           "RESERVED"]

# Names of the skeleton base class (bpfkit.skeleton.Skeleton) an attribute must not hide.
RESERVED = frozenset({
    "open", "open_and_load", "load", "attach", "detach", "close", "decode", "spec", "collection", "links",
    "loaded", "OBJECT", "RECORDS", "PLAN", "object_path",
})
# Builtins the annotations use: no generated class or attribute may hide them.
_RECORD_NAMES = frozenset({"to_dict", "_fields"})  # Record's own names
_BUILTINS = frozenset({"int", "bool", "float", "str", "bytes", "list", "object"})
# Event structs by name: what ring buffers and perf arrays carry in libbpf-tools and bcc tools.
# (``*_event`` alone would take kernel structs: an object's BTF holds task_struct and all it
# reaches when a program reads one field of it with CO-RE.)
_EVENT_NAME = re.compile(r"^(event|(\w+_)?event_t)$")
_QUALIFIERS = ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG", "TYPEDEF")


@dataclasses.dataclass(frozen=True)
class Attr:
    """One attribute of a skeleton: ``name`` its C name (a map's or section's), ``attr`` the
    Python attribute, ``kind`` program/map/variable; ``key``/``value`` a map's annotations,
    ``value`` a variable's; ``const`` for .rodata variables (set before load only); ``comment``
    for people (section, map type, C type)."""

    kind: str
    name: str
    attr: str
    key: str = ""
    value: str = ""
    const: bool = False
    comment: str = ""
    size: int = 0  # a variable's size, or a map's value size: checked against the object at open


@dataclasses.dataclass(frozen=True)
class RecordPlan:
    """A Record subclass for struct/union ``name`` (BTF type ``type_id``), named ``cls``."""

    name: str
    cls: str
    type_id: int
    fields: tuple[tuple[str, str], ...]  # (field, annotation) in BTF order, anonymous members flattened
    union: bool
    size: int


@dataclasses.dataclass(frozen=True)
class EnumPlan:
    name: str
    cls: str
    members: tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class SkeletonPlan:
    object_name: str
    programs: tuple[Attr, ...]
    maps: tuple[Attr, ...]
    variables: tuple[Attr, ...]
    records: tuple[RecordPlan, ...]
    enums: tuple[EnumPlan, ...]

    @property
    def attrs(self) -> tuple[Attr, ...]:
        return self.programs + self.maps + self.variables


def class_name_for(object_name: str) -> str:
    """``syscount`` -> ``Syscount``, ``cli_opensnoop`` -> ``CliOpensnoop``."""
    words = [w for w in re.split(r"[^0-9A-Za-z]+", object_name) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Skeleton"
    return name if name.isidentifier() and not name[0].isdigit() else f"Skel{name}"


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name.lstrip("."))
    if not ident or ident[0].isdigit():
        ident = f"_{ident}"
    return ident


class _Types:
    """Annotations for BTF types, collecting the records and enums they need."""

    def __init__(self, btf: BTF) -> None:
        self.btf = btf
        self.records: dict[int, RecordPlan | None] = {}  # None while being built (recursion)
        self.record_names: dict[str, int] = {}
        self.enums: dict[int, EnumPlan] = {}
        self.taken: set[str] = set()

    def _unqualified(self, type_id: int) -> Type:
        t = self.btf.type_by_id(type_id)
        for _ in range(64):
            if t.kind.name not in _QUALIFIERS:
                return t
            t = self.btf.type_by_id(t.type)  # type: ignore[attr-defined]
        return t

    def annotation(self, type_id: int) -> str:
        t = self._unqualified(type_id)
        if isinstance(t, Int):
            return "bool" if t.encoding & IntEncoding.BOOL else "int"
        if isinstance(t, Enum):
            self.enum(t)
            return "int"  # the codec's IntEnum members are ints
        if isinstance(t, Float):
            return "float"
        if isinstance(t, Pointer):
            return "int"
        if isinstance(t, Array):
            elem = self.btf.type_by_id(t.type)
            while elem.kind.name in ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):  # as the codec: not typedefs
                elem = self.btf.type_by_id(elem.type)  # type: ignore[attr-defined]
            if isinstance(elem, Int) and elem.size == 1 and not elem.encoding & IntEncoding.BOOL and (
                    elem.encoding & IntEncoding.CHAR or elem.name in ("char", "unsigned char", "signed char")):
                return "str | bytes"
            return f"list[{self.annotation(t.type)}]"
        if isinstance(t, Struct):
            return self.record(t)
        return "object"

    def enum(self, t: Enum) -> None:
        if t.id in self.enums or not t.name:
            return
        members = tuple((v.name, v.value) for v in t.values if v.name.isidentifier() and not v.name.startswith("_")
                        and not keyword.iskeyword(v.name))
        self.enums[t.id] = EnumPlan(t.name, self._class_name(t.name, "_enum"), members)

    def _class_name(self, name: str, suffix: str) -> str:
        cls = name if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_") else \
            f"T_{_identifier(name).lstrip('_')}"
        if cls in self.taken:
            cls += suffix  # the name of an attribute or builtin: `units` -> `units_enum`
        base, n = cls, 2
        while cls in self.taken:
            cls, n = f"{base}_{n}", n + 1
        self.taken.add(cls)
        return cls

    def record(self, t: Struct) -> str:
        if not t.name:
            return "_Record"  # an anonymous struct has no name to map a class to
        if t.id in self.records:
            plan = self.records[t.id]
            return "_Record" if plan is None else plan.cls
        if self.record_names.get(t.name, t.id) != t.id:
            return "_Record"  # a second struct of that name (CO-RE flavours): the codec maps by name
        self.record_names[t.name] = t.id
        self.records[t.id] = None
        fields = tuple(self._fields(t))
        union = isinstance(t, Union)
        plan = RecordPlan(t.name, self._class_name(t.name, "_union" if union else "_struct"), t.id, fields, union, t.size)
        self.records[t.id] = plan
        return plan.cls

    def _fields(self, t: Struct) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for m in t.members:
            sub = self._unqualified(m.type)
            if not m.name and isinstance(sub, Struct):
                out.extend(self._fields(sub))  # anonymous member: its fields are the parent's
            elif m.name.isidentifier() and not keyword.iskeyword(m.name) and not m.name.startswith("__") \
                    and m.name not in _RECORD_NAMES:
                out.append((m.name, self.annotation(m.type)))
            elif m.name:
                self.annotation(m.type)  # a field Python cannot declare (mangled, a keyword): getattr() reads it
        return out


def skeleton_plan(spec: CollectionSpec) -> SkeletonPlan:
    """The names and annotations of a skeleton for ``spec`` (see the module's docstring)."""
    btf = spec.btf
    types = _Types(btf) if btf is not None else None
    used: set[str] = set(RESERVED | _BUILTINS)

    def attr_name(name: str, suffix: str) -> str:
        ident = _identifier(name)
        if ident.startswith("__"):
            ident = ident[1:]  # a class body would mangle __x: libbpf's __bpf_usdt_specs -> _bpf_usdt_specs
        if keyword.iskeyword(ident) or ident in RESERVED:
            ident += "_"
        if ident in used:
            ident += suffix
        n = 2
        base = ident
        while ident in used:
            ident, n = f"{base}_{n}", n + 1
        used.add(ident)
        return ident

    def ann(type_id: int) -> str:
        return types.annotation(type_id) if types is not None and type_id else "bytes"

    # Names first (C's one namespace of globals), so that generated classes avoid them: a class
    # attribute would hide a module-level class of the same name in the class body.
    prog_names = {name: attr_name(name, "_prog") for name in spec.programs}
    map_names = {name: attr_name(name, "_map") for name in spec.maps}
    var_names = {name: attr_name(name, "_var") for name, v in spec.variables.items() if not v.static}
    if types is not None:
        types.taken |= used | _BUILTINS
    programs = tuple(Attr("program", name, prog_names[name], comment=p.section) for name, p in spec.programs.items())
    variables = []
    for name, attr in var_names.items():
        v = spec.variables[name]
        variables.append(Attr("variable", name, attr, value=ann(v.type_id), const=v.constant,
                              comment=f"{v.type_name or f'{v.size} bytes'} ({v.section})", size=v.size))
    maps = []
    for name, m in spec.maps.items():
        data = m.data is not None and name.startswith(".")
        key = "int" if data else ann(m.btf_key_type_id) if m.btf_key_type_id else "bytes"
        value = "bytes" if data else ann(m.btf_value_type_id) if m.btf_value_type_id else "bytes"
        if m.type in PERCPU_TYPES and not data:
            value = f"list[{value}]"
        maps.append(Attr("map", name, map_names[name], key=key, value=value,
                         comment=f"{m.type.name.lower()}, {m.max_entries} entries", size=m.value_size))
    if types is not None and btf is not None:
        for v in spec.variables.values():  # structs behind pointer variables (the unused_event trick)
            t = types._unqualified(v.type_id) if v.type_id else None
            if isinstance(t, Pointer):
                types.annotation(t.type)
        for tid in btf.own_ids():
            t = btf.type_by_id(tid)
            if isinstance(t, Struct) and _EVENT_NAME.match(t.name):
                types.record(t)
    records = tuple(sorted((r for r in (types.records.values() if types else ()) if r is not None),
                           key=lambda r: r.type_id))
    enums = tuple(sorted(types.enums.values(), key=lambda e: e.cls)) if types else ()
    return SkeletonPlan(spec.name, programs, tuple(maps), tuple(variables), records, enums)


# --------------------------------------------------------------------------- the module
def generate(spec: CollectionSpec, class_name: str | None = None, *, object_path: str = "",
             command: str = "") -> str:
    """Python source of a typed skeleton module for ``spec``: Record subclasses, IntEnums and a
    :class:`bpfkit.skeleton.Skeleton` subclass named ``class_name``. ``object_path``: where
    ``open()`` finds the object, relative to the module's directory (or absolute); ``command``:
    the command line that regenerates it, quoted in the header."""
    plan = skeleton_plan(spec)
    cls = class_name or class_name_for(spec.name)
    if not cls.isidentifier() or keyword.iskeyword(cls):
        raise UsageError(f"skeleton class name {cls!r} is not a Python identifier")
    if cls in {r.cls for r in plan.records} | {e.cls for e in plan.enums} | _BUILTINS:
        raise UsageError(f"skeleton class name {cls!r} is also the name of a struct or enum of the object "
                         "or a builtin: choose another with --name")
    out: list[str] = [
        f'"""Typed skeleton of {spec.name}.bpf.o: generated by `bpfkit gen skeleton`; do not edit.',
        "",
        f"    with {cls}.open() as skel:       # the object as a spec: set const volatile knobs now",
        "        skel.load()                   # maps, then programs",
        "        skel.attach()                 # every program whose section names a target",
        '"""',
    ]
    if command:
        out.append(f"# Regenerate: {command}")
    out += [
        "",
        "from __future__ import annotations",
        "",
    ]
    if plan.enums:
        out.append("import enum as _enum")
    out += [
        "from typing import ClassVar as _ClassVar",
        "",
        "from bpfkit import skeleton as _skel",
        "from bpfkit.btf.values import Record as _Record",
        "",
        f"__all__ = {[cls] + [e.cls for e in plan.enums] + [r.cls for r in plan.records]!r}",
    ]
    for e in plan.enums:
        out += ["", "", f"class {e.cls}(_enum.IntEnum):", f'    """enum {e.name}"""', ""]
        out += [f"    {n} = {v}" for n, v in e.members] or ["    pass"]
    for r in plan.records:
        kind = "union" if r.union else "struct"
        out += ["", "", f"class {r.cls}(_Record):", f'    """{kind} {r.name} ({r.size} bytes)"""', ""]
        out += [f"    {f}: {a}" for f, a in r.fields] or ["    pass"]
    out += ["", "", f"class {cls}(_skel.Skeleton):",
            f'    """Programs, maps and global variables of {spec.name}.bpf.o."""', "",
            f"    OBJECT: _ClassVar[str] = {object_path or f'{spec.name}.bpf.o'!r}",
            "    RECORDS: _ClassVar[dict[str, type[_Record]]] = {" +
            ", ".join(f"{r.name!r}: {r.cls}" for r in plan.records) + "}"]
    if plan.programs:
        out += ["", "    # programs"]
        out += [f"    {a.attr}: _skel.ProgramAttr = _skel.ProgramAttr({a.name!r})  # {a.comment}"
                for a in plan.programs]
    if plan.maps:
        out += ["", "    # maps"]
        out += [f"    {a.attr}: _skel.MapAttr[{a.key}, {a.value}] = _skel.MapAttr({a.name!r}, {a.size})  # {a.comment}"
                for a in plan.maps]
    if plan.variables:
        out += ["", "    # variables (const: set before load(); the others read and write after load too)"]
        out += [f"    {a.attr}: _skel.Variable[{a.value}] = _skel.Variable({a.name!r}, {a.size}, const={a.const})"
                f"  # {a.comment}" for a in plan.variables]
    return "\n".join(out) + "\n"
