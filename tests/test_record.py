# SPDX-License-Identifier: Apache-2.0
"""bpfkit._record: the records that replace dataclasses on the start-up path behave as the
dataclasses they replaced (repr, equality, hashing, frozen fields), and the public dataclasses
that inherit their __repr__ and __eq__ (DataRepr, DataRecord) print and compare as the
dataclasses they were."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from bpfkit._record import FrozenRecord, SlottedRecord
from bpfkit.btf.core import Accessor, AccessSpec, CoreResolution, ReloKind, Result
from bpfkit.btf.ext import CORERelo
from bpfkit.btf.spec import BTF
from bpfkit.elf.reader import Note, Relocation, Segment, Symbol
from bpfkit.spec import CollectionSpec, MapSpec, ProgramSpec, VariableSpec
from bpfkit.spec.consts import MapType, ProgType
from bpfkit.spec.externs import ExternKind, ExternSpec


@dataclasses.dataclass(slots=True)
class _Point:
    x: int
    y: str = "a"


class Point(SlottedRecord):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: str = "a") -> None:
        self.x = x
        self.y = y


@dataclasses.dataclass(slots=True, frozen=True)
class _Pair:
    a: int
    b: bytes


class Pair(FrozenRecord):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: bytes) -> None:
        self._set_fields(a, b)


def test_a_record_is_its_dataclass() -> None:
    assert repr(Point(1, "b")) == repr(_Point(1, "b")).replace("_Point", "Point") == "Point(x=1, y='b')"
    assert Point(1) == Point(1, "a") and Point(1) != Point(2) and Point(1) != _Point(1)
    with pytest.raises(TypeError, match="unhashable"):
        hash(Point(1))
    p = Point(1)
    p.y = "c"
    assert p.y == "c"
    with pytest.raises(AttributeError):
        p.z = 1  # type: ignore[attr-defined]  # slotted, as slots=True


def test_a_frozen_record_is_its_dataclass() -> None:
    assert repr(Pair(1, b"x")) == repr(_Pair(1, b"x")).replace("_Pair", "Pair")
    assert Pair(1, b"x") == Pair(1, b"x") and hash(Pair(1, b"x")) == hash(_Pair(1, b"x")) == hash((1, b"x"))
    assert len({Pair(1, b"x"), Pair(1, b"x"), Pair(2, b"x")}) == 2
    with pytest.raises(AttributeError, match="cannot assign to field 'a'"):
        Pair(1, b"x").a = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'b'"):
        del Pair(1, b"x").b  # type: ignore[misc]
    with pytest.raises(ValueError):
        Pair._set_fields(Pair.__new__(Pair), 1)  # every field, no fewer


def test_the_elf_records() -> None:
    sym = Symbol(3, "memcpy", 16, 8, 1, 2, 0, 5, version="GLIBC_2.14")
    assert sym == Symbol(3, "memcpy", 16, 8, 1, 2, 0, 5, ".symtab", "GLIBC_2.14", False) and sym.full_name == "memcpy@@GLIBC_2.14"
    assert repr(Relocation(8, 1, sym)).startswith("Relocation(offset=8, type=1, symbol=Symbol(index=3, name='memcpy'")
    assert hash(Segment(1, 5, 0, 0x1000, 10, 20)) == hash(Segment(1, 5, 0, 0x1000, 10, 20))
    assert Segment(1, 5, 0, 0, 1, 1).executable and Note(b"GNU", 3, b"id", 0).desc == b"id"


def test_a_frozen_record_copies_and_pickles() -> None:
    """As a frozen dataclass does: copy, deepcopy and pickle go past the frozen __setattr__
    (dataclasses.asdict of a ProgramSpec deep-copies its CORERelo and Reference records)."""
    p = Pair(1, b"x")
    for twin in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert twin == p and twin is not p and hash(twin) == hash(p)
    q = Point(1, "b")
    assert copy.deepcopy(q) == q and pickle.loads(pickle.dumps(q)) == q


def _compares_by_value(cls: type) -> bool:
    return cls.__eq__ is not object.__eq__


def _as_generated(cls: type) -> type:
    """``cls`` made again as a plain ``@dataclass`` (generated methods) from its own fields:
    what the class was before its methods were written once."""
    ns: dict[str, object] = {"__annotations__": {f.name: f.type for f in dataclasses.fields(cls)},
                             "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    for f in dataclasses.fields(cls):
        ns[f.name] = dataclasses.field(default=f.default, default_factory=f.default_factory,  # type: ignore[call-overload]
                                       repr=f.repr, compare=f.compare)
    return dataclasses.dataclass(eq=_compares_by_value(cls))(type(cls.__name__, (), ns))


def _examples() -> list[tuple[type, dict[str, object], dict[str, object], dict[str, object]]]:
    """(class, fields of an example, a field that compares changed, a field that does not)."""
    btf = BTF()
    spec = AccessSpec(btf, 1, ReloKind.FIELD_BYTE_OFFSET, [Accessor(1, 0, "a")], [0, 1], 8)
    relo = CORERelo(0, 1, "0:1", ReloKind.FIELD_BYTE_OFFSET)
    return [
        (MapSpec, dict(name="counts", type=MapType.HASH, key_size=4, value_size=8, max_entries=64, contents=[(1, 2)], btf=btf),
         dict(max_entries=65), dict(btf=None)),
        (ProgramSpec, dict(name="p", type=ProgType.KPROBE, instructions=b"\x95" + bytes(7), section="kprobe/x", func_info=b"f"),
         dict(section="kprobe/y"), {}),
        (Accessor, dict(type_id=3, idx=1, name="pid"), dict(idx=2), {}),
        (AccessSpec, dict(btf=btf, root_id=1, kind=ReloKind.FIELD_EXISTS, accessors=[Accessor(1, 0, None)], raw=[0]), dict(raw=[1]), {}),
        (Result, dict(orig=8, new=16, validate=False), dict(poison=True), {}),
        (CoreResolution, dict(program="p", insn=3, index=0, relo=relo, local=spec, target=None, result=Result(), why="none"),
         dict(insn=4), {}),
        (ExternSpec, dict(name="LINUX_KERNEL_VERSION", kind=ExternKind.KCONFIG, weak=True, btf_id=7, size=4),
         dict(weak=False), {}),
        (VariableSpec, dict(name="knob", section=".rodata", offset=0, size=4, btf=btf), {}, {}),
        (CollectionSpec, dict(name="minimal", license="GPL", btf=btf, maps={"m": MapSpec("m", MapType.ARRAY)}), {}, {}),
    ]


@pytest.mark.parametrize("example", _examples(), ids=lambda e: e[0].__name__ if isinstance(e, tuple) else "")
def test_a_dataclass_with_written_methods_prints_and_compares_as_a_generated_one(
        example: tuple[type, dict[str, object], dict[str, object], dict[str, object]]) -> None:
    cls, values, changed, ignored = example
    generated = _as_generated(cls)
    ours, theirs = cls(**values), generated(**values)
    assert repr(ours) == repr(theirs)
    assert dataclasses.is_dataclass(ours) and repr(dataclasses.replace(ours)) == repr(ours)
    if _compares_by_value(cls):
        assert ours == cls(**values) and theirs == generated(**values)
        assert (ours == cls(**{**values, **changed})) is (theirs == generated(**{**values, **changed})) is False
        assert (ours == cls(**{**values, **ignored})) is (theirs == generated(**{**values, **ignored})) is True
        assert ours != theirs and ours.__eq__(theirs) is NotImplemented  # another class, as generated
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours)
    else:  # declared eq=False: compared and hashed by identity, as before
        assert ours != cls(**values) and ours == ours
        assert {ours: 1}[ours] == 1


def test_a_data_repr_inside_itself_prints_dots() -> None:
    """As reprlib.recursive_repr (the generated __repr__'s guard): no RecursionError."""
    spec = MapSpec("outer", MapType.ARRAY_OF_MAPS)
    spec.contents.append((0, spec))
    generated = _as_generated(MapSpec)("outer", MapType.ARRAY_OF_MAPS)
    generated.contents.append((0, generated))
    assert repr(spec) == repr(generated) and "contents=[(0, ...)]" in repr(spec)


@pytest.mark.parametrize("cls", [MapSpec, ProgramSpec, VariableSpec, CollectionSpec, ExternSpec], ids=lambda c: c.__name__)
def test_a_record_dataclass_initialises_as_a_generated_one(cls: type) -> None:
    """record_dataclass's __init__ (written once, not generated): the same signature, fields,
    default factories (a new list each time) and TypeErrors as the generated __init__."""
    generated = _as_generated(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(generated))
    fields = dataclasses.fields(cls)
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    args = [f"value-{i}" for i in range(len(required))]
    ours, theirs = cls(*args), generated(*args)
    assert vars(ours) == vars(theirs)
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            assert getattr(ours, f.name) is not getattr(cls(*args), f.name)
    by_name = dict(zip(required, args))
    assert vars(cls(**by_name)) == vars(ours)
    too_many = [0] * (len(fields) + 1)
    wrong = [((), {}), (args[:-1], {})] if required else []
    wrong += [(too_many, {}), (args or ["x"], {fields[0].name: 1}),
             (args, {"no_such_field": 1})]
    for call_args, call_kwargs in wrong:
        with pytest.raises(TypeError) as expected:
            generated(*call_args, **call_kwargs)
        with pytest.raises(TypeError) as got:
            cls(*call_args, **call_kwargs)
        assert str(got.value) == str(expected.value).replace("__create_fn__.<locals>.", f"{cls.__qualname__}.")
