# SPDX-License-Identifier: Apache-2.0
"""bpfkit._record: the records that replace dataclasses on the start-up path behave as the
dataclasses they replaced (repr, equality, hashing, frozen fields)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from bpfkit._record import FrozenRecord, Record
from bpfkit.elf.reader import Note, Relocation, Segment, Symbol


@dataclasses.dataclass(slots=True)
class _Point:
    x: int
    y: str = "a"


class Point(Record):
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
