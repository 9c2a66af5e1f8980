# SPDX-License-Identifier: Apache-2.0
"""CollectionSpec: everything in one object file, before it meets the kernel, and VariableSpec,
one global variable of it (the spec layer: no syscalls). bpfkit.collection.Collection loads one.
"""

from __future__ import annotations

import dataclasses
import os

from .._record import record_dataclass
from ..btf import BTF
from ..btf.types import Enum, Int, IntEncoding, Pointer
from ..errors import UsageError
from .maps import MapSpec
from .programs import ProgramSpec

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from ..btf.core import CoreResolution
    from ..btf.values import ValueCodec
    from .externs import ExternSpec

__all__ = ["CollectionSpec", "VariableSpec"]


@record_dataclass(eq=False)  # a dataclass whose methods are not generated: see bpfkit._record
class VariableSpec:
    """A global variable in a data section (.data, .rodata, .bss, .data.*, ...).

    ``value`` reads and writes the bytes the data map will be created with, so a
    ``const volatile`` knob in .rodata is set here, before loading. Integers (and enums,
    pointers, bools) read as ``int``; anything else as ``bytes``. ``raw`` is always bytes.
    """

    name: str
    section: str  # the data section, also the key of its map in CollectionSpec.maps
    offset: int
    size: int
    type_id: int = 0  # in the collection's BTF (0 when the object has none)
    btf: BTF | None = dataclasses.field(default=None, repr=False)
    map_spec: MapSpec | None = dataclasses.field(default=None, repr=False)
    static: bool = False  # a ``static`` variable (libbpf hides these from skeletons)

    @property
    def type_name(self) -> str:
        return self.btf.type_name(self.type_id) if self.btf is not None and self.type_id else ""

    @property
    def constant(self) -> bool:
        """True for variables in a read-only section (set them before loading only)."""
        return self.section.startswith(".rodata")

    def _scalar(self) -> tuple[bool, bool]:
        """(is an integer-like type, is signed)."""
        if self.btf is None or not self.type_id:
            return self.size in (1, 2, 4, 8), False
        t = self.btf.resolve(self.type_id)
        if isinstance(t, Int):
            return t.size in (1, 2, 4, 8), t.signed
        if isinstance(t, Enum):
            return t.size in (1, 2, 4, 8), t.signed
        if isinstance(t, Pointer):
            return True, False
        return False, False

    @property
    def raw(self) -> bytes:
        data = self._data()
        return bytes(data[self.offset : self.offset + self.size])

    @property
    def value(self) -> Any:
        raw = self.raw
        scalar, signed = self._scalar()
        if scalar:
            return int.from_bytes(raw, "little", signed=signed)
        return raw

    @value.setter
    def value(self, new: object) -> None:
        self.set(new)

    @property
    def codec(self) -> ValueCodec | None:
        """The variable's type as a :class:`bpfkit.btf.values.ValueCodec` (None without BTF)."""
        if self.btf is None or not self.type_id or self.btf.size_of(self.type_id) != self.size:
            return None  # no BTF, or an array resized (bpfkit.spec.resize): its bytes, as raw
        from ..btf.values import value_codec

        return value_codec(self.btf, self.type_id, name=self.name)

    @property
    def typed(self) -> object:
        """The initial value decoded through BTF (a str for char arrays, an enum member, a
        Record for a struct ...); :attr:`value` without BTF."""
        codec = self.codec
        return codec.decode(self.raw) if codec is not None else self.value

    def set_text(self, text: str) -> None:
        """Set from a command-line word, typed through BTF (``bpfkit load/attach --set``):
        decimal, 0x and negative integers, true/false, enum member names, strings for char
        arrays; BTFValueError naming the variable, its type and range otherwise. An integer
        word for an integer, enum or pointer variable is taken as :meth:`set` takes an int
        (a negative one for an unsigned type as two's complement), with the same refusal."""
        codec = self.codec
        if codec is None:
            try:
                self.set(int(text, 0))
            except ValueError:
                raise UsageError(f"variable {self.name!r} has no BTF type: {text!r} is not an integer") from None
            return
        number = self._integer_word(text)
        if number is not None:
            self.set(number)  # the API's rule for an int, negatives for unsigned types included
            return
        self.set(codec.encode(codec.from_text(text)))

    def _integer_word(self, text: str) -> int | None:
        """``text`` as an int when this is an integer, enum or pointer variable (not a bool:
        true/false/1/0 only) and the word is an integer; None otherwise (the codec judges it)."""
        assert self.btf is not None
        scalar, _ = self._scalar()
        t = self.btf.resolve(self.type_id)
        if not scalar or (isinstance(t, Int) and t.encoding & IntEncoding.BOOL):
            return None
        try:
            return int(text.strip().replace("_", ""), 0)
        except ValueError:
            return None  # "010", names, digits past int()'s limit: the codec's word and message

    def set(self, new: object) -> None:
        """Write ``new`` as the initial value: an int or bool (wrapped to ``size`` bytes),
        bytes of exactly ``size``, or with BTF any value its type encodes (a str for a char
        array, an enum member name, a dict for a struct: bpfkit.btf.values); an int for a
        float, struct or array goes through BTF too (the number, not its bytes)."""
        codec = self.codec
        if codec is not None and not isinstance(new, (bytes, bytearray, memoryview)) and not (
                isinstance(new, int) and self._scalar()[0]):
            try:
                new = codec.encode(new)
            except UsageError as exc:
                raise exc.wrap(f"cannot set variable {self.name!r}")
        if isinstance(new, bool):
            new = int(new)
        if isinstance(new, int):
            scalar, signed = self._scalar()
            try:
                # A negative int for an unsigned type is its two's complement (-1 for a u32 is
                # 0xffffffff), as C's conversion: [-2**(8n-1), 2**(8n)-1] fits n unsigned bytes.
                raw = new.to_bytes(self.size, "little", signed=signed or new < 0)
            except OverflowError:
                from ..btf.values import _fail  # 5,000 digits are not shown: by their size

                bits = 8 * self.size
                top = (1 << (bits - 1 if signed else bits)) - 1
                what = f"{self.type_name or f'{self.size} bytes'} (an integer in [{-(1 << (bits - 1))}, {top}]"
                what += ")" if signed or not scalar else "; a negative one as two's complement)"
                raise _fail(self.name, what, new, "out of range") from None
        elif isinstance(new, (bytes, bytearray, memoryview)):
            raw = bytes(new)
            if len(raw) != self.size:
                raise UsageError(f"variable {self.name!r} is {self.size} bytes, got {len(raw)}")
        else:
            raise UsageError(f"variable {self.name!r}: cannot set to {type(new).__name__} (give int or bytes; "
                             "it has no BTF type to encode other values)")
        data = bytearray(self._data())
        data[self.offset : self.offset + self.size] = raw
        assert self.map_spec is not None
        self.map_spec.data = bytes(data)

    def get(self) -> Any:
        return self.value

    def _data(self) -> bytes:
        if self.map_spec is None or self.map_spec.data is None:
            raise UsageError(f"variable {self.name!r} has no backing data section")
        return self.map_spec.data


@record_dataclass(eq=False)  # a dataclass whose methods are not generated: see bpfkit._record
class CollectionSpec:
    """Everything in one object file, before it meets the kernel. Edit freely."""

    programs: dict[str, ProgramSpec] = dataclasses.field(default_factory=dict)
    maps: dict[str, MapSpec] = dataclasses.field(default_factory=dict)
    variables: dict[str, VariableSpec] = dataclasses.field(default_factory=dict)
    license: str = ""
    kernel_version: int = 0  # from the "version" section; 0 when absent
    btf: BTF | None = dataclasses.field(default=None, repr=False)
    name: str = ""  # the object's name ("minimal" for minimal.bpf.o)
    # __kconfig/__ksym externs by name (bpfkit.spec.externs.ExternSpec), resolved at load.
    externs: dict[str, ExternSpec] = dataclasses.field(default_factory=dict)

    def resolve_core(self, kernel_btf: BTF | str | os.PathLike[str] | None = None) -> dict[str, list[CoreResolution]]:
        """How every program's CO-RE relocations resolve against ``kernel_btf`` (a BTF or the
        path of a BTF/ELF file) or, when None, the running kernel, without loading:
        {program: [bpfkit.btf.core.CoreResolution]}."""
        if kernel_btf is None:
            # The running kernel's BTF (/sys/kernel/btf) is the kernel side's to read: a lazy
            # import, listed in tests/test_layers.py.
            from ..kernelfit import resolve_core as resolve_on_kernel

            return resolve_on_kernel(self, None)
        from .core import btf_arg, resolve_core

        return resolve_core(self, [btf_arg(kernel_btf)])

    def set_value_size(self, map_name: str, size: int) -> None:
        """Resize global-data section ``map_name`` (``.data.NAME``) to ``size`` bytes, its last
        variable, an array, with it: libbpf's bpf_map__set_value_size on a data map, scx's
        RESIZE_ARRAY (bpfkit.spec.resize)."""
        from .resize import set_value_size

        set_value_size(self, map_name, size)

    def copy(self) -> CollectionSpec:
        maps = {name: m.copy() for name, m in self.maps.items()}
        variables = {
            name: dataclasses.replace(v, map_spec=maps.get(v.section)) for name, v in self.variables.items()
        }
        return CollectionSpec(
            {n: p.copy() for n, p in self.programs.items()}, maps, variables, self.license,
            self.kernel_version, self.btf, self.name, dict(self.externs),
        )
