# SPDX-License-Identifier: Apache-2.0
"""Skeletons: one object's programs, maps and global variables as attributes, with libbpf's
open -> load -> attach -> close lifecycle (docs/skeleton.md).

    skel = Syscount.open()          # a generated class (bpfkit gen skeleton), or bpfkit.open(path)
    skel.targ_pid = 1234            # const volatile: before load, in the spec's .rodata
    skel.load()                     # maps, then programs (bpfkit.Collection); of twins, one
    skel.attach()                   # every program whose section names a target
    skel.counts.items()             # Map[int, data_t]: typed through the object's BTF
    skel.total_calls                # a .bss global, read from the mmap'ed data map
    skel.close()                    # or `with`: links, programs, maps

Generated modules declare the attributes with :class:`ProgramAttr`, :class:`MapAttr` and
:class:`Variable` (typed: mypy sees ``Map[int, data_t]``, ``int``); :func:`open` builds the
same class at run time from the same plan (bpfkit.skelgen).

Twins (bpfkit.spec.twins: a tp_btf and a raw_tp program on one tracepoint, fentry and kprobe,
fexit and kretprobe on one function) load as a group of alternatives by default: the BTF one,
or its twin when the kernel refuses it, as runqlat.c chooses with probe_tp_btf().
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast, overload

from ._closing import ClosesOnExit
from ._kernel.ring import RingMapping
from .attach import AttachedLinks
from .btf.dwarf import find_struct
from .btf.records import RecordDecoder
from .btf.types import Kind
from .btf.values import Record, ValueCodec, value_codec
from .collection import Collection
from .errors import BPFKitError, UsageError
from .link.perf_event import AttachMode
from .maps import Map
from .program import LoadOptions, Program
from .skelgen import Attr, class_name_for, skeleton_plan
from .spec.collection import CollectionSpec, VariableSpec
from .spec.load import load_spec
from .spec.twins import find_twins, load_selection

if TYPE_CHECKING:
    from typing import Self

__all__ = ["Skeleton", "DynamicSkeleton", "ProgramAttr", "MapAttr", "Variable", "Programs", "open", "dynamic_class"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
R = TypeVar("R", bound=Record)

# What load(programs=...) takes: names, and groups of alternatives (a tuple of names, first preferred).
Programs = Iterable[str | Sequence[str]]


class ProgramAttr:
    """A program of the object: its :class:`bpfkit.Program` once loaded."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type[Skeleton]) -> ProgramAttr: ...
    @overload
    def __get__(self, obj: Skeleton, owner: type[Skeleton]) -> Program: ...
    def __get__(self, obj: Skeleton | None, owner: type[Skeleton]) -> ProgramAttr | Program:
        if obj is None:
            return self
        coll = obj._loaded(f"program {self.name!r}")
        programs = coll.programs
        if self.name not in programs:
            refused = coll.not_loaded.get(self.name)
            twin = next((t for t in find_twins({n: p.section for n, p in obj.spec.programs.items()})
                         if self.name in t.names), None)
            raise UsageError(f"program {self.name!r} of {obj.spec.name}.bpf.o was not loaded " + (
                f"(the kernel refused it and loaded an alternative: {refused})" if refused else
                f"(load() keeps one of twins: {twin.note(twin.preferred if self.name == twin.fallback else twin.fallback)})"
                if twin is not None else f"(load(programs=...) chose {', '.join(programs) or 'none'})"))
        return programs[self.name]


class MapAttr(Generic[K, V]):
    """A map of the object: its :class:`bpfkit.Map` (keys ``K``, values ``V``) once loaded.
    ``value_size`` is the size the generator saw, checked against the object at open."""

    def __init__(self, name: str, value_size: int = -1) -> None:
        self.name = name
        self.value_size = value_size

    @overload
    def __get__(self, obj: None, owner: type[Skeleton]) -> MapAttr[K, V]: ...
    @overload
    def __get__(self, obj: Skeleton, owner: type[Skeleton]) -> Map[K, V]: ...
    def __get__(self, obj: Skeleton | None, owner: type[Skeleton]) -> MapAttr[K, V] | Map[K, V]:
        if obj is None:
            return self
        return cast("Map[K, V]", obj._loaded(f"map {self.name!r}").maps[self.name])


class Variable(Generic[T]):
    """A global variable: before load, its initial value in the spec (where ``const volatile``
    knobs are set); after load, its value in the data section's map (read through an mmap of
    the map, as libbpf's skeletons; written too unless the variable is constant)."""

    def __init__(self, name: str, size: int = -1, *, const: bool = False) -> None:
        self.name = name
        self.size = size
        self.const = const

    @overload
    def __get__(self, obj: None, owner: type[Skeleton]) -> Variable[T]: ...
    @overload
    def __get__(self, obj: Skeleton, owner: type[Skeleton]) -> T: ...
    def __get__(self, obj: Skeleton | None, owner: type[Skeleton]) -> Variable[T] | T:
        if obj is None:
            return self
        return cast("T", obj._read_variable(self.name))

    def __set__(self, obj: Skeleton, value: T) -> None:
        obj._write_variable(self.name, value)


_DESCRIPTORS = (ProgramAttr, MapAttr, Variable)
_INSTANCE = frozenset({"spec", "collection", "links", "object_path"})


class Skeleton(ClosesOnExit):
    """Base of generated skeleton classes (and of :func:`open`'s). ``OBJECT``: where
    :meth:`open` finds the object, relative to the generated module's directory;
    ``RECORDS``: the Record subclasses structs decode into, by struct name."""

    OBJECT: ClassVar[str] = ""
    RECORDS: ClassVar[dict[str, type[Record]]] = {}

    def __init__(self, spec: CollectionSpec, object_path: str = "") -> None:
        self.spec = spec
        self.object_path = object_path
        self.collection: Collection | None = None
        self.links: AttachedLinks | None = None
        self._codecs: dict[str, ValueCodec] = {}
        self._views: dict[str, RingMapping | None] = {}
        self._check()

    # ----------------------------------------------------------------------- lifecycle
    @classmethod
    def default_object(cls) -> str:
        """``OBJECT`` resolved against the directory of the module that defines the class."""
        module = sys.modules.get(cls.__module__)
        base = Path(getattr(module, "__file__", None) or ".").resolve().parent
        return str(base / cls.OBJECT)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Self:
        """The object parsed into a spec (no syscalls): set ``const volatile`` knobs, then
        :meth:`load`. ``path`` defaults to :meth:`default_object`."""
        where = os.fspath(path) if path is not None else cls.default_object()
        return cls(load_spec(where), where)

    @classmethod
    def open_and_load(cls, path: str | os.PathLike[str] | None = None, *, programs: Programs | None = None,
                      pin_dir: str | os.PathLike[str] | None = None, options: LoadOptions | None = None) -> Self:
        """:meth:`open` then :meth:`load` (closed again when loading fails)."""
        skel = cls.open(path)
        try:
            skel.load(programs=programs, pin_dir=pin_dir, options=options)
        except BaseException:
            skel.close()
            raise
        return skel

    def load(self, *, programs: Programs | None = None, pin_dir: str | os.PathLike[str] | None = None,
             options: LoadOptions | None = None) -> Self:
        """Create the maps and load the programs; the spec's variables are the data sections'
        initial contents. ``programs``: only these (as libbpf's autoload), each a name or a
        group of alternatives (a tuple of names: the first the kernel loads is kept, as
        :class:`bpfkit.Collection`). By default every program, twins as groups (BTF one first)."""
        if self.collection is not None:
            raise UsageError(f"{type(self).__name__}: already loaded")
        if programs is None:
            programs = load_selection(self.spec)
        self.collection = Collection(self.spec, programs=programs, pin_dir=pin_dir, options=options)
        for m in self.collection.maps.values():
            m.use_records(self.RECORDS)  # structs decode into the generated classes
        return self

    def attach(self, *, programs: Iterable[str] | None = None, pid: int | None = None,
               mode: AttachMode | str = AttachMode.AUTO) -> AttachedLinks:
        """Attach every loaded program whose section names a target (``programs``: these
        only; without it, of two twins loaded, one: :func:`bpfkit.attach.attach_all`); the
        links are closed by :meth:`detach` and :meth:`close`."""
        coll = self._loaded("attach")
        links = coll.attach_all(mode=mode, pid=pid, programs=programs)
        if self.links is None:
            self.links = links
        else:
            self.links.links.update(links.links)
            self.links.skipped.update(links.skipped)
        return links

    def detach(self) -> None:
        links, self.links = self.links, None
        if links is not None:
            links.close()

    def close(self) -> None:
        """Detach, unmap the data sections, close programs and maps. Idempotent."""
        try:
            self.detach()
        finally:
            for view in self._views.values():
                if view is not None:
                    view.close()
            self._views.clear()
            coll, self.collection = self.collection, None
            if coll is not None:
                coll.close()

    @property
    def loaded(self) -> bool:
        return self.collection is not None


    def __repr__(self) -> str:
        state = "attached" if self.links is not None else "loaded" if self.collection is not None else "open"
        return f"<{type(self).__name__} {self.spec.name}.bpf.o {state}>"

    # -------------------------------------------------------------------------- records
    def decode(self, record: type[R], data: bytes | bytearray | memoryview) -> R:
        """``data`` (a ring buffer record, a map value's bytes) as the struct ``record`` was
        generated for: ``skel.decode(event, raw)``. A record shorter than the struct (execsnoop
        sends its event cut where ``args`` ends) holds the fields before its end, the others
        None (bpfkit.btf.records); a struct BTF lacks is read from the object's DWARF."""
        names = [n for n, c in self.RECORDS.items() if c is record]
        if not names or self.spec.btf is None:
            raise UsageError(f"{record.__name__} is not a struct of {self.spec.name}.bpf.o")
        codec = self._codecs.get(f"struct {names[0]}")
        if codec is None:
            found = [t for t in self.spec.btf.find(names[0]) if t.kind in (Kind.STRUCT, Kind.UNION)]
            if found:
                codec = self._codecs[f"struct {names[0]}"] = value_codec(self.spec.btf, found[0].id, records=self.RECORDS)
        if codec is not None and len(data) >= codec.size:
            return cast("R", codec.decode(data))
        btf, struct_type = find_struct(self.spec.btf, names[0], f"{self.spec.name}.bpf.o: struct")
        return cast("R", RecordDecoder(btf, struct_type, records=self.RECORDS).decode(data))

    # ------------------------------------------------------------------------ internals
    def _loaded(self, what: str) -> Collection:
        if self.collection is None:
            raise UsageError(f"{what}: {type(self).__name__} is not loaded (call load() first)")
        return self.collection

    @classmethod
    def _declared(cls) -> dict[str, ProgramAttr | MapAttr[Any, Any] | Variable[Any]]:
        found: dict[str, ProgramAttr | MapAttr[Any, Any] | Variable[Any]] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, _DESCRIPTORS):
                    found[attr] = value
        return found

    def _check(self) -> None:
        """The object must have what the class was generated from, of the same sizes."""
        spec = self.spec
        for attr, d in self._declared().items():
            if isinstance(d, ProgramAttr):
                problem = "" if d.name in spec.programs else "no program"
            elif isinstance(d, MapAttr):
                m = spec.maps.get(d.name)
                problem = "no map" if m is None else \
                    f"a {m.value_size}-byte value, not {d.value_size}" if d.value_size >= 0 and m.value_size != d.value_size else ""
            else:
                v = spec.variables.get(d.name)
                problem = "no variable" if v is None else \
                    f"{v.size} bytes, not {d.size}" if d.size >= 0 and v.size != d.size else ""
            if problem:
                raise UsageError(f"{type(self).__name__}.{attr}: {self.object_path or spec.name} has {problem} "
                                 f"{d.name!r}: the skeleton was generated from another object; regenerate it "
                                 f"(bpfkit gen skeleton {self.object_path or 'OBJ'})")

    def _variable(self, name: str) -> tuple[VariableSpec, ValueCodec]:
        var = self.spec.variables[name]
        codec = self._codecs.get(name)
        if codec is None:
            if var.btf is None or not var.type_id:
                raise UsageError(f"variable {name!r} has no BTF type (compile with -g)")
            codec = self._codecs[name] = value_codec(var.btf, var.type_id, records=self.RECORDS, name=name)
        return var, codec

    def _view(self, var: VariableSpec) -> RingMapping | None:
        """An mmap of the variable's data map (BPF_F_MMAPABLE, 5.5), read-only for constants;
        None when the map cannot be mapped (then reads and writes go through lookup/update)."""
        if var.section not in self._views:
            m = self._loaded(f"variable {var.name!r}").maps[var.section]
            try:
                self._views[var.section] = RingMapping(m.fd, m.value_size, 0, not var.constant,
                                                       f"data section {var.section}")
            except BPFKitError:
                self._views[var.section] = None
        return self._views[var.section]

    def _read_variable(self, name: str) -> object:
        var, codec = self._variable(name)
        if self.collection is None:
            return codec.decode(var.raw)
        view = self._view(var)
        if view is not None:
            return codec.decode(view.view[var.offset:var.offset + var.size])
        raw: bytes = self.collection.maps[var.section][0]  # data sections stay bytes
        return codec.decode(raw[var.offset:var.offset + var.size])

    def _write_variable(self, name: str, value: object) -> None:
        var, codec = self._variable(name)
        try:
            raw = codec.encode(value)
        except BPFKitError as exc:
            raise exc.wrap(f"set variable {name!r}")
        if self.collection is None:
            var.set(raw)
            return
        if var.constant:
            raise UsageError(f"variable {name!r} is constant ({var.section}, frozen at load): set it before load()")
        view = self._view(var)
        if view is not None:
            view.view[var.offset:var.offset + var.size] = raw
            return
        m = self.collection.maps[var.section]  # no mmap: a read-modify-write of the whole section
        data = bytearray(m[0])
        data[var.offset:var.offset + var.size] = raw
        m.update(0, bytes(data))

    def __setattr__(self, name: str, value: object) -> None:
        if name.startswith("_") or name in _INSTANCE or hasattr(type(self), name):
            object.__setattr__(self, name, value)
            return
        have = [a for a, d in self._declared().items() if isinstance(d, Variable)]
        raise AttributeError(f"{type(self).__name__} has no variable {name!r} "
                             f"(its variables: {', '.join(have) or 'none'})")


class DynamicSkeleton(Skeleton):
    """What :func:`open` returns: a skeleton class made at run time from the object."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):
            raise AttributeError(name)
        have = ", ".join(self._declared())
        raise AttributeError(f"{self.spec.name}.bpf.o has no program, map or variable {name!r} (it has: {have})")


def _descriptor(a: Attr) -> ProgramAttr | MapAttr[Any, Any] | Variable[Any]:
    if a.kind == "program":
        return ProgramAttr(a.name)
    if a.kind == "map":
        return MapAttr(a.name, a.size)
    return Variable(a.name, a.size, const=a.const)


def open(path: str | os.PathLike[str]) -> DynamicSkeleton:  # bpfkit.open, as libbpf's bpf_object__open
    """The object at ``path`` as a skeleton, its names made at run time: the attributes a
    generated skeleton would have (``skel.counts``, ``skel.targ_pid``, ``skel.sys_enter``),
    structs decoding into Record classes named after them. Untyped for mypy: generate a
    module with ``bpfkit gen skeleton`` for that."""
    where = os.fspath(path)
    spec = load_spec(where)
    return dynamic_class(spec, where)(spec, where)


def dynamic_class(spec: CollectionSpec, where: str) -> type[DynamicSkeleton]:
    """The class :func:`open` makes for ``spec`` (the object at ``where``): the generated
    module's names (bpfkit.skelgen's plan: NFKC-normalised, none of Skeleton's own)."""
    plan = skeleton_plan(spec)
    records: dict[str, type[Record]] = {r.name: type(r.cls, (Record,), {"__module__": __name__}) for r in plan.records}
    namespace: dict[str, object] = {a.attr: _descriptor(a) for a in plan.attrs}
    namespace.update(OBJECT=where, RECORDS=records, __module__=__name__)
    return type(class_name_for(spec.name), (DynamicSkeleton,), namespace)
