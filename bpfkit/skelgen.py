# SPDX-License-Identifier: Apache-2.0
"""Typed skeletons: what one object offers (programs, maps, variables, the structs and enums
they use) as Python names and annotations, and the source of a module that declares them.

    plan = skeleton_plan(spec)                  # names and types, from the object's BTF
    text = generate(spec, "Syscount", object_path="../../bpf/.output/examples/syscount.bpf.o")

`bpfkit gen skeleton OBJ` writes ``generate``'s text; :func:`bpfkit.open` builds the same class
at run time from the same plan (bpfkit.skeleton). The spec layer: no kernel access.

An object is input from whoever built it: every string taken from it (section, type and file
names) enters the module only as a literal written by ``repr()``, in code, comments and
docstrings alike (a line break ends a comment, three double quotes a docstring: what follows
would run on import), and every name that becomes a Python name is what Python reads (below).

Naming. Programs, maps and global variables share C's one namespace of globals, so each keeps
its C name as an attribute where Python reads that name as it is. Python normalises every
identifier with NFKC (PEP 3131: a fullwidth ``open`` is ``open``, ``ﬁx`` is ``fix``), so a name is
normalised first and a character no identifier may hold becomes ``_`` (``q²`` -> ``q2``,
``a-b`` -> ``a_b``, ``_`` before a leading digit); ``__names`` keep one leading underscore (a class
body would mangle them); a keyword, a name of the skeleton base class (``load``,
``default_object``, ``_codecs``: :data:`RESERVED`), a name the module imports (``_skel``) or a
builtin its annotations name gets a trailing underscore (``load_``); a data section's map is
named after its section without the dot (``.bss`` -> ``bss``, ``.rodata.str1.1`` ->
``rodata_str1_1``). Names Python reads as they are claim theirs first; a renamed one that is
taken gets ``_prog``/``_map``/``_var``, then ``_2``, ... appended. Every rename is said in the
comment after the attribute (``# 'ﬁx' renamed fix_var: NFKC makes it 'fix', fix is taken``).
Static variables are left out (libbpf's skeletons hide them). Struct and enum classes are
named the same way (``T_`` for a leading underscore or a keyword, ``_struct``/``_enum`` when
taken), as are enum members (``mro_``: enum refuses ``mro``, mypy the names of int); a struct
field keeps its C name (the decoder sets it) and is left undeclared where Python would read
another name or it would hide a type a later field's annotation names (``str``).

Types. Each annotation is what :mod:`bpfkit.btf.values` decodes the BTF type into: ``int``
(enums too: their IntEnum members are ints), ``bool``, ``float``, ``str | bytes`` for char
arrays, ``list[...]`` for other arrays, a generated :class:`Record` subclass per named struct or
union (anonymous members flattened as C names them), ``Record`` for an anonymous struct.
Records are generated for the structs reachable from map keys and values and from global
variables (through pointers too: ``struct event *unused_event`` puts a ring buffer's record type
in BTF), and for any struct named ``event``, ``event_t`` or ``*_event_t`` (event structs sent through rings),
from the object's DWARF when BTF lacks it (bpfkit.btf.dwarf: libbpf-tools' opensnoop builds its
event in an untyped heap map; DWARF is read only when ``.debug_str`` holds such a name).
"""

from __future__ import annotations

import dataclasses
import keyword
import re
import unicodedata

from .btf import BTF
from .btf.dwarf import dwarf_types
from .btf.types import Array, Enum, Float, Int, IntEncoding, Pointer, Struct, Type, Union
from .errors import BPFKitError, UsageError
from .spec.collection import CollectionSpec
from .spec.maps import PERCPU_TYPES
from .spec.twins import find_twins

__all__ = ["Attr", "RecordPlan", "EnumPlan", "SkeletonPlan", "skeleton_plan", "generate", "class_name_for",
           "python_name", "RESERVED"]

# Names of the skeleton base class (bpfkit.skeleton.Skeleton, DynamicSkeleton) and of its
# instances: an attribute of that name would replace a method (``default_object``: open()
# calls it) or the instance's own state (``_codecs``: __init__ then recurses through the
# descriptor). tests/test_skelgen_hostile.py checks that this covers dir(DynamicSkeleton).
RESERVED = frozenset({
    "open", "open_and_load", "load", "attach", "detach", "close", "decode", "default_object", "spec", "collection",
    "links", "loaded", "OBJECT", "RECORDS", "PLAN", "object_path",
    "_codecs", "_views", "_check", "_declared", "_loaded", "_variable", "_view", "_read_variable", "_write_variable",
})
# What the generated module binds itself (its imports; ``annotations`` by the __future__
# import) and the builtins its annotations name: an attribute of such a name hides it in the
# class body (``_skel`` breaks every later line), a class replaces it in the module.
_MODULE_NAMES = frozenset({"annotations", "_enum", "_ClassVar", "_skel", "_Record"})
_BUILTINS = frozenset({"int", "bool", "float", "str", "bytes", "list", "object", "dict", "type"})
_RECORD_NAMES = frozenset({"to_dict", "_fields"})  # Record's own names
# Names of int and IntEnum (Python 3.11-3.13) a member must not take: enum refuses ``mro``;
# mypy refuses the others as incompatible with the base's (``name: str``, ``to_bytes()``).
_ENUM_NAMES = frozenset({"mro", "name", "value", "real", "imag", "numerator", "denominator", "conjugate",
                         "bit_length", "bit_count", "to_bytes", "from_bytes", "as_integer_ratio", "is_integer"})
# Event structs by name: what ring buffers and perf arrays carry in libbpf-tools and bcc tools.
# (``*_event`` alone would take kernel structs: an object's BTF holds task_struct and all it
# reaches when a program reads one field of it with CO-RE.)
_EVENT_NAME = re.compile(r"^(event|(\w+_)?event_t)$")
_QUALIFIERS = ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG", "TYPEDEF")
# Arrays and structs nested deeper (C allows any depth; BTF may even loop) are annotated
# ``object`` and ``_Record``: Python's parser takes at most 200 nested brackets, and the walk
# (three frames a level) must stay far from the recursion limit.
_MAX_DEPTH = 32


@dataclasses.dataclass(frozen=True)
class Attr:
    """One attribute of a skeleton: ``name`` its C name (a map's or section's), ``attr`` the
    Python attribute, ``kind`` program/map/variable; ``key``/``value`` a map's annotations,
    ``value`` a variable's; ``const`` for .rodata variables (set before load only); ``comment``
    for people (section, map type, C type, why ``attr`` is not ``name``), every string of the
    object in it a ``repr()``: it goes into the module after ``#`` as it is."""

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
    """A Record subclass for struct/union ``name`` (BTF type ``type_id``), named ``cls``;
    ``note`` says why ``cls`` is not ``name``, ``hidden`` the fields left undeclared."""

    name: str
    cls: str
    type_id: int
    fields: tuple[tuple[str, str], ...]  # (field, annotation) in BTF order, anonymous members flattened
    union: bool
    size: int
    note: str = ""
    hidden: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class EnumPlan:
    """An IntEnum for enum ``name``: ``members`` (Python name, value, why renamed); ``hidden``
    the members left out (a leading underscore: C's internal ``__MAX_...``)."""

    name: str
    cls: str
    members: tuple[tuple[str, int, str], ...]
    note: str = ""
    hidden: tuple[str, ...] = ()


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


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def python_name(name: str) -> str:
    """``name`` as a Python identifier that Python reads as written: NFKC-normalised (as the
    parser normalises identifiers), each character an identifier cannot hold replaced by
    ``_``, ``_`` before a first character that cannot start one (a digit); ``_`` for ``""``."""
    ident = name
    for _ in range(4):  # normalising again after a replacement: settles at once in practice
        ident = "".join(c if ("_" + c).isidentifier() else "_" for c in _nfkc(ident)) or "_"
        if not ident.isidentifier():
            ident = "_" + ident
        if _nfkc(ident) == ident:
            return ident
    ident = re.sub(r"[^0-9A-Za-z_]", "_", ident)  # pathological combining sequences: ASCII
    return ident if ident.isidentifier() else "_" + ident


def _asked(name: str) -> tuple[str, list[str]]:
    """The identifier ``name`` becomes and why it is not ``name`` (nothing for a data
    section's map: ``.rodata.str1.1`` -> ``rodata_str1_1`` is the rule, not a rename)."""
    plain = name.lstrip(".").replace(".", "_") if name.startswith(".") else name
    ident = python_name(plain)
    why = []
    if ident != plain:
        nfkc = _nfkc(plain)
        why.append(f"NFKC makes it {nfkc!r}" if nfkc != plain and nfkc.isidentifier() else "not an identifier")
    return ident, why


def _claim(name: str, ident: str, why: list[str], taken: set[str], suffix: str) -> tuple[str, str]:
    """``ident`` made unique in ``taken`` (then added): ``suffix``, then ``_2``, ``_3`` ...
    appended. Returns it and the note a comment says when it is not ``name`` ('' if not)."""
    if ident in taken:
        why = [*why, f"{ident} is taken"]
        ident = base = _unmangled(ident + suffix)  # "_" + "_map" would be mangled
        n = 2
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
    taken.add(ident)
    return ident, f"{name!r} renamed {ident}: {', '.join(why)}" if why else ""


def _unmangled(ident: str) -> str:
    """``ident`` with one leading underscore where it has more: a class body mangles ``__x``
    (and ``__x__`` is Python's): libbpf's ``__bpf_usdt_specs`` -> ``_bpf_usdt_specs``."""
    return "_" + ident.lstrip("_") if ident.startswith("__") else ident


def _used_names(annotation: str) -> set[str]:
    return set(re.findall(r"\w+", annotation))


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

    def annotation(self, type_id: int, depth: int = 0) -> str:
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
        if isinstance(t, Array) and depth < _MAX_DEPTH:
            elem = self.btf.type_by_id(t.type)
            for _ in range(64):  # as the codec: qualifiers, not typedefs
                if elem.kind.name not in ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):
                    break
                elem = self.btf.type_by_id(elem.type)  # type: ignore[attr-defined]
            if isinstance(elem, Int) and elem.size == 1 and not elem.encoding & IntEncoding.BOOL and (
                    elem.encoding & IntEncoding.CHAR or elem.name in ("char", "unsigned char", "signed char")):
                return "str | bytes"
            return f"list[{self.annotation(t.type, depth + 1)}]"
        if isinstance(t, Struct):
            return self.record(t, depth)
        return "object"

    def enum(self, t: Enum) -> None:
        if t.id in self.enums or not t.name:
            return
        wants: list[tuple[str, str, list[str], str]] = []
        values: list[int] = []
        hidden: list[str] = []
        for v in t.values:
            ident, why = _asked(v.name)
            if not v.name or ident.startswith("_"):
                hidden.append(v.name)  # C's internal names (__MAX_BPF_ATTACH_TYPE), enum's _sunder_
                continue
            if keyword.iskeyword(ident) or ident in _ENUM_NAMES:
                why.append("a keyword" if keyword.iskeyword(ident) else "a name of IntEnum")
                ident += "_"
            wants.append((v.name, ident, why, ""))
            values.append(v.value)
        members = tuple((ident, value, note) for (ident, note), value in zip(_claim_all(wants, set()), values))
        cls, note = self._class_name(t.name, "_enum")
        self.enums[t.id] = EnumPlan(t.name, cls, members, note, tuple(hidden))

    def _class_name(self, name: str, suffix: str) -> tuple[str, str]:
        ident, why = _asked(name)
        if keyword.iskeyword(ident) or ident.startswith("_"):
            why.append("a keyword" if keyword.iskeyword(ident) else "a leading underscore")
            ident = f"T_{ident.lstrip('_')}"
        return _claim(name, ident, why, self.taken, suffix)  # `units` (an attribute) -> `units_enum`

    def record(self, t: Struct, depth: int = 0) -> str:
        if not t.name or depth >= _MAX_DEPTH:
            return "_Record"  # no name to map a class to, or too deep (_MAX_DEPTH)
        if t.id in self.records:
            plan = self.records[t.id]
            return "_Record" if plan is None else plan.cls
        if self.record_names.get(t.name, t.id) != t.id:
            return "_Record"  # a second struct of that name (CO-RE flavours): the codec maps by name
        self.record_names[t.name] = t.id
        self.records[t.id] = None
        fields, hidden = self._declared(self._fields(t, depth))
        union = isinstance(t, Union)
        cls, note = self._class_name(t.name, "_union" if union else "_struct")
        self.records[t.id] = RecordPlan(t.name, cls, t.id, fields, union, t.size, note, hidden)
        return cls

    def _fields(self, t: Struct, depth: int) -> list[tuple[str, str]]:
        """(C name, annotation) of the fields, anonymous members flattened."""
        out: list[tuple[str, str]] = []
        for m in t.members:
            sub = self._unqualified(m.type)
            if not m.name and isinstance(sub, Struct):
                if depth < _MAX_DEPTH:
                    out.extend(self._fields(sub, depth + 1))  # anonymous member: its fields are the parent's
            elif m.name:
                out.append((m.name, self.annotation(m.type, depth + 1)))
        return out

    @staticmethod
    def _declared(fields: list[tuple[str, str]]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """The fields a class body can declare, and the others (getattr() reads them): a field
        keeps its C name (the decoder sets it), so it must be an identifier Python reads as
        written, no keyword, not mangled (``__x``), not Record's, not a repeat, and no name a
        later annotation uses (``str: int`` would turn a later ``str | bytes`` into the field)."""
        seen: set[str] = set()
        first = []
        for name, ann in fields:
            ok = name.isidentifier() and _nfkc(name) == name and not keyword.iskeyword(name) \
                and not name.startswith("__") and name not in _RECORD_NAMES and name not in seen
            seen.add(name)
            first.append((name, ann, ok))
        declared: list[tuple[str, str]] = []
        hidden: list[str] = []
        later: set[str] = set()
        for name, ann, ok in reversed(first):
            if ok and name not in later:
                declared.append((name, ann))
                later |= _used_names(ann)
            else:
                hidden.append(name)
        return tuple(reversed(declared)), tuple(reversed(hidden))


def _claim_all(wants: list[tuple[str, str, list[str], str]], taken: set[str]) -> list[tuple[str, str]]:
    """(name, identifier, why, suffix) -> (unique identifier, note), in order: the names Python
    reads as written claim theirs first (C's ``fix`` keeps fix, ``ﬁx`` becomes fix_...)."""
    out: dict[int, tuple[str, str]] = {}
    for rename in (False, True):
        for i, (name, ident, why, suffix) in enumerate(wants):
            if bool(why) == rename:
                out[i] = _claim(name, ident, why, taken, suffix)
    return [out[i] for i in range(len(wants))]


def _attribute(name: str) -> tuple[str, list[str]]:
    """The identifier a program, map or variable asks for, and why it is not its C name."""
    ident, why = _asked(name)
    if ident != _unmangled(ident):
        ident = _unmangled(ident)
        why.append("a class body would mangle __")
    reason = "a keyword" if keyword.iskeyword(ident) else "a name of Skeleton" if ident in RESERVED else \
        "a name the module uses" if ident in _MODULE_NAMES | _BUILTINS else ""
    if reason:
        ident += "_"
        why.append(reason)
    return ident, why


def skeleton_plan(spec: CollectionSpec) -> SkeletonPlan:
    """The names and annotations of a skeleton for ``spec`` (see the module's docstring)."""
    btf = spec.btf
    # Event structs BTF lacks (libbpf-tools' opensnoop builds its event in an untyped heap map)
    # come from the object's DWARF: the types then live in a BTF split on top of the object's.
    dwarf_btf, dwarf_events = _dwarf_events(btf)
    types = _Types(dwarf_btf or btf) if btf is not None else None

    def ann(type_id: int) -> str:
        return types.annotation(type_id) if types is not None and type_id else "bytes"

    # Names first (C's one namespace of globals), so that generated classes avoid them: a class
    # attribute would hide a module-level class of the same name in the class body.
    globals_ = [("_prog", name) for name in spec.programs] + [("_map", name) for name in spec.maps] + \
        [("_var", name) for name, v in spec.variables.items() if not v.static]
    taken = set(RESERVED | _MODULE_NAMES | _BUILTINS)
    claimed = _claim_all([(name, *_attribute(name), suffix) for suffix, name in globals_], taken)
    names = {(suffix, name): got for (suffix, name), got in zip(globals_, claimed)}
    if types is not None:
        types.taken |= taken

    def comment(text: str, note: str) -> str:
        return f"{text}; {note}" if note else text

    programs = tuple(Attr("program", name, names["_prog", name][0],
                          comment=comment(repr(p.section), names["_prog", name][1])) for name, p in spec.programs.items())
    variables = []
    for suffix, name in globals_:
        if suffix != "_var":
            continue
        v = spec.variables[name]
        attr, note = names[suffix, name]
        what = repr(v.type_name) if v.type_name else f"{v.size} bytes"
        variables.append(Attr("variable", name, attr, value=ann(v.type_id), const=v.constant,
                              comment=comment(f"{what} in {v.section!r}", note), size=v.size))
    maps = []
    for name, m in spec.maps.items():
        data = m.data is not None and name.startswith(".")
        key = "int" if data else ann(m.btf_key_type_id) if m.btf_key_type_id else "bytes"
        value = "bytes" if data else ann(m.btf_value_type_id) if m.btf_value_type_id else "bytes"
        if m.type in PERCPU_TYPES and not data:
            value = f"list[{value}]"
        attr, note = names["_map", name]
        maps.append(Attr("map", name, attr, key=key, value=value, size=m.value_size,
                         comment=comment(f"{m.type.name.lower()}, {m.max_entries} entries", note)))
    if types is not None and btf is not None:
        for v in spec.variables.values():  # structs behind pointer variables (the unused_event trick)
            t = types._unqualified(v.type_id) if v.type_id else None
            if isinstance(t, Pointer):
                types.annotation(t.type)
        for tid in btf.own_ids():
            t = btf.type_by_id(tid)
            if isinstance(t, Struct) and _EVENT_NAME.match(t.name):
                types.record(t)
        for t in dwarf_events:
            types.record(t)
    records = tuple(sorted((r for r in (types.records.values() if types else ()) if r is not None),
                           key=lambda r: r.type_id))
    enums = tuple(sorted(types.enums.values(), key=lambda e: e.cls)) if types else ()
    return SkeletonPlan(spec.name, programs, tuple(maps), tuple(variables), records, enums)


def _dwarf_events(btf: BTF | None) -> tuple[BTF | None, list[Struct]]:
    """(the BTF split on top of the object's that DWARF types are added to, the event structs
    (named as _EVENT_NAME says) BTF lacks and DWARF has), or (None, []) when there are none.
    DWARF is read only when ``.debug_str`` holds such a name that BTF has no struct of
    (bpfkit.btf.dwarf: tens of ms)."""
    dwarf = dwarf_types(btf)
    if btf is None or dwarf is None:
        return None, []
    missing = [n for n in dwarf.may_name(_EVENT_NAME) if not any(isinstance(t, Struct) for t in btf.find(n))]
    found: list[Struct] = []
    for name in missing:
        try:
            found.append(dwarf.struct(name))
        except BPFKitError:
            continue  # the name was a variable's or member's, or DWARF cannot be read: no record
    return (dwarf.btf, found) if found else (None, [])


# --------------------------------------------------------------------------- the module
def _check_class_name(cls: str, plan: SkeletonPlan) -> None:
    if not cls.isidentifier() or keyword.iskeyword(cls):
        raise UsageError(f"skeleton class name {cls!r} is not a Python identifier")
    if _nfkc(cls) != cls:
        raise UsageError(f"skeleton class name {cls!r} is not what Python reads: it normalises identifiers "
                         f"(NFKC) to {_nfkc(cls)!r}; choose another with --name")
    if cls in {r.cls for r in plan.records} | {e.cls for e in plan.enums} | _BUILTINS | _MODULE_NAMES:
        raise UsageError(f"skeleton class name {cls!r} is also the name of a struct or enum of the object, "
                         "a builtin or a name the module imports: choose another with --name")


def _docstring(text: str) -> str:
    """``text`` as a docstring: its ``repr()`` (an object's three double quotes cannot end a
    literal written so), lone surrogates (a file name's undecodable bytes) escaped first:
    type() keeps a class's docstring as UTF-8 and refuses them."""
    return repr(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _undeclared(what: str, names: tuple[str, ...]) -> list[str]:
    return [f"    # {what} not declared (getattr() reads them): {', '.join(map(repr, names))}"] if names else []


def generate(spec: CollectionSpec, class_name: str | None = None, *, object_path: str = "",
             command: str = "") -> str:
    """Python source of a typed skeleton module for ``spec``: Record subclasses, IntEnums and a
    :class:`bpfkit.skeleton.Skeleton` subclass named ``class_name``. ``object_path``: where
    ``open()`` finds the object, relative to the module's directory (or absolute); ``command``:
    the command line that regenerates it, quoted in the header (its ``repr()`` unless every
    character of it is printable: a line break would end the comment)."""
    plan = skeleton_plan(spec)
    cls = class_name or class_name_for(spec.name)
    _check_class_name(cls, plan)
    obj = f"{spec.name}.bpf.o"
    out: list[str] = [
        '"""Typed skeleton: generated by `bpfkit gen skeleton`; do not edit.',
        "",
        f"    with {cls}.open() as skel:       # the object as a spec: set const volatile knobs now",
        "        skel.load()                   # maps, then programs",
        "        skel.attach()                 # every program whose section names a target",
        '"""',
    ]
    if command:
        out.append(f"# Regenerate: {command if command.isprintable() else repr(command)}")
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
        out += ["", ""] + ([f"# {e.note}"] if e.note else [])
        out += [f"class {e.cls}(_enum.IntEnum):", f"    {_docstring(f'enum {e.name}')}", ""]
        out += _undeclared("members", e.hidden)
        out += [f"    {n} = {v}" + (f"  # {note}" if note else "") for n, v, note in e.members] or ["    pass"]
    for r in plan.records:
        kind = "union" if r.union else "struct"
        out += ["", ""] + ([f"# {r.note}"] if r.note else [])
        out += [f"class {r.cls}(_Record):", f"    {_docstring(f'{kind} {r.name} ({r.size} bytes)')}", ""]
        out += _undeclared("fields", r.hidden)
        out += [f"    {f}: {a}" for f, a in r.fields] or ["    pass"]
    out += ["", "", f"class {cls}(_skel.Skeleton):",
            f"    {_docstring(f'Programs, maps and global variables of {obj}.')}", "",
            f"    OBJECT: _ClassVar[str] = {object_path or obj!r}",
            "    RECORDS: _ClassVar[dict[str, type[_Record]]] = {" +
            ", ".join(f"{r.name!r}: {r.cls}" for r in plan.records) + "}"]
    if plan.programs:
        out += ["", "    # programs"]
        out += [f"    {a.attr}: _skel.ProgramAttr = _skel.ProgramAttr({a.name!r})  # {a.comment}"
                for a in plan.programs]
        # Twins (bpfkit.spec.twins): load() takes the pair as alternatives, attach() one of them.
        out += [f"    # twins on {t.hook}: load() keeps {t.preferred!r}, else {t.fallback!r}"
                for t in find_twins({n: p.section for n, p in spec.programs.items()}) if t.hook.isprintable()]
    if plan.maps:
        out += ["", "    # maps"]
        out += [f"    {a.attr}: _skel.MapAttr[{a.key}, {a.value}] = _skel.MapAttr({a.name!r}, {a.size})  # {a.comment}"
                for a in plan.maps]
    if plan.variables:
        out += ["", "    # variables (const: set before load(); the others read and write after load too)"]
        out += [f"    {a.attr}: _skel.Variable[{a.value}] = _skel.Variable({a.name!r}, {a.size}, const={a.const})"
                f"  # {a.comment}" for a in plan.variables]
    return "\n".join(out) + "\n"
