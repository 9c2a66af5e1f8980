# SPDX-License-Identifier: Apache-2.0
"""Maps: Map (a kernel map owning its fd), made from a MapSpec (plain data, defined in the
spec layer, bpfkit.spec.maps, and re-exported here).

Keys and values are typed through BTF when the map has it (docs/maps.md): a map made from an
object's MapSpec uses the object's BTF, a map opened by id or pin the kernel's copy of it
(fetched on first use). Structs decode to :class:`bpfkit.btf.values.Record`, enums to
``IntEnum``, ``char[]`` to ``str``, arrays to lists; Python values encode back, with
:class:`bpfkit.errors.BTFValueError` naming the field on bad input. Explicit ``key_format`` /
``value_format`` (:mod:`struct` formats) win over BTF. Maps without either take and give bytes
(ints are accepted for 1, 2, 4 and 8-byte keys and values). Per-CPU maps take and return one
value per possible CPU (the kernel lays them out 8-byte aligned, one per possible CPU).
Data-section maps (.data, .bss, .rodata) stay bytes: their variables are typed through
``CollectionSpec.variables``.
"""

from __future__ import annotations

import errno
import re
import struct
from collections.abc import Iterator, Mapping

from ._kernel import bpf as _bpf
from ._kernel import map_elems as _elems
from ._kernel.bpffs import PinnableObject
from ._kernel.consts import BPF_ANY, MapType
from ._kernel.cpus import num_possible_cpus
from ._kernel.fd import FD
from ._kernel.rlimit import bump_memlock
from ._lazy import lazy_getattr
from .btf.types import Datasec
from .errors import BPFKitError, KernelError, NotSupportedError, UsageError, errno_name
from .spec.consts import MapFlag
from .spec.maps import (  # the spec names, re-exported: bpfkit.maps.MapSpec
    PERCPU_TYPES as PERCPU_TYPES,
)
from .spec.maps import (
    SIZE_FIELDS as SIZE_FIELDS,
)
from .spec.maps import (
    MapSpec as MapSpec,
)
from .spec.maps import (
    PinType as PinType,
)
from .spec.maps import (
    zero_size_fields as zero_size_fields,
)
from .spec.maps import (
    zero_size_hint as zero_size_hint,
)

# typing costs ~2 ms to import: Map is generic through types.GenericAlias at run time (Map[K, V]
# subscripts as list[int] does) and typing's names are for the type checker only.
TYPE_CHECKING = False
if not TYPE_CHECKING:  # at run time
    from types import GenericAlias

    from ._no_typing import overload

    class _Generic:
        __slots__ = ()
        __class_getitem__ = classmethod(GenericAlias)


if TYPE_CHECKING:
    from typing import Any, Generic, overload

    from typing_extensions import TypeVar

    from ._kernel.info import MapInfo as MapInfo  # what Map.info() gives: bpfkit.maps.MapInfo
    from .btf import BTF
    from .btf.values import Record, ValueCodec

    K = TypeVar("K", default=Any)  # a bare ``Map`` is Map[Any, Any]
    V = TypeVar("V", default=Any)
    D = TypeVar("D")

    class _Generic(Generic[K, V]):
        pass


_ENOTSUPP = 524  # kernel-internal ENOTSUPP: a map type without the operation

__all__ = ["MapSpec", "Map", "MapInfo", "PinType", "PERCPU_TYPES"]
# MapInfo is bpfkit._kernel.info's, re-exported on first use (as Map.info() imports it): that
# module is ~0.4 ms of every start-up, most of which never ask a map for its info.
__getattr__ = lazy_getattr(__name__, {"MapInfo": "bpfkit._kernel.info"}, globals())

_MAP_IN_MAP = frozenset({MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS})
_FD_VALUE_TYPES = _MAP_IN_MAP | {MapType.PROG_ARRAY, MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY}
# Map types created without key/value BTF, as libbpf does (the kernel rejects or ignores it).
_NO_BTF_TYPES = frozenset({
    MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY, MapType.STACK_TRACE, MapType.ARRAY_OF_MAPS,
    MapType.HASH_OF_MAPS, MapType.DEVMAP, MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.XSKMAP,
    MapType.SOCKMAP, MapType.SOCKHASH, MapType.QUEUE, MapType.STACK, MapType.ARENA,
})
_MAP_NAME_OK = re.compile(r"[A-Za-z0-9_.]*\Z").match
# Every index exists (lookups never miss, deletes are refused): sequences.
_ARRAY_TYPES = frozenset({MapType.ARRAY, MapType.PERCPU_ARRAY})
# Arrays of fds or objects: indices are deleted (emptied), not zeroed.
_FD_ARRAY_TYPES = frozenset({
    MapType.PROG_ARRAY, MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY, MapType.ARRAY_OF_MAPS,
    MapType.DEVMAP, MapType.CPUMAP, MapType.XSKMAP, MapType.SOCKMAP, MapType.REUSEPORT_SOCKARRAY,
})
_QUEUE_TYPES = frozenset({MapType.QUEUE, MapType.STACK})
# No elements user space can enumerate (records, a filter, a struct_ops value, pages, or
# storage keyed by another object's fd).
_NO_ELEMENTS = frozenset({
    MapType.RINGBUF, MapType.USER_RINGBUF, MapType.BLOOM_FILTER, MapType.STRUCT_OPS, MapType.ARENA,
    MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE, MapType.CGRP_STORAGE,
})
# Batch lookups refused by map types without the batch ops (EINVAL) or by kernels before 5.6.
_NO_BATCH = (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, _ENOTSUPP)
# Values user space reads as the ids of programs or maps (map_fd_sys_lookup_elem), an empty
# slot as ENOENT: dump_batches reads them key by key and leaves the empty slots out, as bpftool.
_ID_VALUE_TYPES = frozenset({MapType.PROG_ARRAY, MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS})
_MISSING: Any = object()


def _shown(value: object) -> str:
    """``value`` for a message, cut short (a huge int by its size: bpfkit.btf.values)."""
    from .btf.values import describe_value

    return describe_value(value)


def _int_codec(size: int) -> str | None:
    return {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}.get(size)


class Map(PinnableObject, _Generic["K", "V"]):
    """A kernel map. Create from a MapSpec, or open an existing one with
    :meth:`load_pinned` / :meth:`from_id` / :meth:`from_fd`. Close with :meth:`close` or
    ``with``.

    A mapping: ``m[key]``, ``m[key] = value``, ``del m[key]``, ``key in m``, ``len(m)``,
    ``keys()``, ``values()``, ``items()`` (batched), ``pop()``, ``clear()``; array maps are also
    sequences (``m[-1]``, ``m[2:4]``). ``Map[K, V]`` types the keys and values for mypy."""

    KIND = "map"

    def __init__(self, spec: MapSpec, *, inner_map_fd: int = 0, btf_fd: int = 0, value_type_btf_obj_fd: int = 0) -> None:
        bump_memlock()  # kernels before 5.11 charge maps to RLIMIT_MEMLOCK
        if spec.type in _MAP_IN_MAP and not inner_map_fd:
            raise UsageError(f"map {spec.name!r}: a map-in-map needs an inner map template")
        if spec.type in _NO_BTF_TYPES or not (spec.btf_value_type_id or spec.btf_key_type_id
                                              or spec.btf_vmlinux_value_type_id):
            btf_fd = 0  # a struct_ops map needs the object's BTF fd even with no key/value ids
        name = spec.kernel_name or spec.name
        if not _MAP_NAME_OK(name):
            name = "".join(c if c.isascii() and (c.isalnum() or c in "_.") else "_" for c in name)

        def create(with_btf: int) -> FD:
            return _bpf.map_create(
                int(spec.type),
                spec.key_size,
                spec.value_size,
                spec.max_entries,
                flags=spec.flags,
                name=name,
                inner_map_fd=inner_map_fd,
                numa_node=spec.numa_node,
                btf_fd=with_btf,
                btf_key_type_id=spec.btf_key_type_id if with_btf else 0,
                btf_value_type_id=spec.btf_value_type_id if with_btf else 0,
                map_extra=spec.map_extra,
                btf_vmlinux_value_type_id=spec.btf_vmlinux_value_type_id,
                value_type_btf_obj_fd=value_type_btf_obj_fd,
            )

        try:
            try:
                fd = create(btf_fd)
            except KernelError as exc:
                # As libbpf: some kernels refuse BTF for some map types; the map works without.
                if not btf_fd or exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, 524):
                    raise
                fd = create(0)
        except BPFKitError as exc:
            zero = zero_size_fields(spec)
            if zero and isinstance(exc, KernelError) and exc.errno == errno.EINVAL:
                exc.add_hint(zero_size_hint(spec.name, zero))
            raise exc.wrap(f"create map {spec.name!r} ({spec.type.kernel_name})")
        self._init(fd, spec)

    def _init(self, fd: FD, spec: MapSpec, kernel_btf_id: int = 0) -> None:
        self.fd = fd
        self.spec = spec
        self.name = spec.name
        self.type = spec.type
        self.key_size = spec.key_size
        self.value_size = spec.value_size
        self.max_entries = spec.max_entries
        self.flags = spec.flags
        self.key_format = spec.key_format
        self.value_format = spec.value_format
        if spec.type == MapType.STACK_TRACE and self.key_format is None and spec.key_size == 4:
            self.key_format = "<I"  # stack ids (bpf_get_stackid's return value)
        self.pinned_path: str | None = None
        self._percpu = spec.type in PERCPU_TYPES
        self._ncpus = num_possible_cpus() if self._percpu else 1
        self._slot = (spec.value_size + 7) & ~7 if self._percpu else spec.value_size
        self._kernel_btf_id = kernel_btf_id
        self._typed: tuple[ValueCodec | None, ValueCodec | None] | None = None  # (key, value), on first use
        self._records: dict[str, type[Record]] | None = None  # struct name -> class to decode into
        self._batch_ok = True

    # ------------------------------------------------------------------ other constructors
    @classmethod
    def from_fd(cls, fd: FD, name: str | None = None) -> Map[Any, Any]:
        """Adopt ``fd`` (ownership moves to the Map), describing it from the kernel's info.
        Keys and values are typed through the map's BTF in the kernel, fetched on first use."""
        from ._kernel import info as _info

        info = _info.read_adopted(fd, _info.map_info)
        spec = MapSpec(name or info.name, MapType(info.type), info.key_size, info.value_size, info.max_entries,
                       flags=info.map_flags, map_extra=info.map_extra, btf_key_type_id=info.btf_key_type_id,
                       btf_value_type_id=info.btf_value_type_id)
        self: Map[Any, Any] = cls.__new__(cls)
        self._init(fd, spec, info.btf_id)
        return self

    @classmethod
    def load_pinned(cls, path: str, readonly: bool = False) -> Map[Any, Any]:
        """Open the map pinned at ``path`` in bpffs."""
        from ._kernel.consts import BPF_F_RDONLY

        fd = cls._open_pinned(path, BPF_F_RDONLY if readonly else 0)
        try:
            self = cls.from_fd(fd)
        except BPFKitError as exc:
            raise exc.wrap(f"{path} is not a map")
        self.pinned_path = path
        return self

    @classmethod
    def from_id(cls, map_id: int) -> Map[Any, Any]:
        return cls.from_fd(_bpf.fd_by_id("map", map_id))

    # ------------------------------------------------------------------------ typing
    @property
    def btf(self) -> BTF | None:
        """The BTF the keys and values are typed through (None: bytes or formats)."""
        codecs = self._codecs()
        for c in codecs:
            if c is not None:
                return c.btf
        return None

    @property
    def key_codec(self) -> ValueCodec | None:
        return self._codecs()[0]

    @property
    def value_codec(self) -> ValueCodec | None:
        return self._codecs()[1]

    def use_records(self, records: Mapping[str, type[Record]]) -> None:
        """Decode the structs named in ``records`` into those Record subclasses (a generated
        skeleton's classes: bpfkit.skeleton) instead of classes made from BTF."""
        self._records = dict(records)
        self._typed = None

    def _codecs(self) -> tuple[ValueCodec | None, ValueCodec | None]:
        typed = self._typed
        if typed is None:
            typed = self._typed = self._make_codecs()
        return typed

    def _make_codecs(self) -> tuple[ValueCodec | None, ValueCodec | None]:
        spec = self.spec
        kid, vid = spec.btf_key_type_id, spec.btf_value_type_id
        if self.value_format is None and self.type not in _FD_VALUE_TYPES:
            pass
        else:
            vid = 0  # explicit formats win; fd arrays hold ids/fds, whatever BTF says
        if self.key_format is not None or not self.key_size:
            kid = 0
        if not (kid or vid):
            return None, None
        btf = spec.btf
        if btf is None and self._kernel_btf_id:
            from . import kernel_btf as _kernel_btf

            try:
                btf = _kernel_btf.by_id(self._kernel_btf_id)
            except BPFKitError:
                btf = None  # gone, or no CAP_SYS_ADMIN for BTF_GET_FD_BY_ID: stay bytes
        if btf is None:
            return None, None
        from .btf import values as _btf_values  # on first typed use: ~0.4 ms of every start-up

        def make(type_id: int, size: int, what: str) -> ValueCodec | None:
            if not type_id:
                return None
            try:
                if isinstance(btf.resolve(type_id), Datasec):
                    return None  # a data section: its variables are the typed view
                codec = _btf_values.value_codec(btf, type_id, name=what, records=self._records)
            except BPFKitError:
                return None  # a type bpfkit cannot lay out: bytes
            return codec if codec.size == size else None

        return make(kid, self.key_size, "key"), make(vid, self.value_size, "value")

    # ------------------------------------------------------------------------ encoding
    def encode_key(self, key: Any) -> bytes:
        kc = self._codecs()[0]
        if kc is not None and not isinstance(key, (bytes, bytearray, memoryview)):
            try:
                return kc.encode(key)
            except BPFKitError as exc:
                raise exc.wrap(f"map {self.name!r}")
        return self._encode(key, self.key_size, self.key_format, "key")

    def encode_value(self, value: Any) -> bytes:
        """``value`` laid out as the kernel takes it (per-CPU: a list, one per possible CPU)."""
        vc = self._codecs()[1]
        if not self._percpu:
            return self._encode_one(value, vc)
        if not isinstance(value, (list, tuple)) or len(value) != self._ncpus:
            raise UsageError(
                f"map {self.name!r} is per-CPU: give a list of {self._ncpus} values (one per possible CPU)"
            )
        pad = bytes(self._slot - self.value_size)
        return b"".join(self._encode_one(v, vc) + pad for v in value)

    def _encode_one(self, value: Any, vc: ValueCodec | None) -> bytes:
        if vc is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return vc.encode(value)
            except BPFKitError as exc:
                raise exc.wrap(f"map {self.name!r}")
        return self._encode(value, self.value_size, self.value_format, "value")

    _encode_value = encode_value

    def _encode(self, obj: Any, size: int, fmt: str | None, what: str) -> bytes:
        try:
            if isinstance(obj, (bytes, bytearray, memoryview)):
                raw = bytes(obj)
            elif fmt is not None:
                raw = struct.pack(fmt, *obj) if isinstance(obj, tuple) else struct.pack(fmt, obj)
            elif isinstance(obj, int) and _int_codec(size):
                fmt = _int_codec(size)
                raw = struct.pack(fmt, obj)  # type: ignore[arg-type]
            elif hasattr(obj, "fd") and isinstance(obj.fd, FD) and size == 4:
                raw = struct.pack("<I", obj.fd.raw)  # a Map or Program as a prog/map-array value
            else:
                raise UsageError(f"map {self.name!r}: cannot encode {what} {_shown(obj)} as {size} bytes")
        except (struct.error, OverflowError) as exc:  # out of the format's range, or not its type
            raise UsageError(f"map {self.name!r}: cannot encode {what} {_shown(obj)} as {fmt!r} ({exc})") from None
        if len(raw) != size:
            raise UsageError(f"map {self.name!r}: {what} is {len(raw)} bytes, the map's are {size}")
        return raw

    def _decode(self, raw: bytes, fmt: str | None) -> Any:
        if fmt is None:
            return raw
        values = struct.unpack(fmt, raw)
        return values[0] if len(values) == 1 else values

    def _decode_key(self, raw: bytes | memoryview, offset: int = 0) -> Any:
        kc = self._codecs()[0]
        if kc is not None:
            return kc.decode(raw, offset)
        return self._decode(bytes(raw[offset:offset + self.key_size]), self.key_format)

    def _decode_value(self, raw: bytes | memoryview, offset: int = 0) -> Any:
        vc = self._codecs()[1]
        size, slot = self.value_size, self._slot
        if vc is not None:
            if not self._percpu:
                return vc.decode(raw, offset)
            return [vc.decode(raw, offset + i * slot) for i in range(self._ncpus)]
        if not self._percpu:
            if self.type == MapType.STACK_TRACE and self.value_format is None:
                return self._decode_stack(raw, offset)
            return self._decode(bytes(raw[offset:offset + size]), self.value_format)
        return [self._decode(bytes(raw[offset + i * slot:offset + i * slot + size]), self.value_format)
                for i in range(self._ncpus)]

    def _decode_keys(self, raw: bytes, count: int) -> list[Any]:
        """``count`` keys laid out one after another (a batch)."""
        kc = self._codecs()[0]
        if kc is not None:
            return kc.decode_many(raw, count)
        return [self._decode_key(raw, i * self.key_size) for i in range(count)]

    def _decode_values(self, raw: bytes, count: int) -> list[Any]:
        """``count`` values laid out one after another (a batch; per-CPU: ncpus slots each)."""
        vc = self._codecs()[1]
        if vc is None:
            return [self._decode_value(raw, i * self._value_buf_size) for i in range(count)]
        if not self._percpu:
            return vc.decode_many(raw, count)
        flat, n = vc.decode_many(raw, count * self._ncpus, self._slot), self._ncpus
        return [flat[i:i + n] for i in range(0, count * n, n)]

    def _decode_stack(self, raw: bytes | memoryview, offset: int) -> Any:
        """A stack-trace map's value: the instruction pointers, innermost first, trailing zeros
        dropped; with BPF_F_STACK_BUILD_ID, (build id hex, file offset) pairs
        (bpfkit.symbols.stacks)."""
        # Imported here: the symbols package (kallsyms, ELF symbol tables) costs ~11 ms at start-up,
        # which every load and attach would pay for the few maps that hold stacks.
        from .symbols.stacks import decode_build_id_stack, decode_stack

        value = memoryview(raw)[offset:offset + self.value_size]
        if self.flags & MapFlag.STACK_BUILD_ID:
            return decode_build_id_stack(value)
        return decode_stack(value)

    @property
    def _value_buf_size(self) -> int:
        return self._slot * self._ncpus

    # ---------------------------------------------------------------------- operations
    def _refuse(self, types: frozenset[MapType], what: str, why: str) -> None:
        if self.type in types:
            raise UsageError(f"map {self.name!r} ({self.type.kernel_name}): {what} {why}")

    def _index(self, key: Any) -> Any:
        """Array maps as sequences: a negative int index counts from the end; IndexError
        outside [-max_entries, max_entries)."""
        if self.type in _ARRAY_TYPES and isinstance(key, int) and not isinstance(key, bool):
            if key < 0:
                key += self.max_entries
            if not 0 <= key < self.max_entries:
                raise IndexError(f"map {self.name!r}: index out of range (it has {self.max_entries} entries)")
        return key

    def _lookup_raw(self, key: Any, flags: int = 0) -> bytes | None:
        raw_key = self.encode_key(key) if self.key_size else None
        try:
            return _elems.lookup(self.fd, raw_key, self._value_buf_size, flags)
        except BPFKitError as exc:
            raise exc.wrap(f"lookup in map {self.name!r}")

    @overload
    def lookup(self, key: K) -> V | None: ...
    @overload
    def lookup(self, key: K, default: D, flags: int = 0) -> V | D: ...

    def lookup(self, key: K, default: Any = None, flags: int = 0) -> Any:
        """The value at ``key``, or ``default`` when absent (queues/stacks: peek, key None)."""
        raw = self._lookup_raw(key, flags)
        return default if raw is None else self._decode_value(raw)

    get = lookup

    @overload
    def __getitem__(self, key: K) -> V: ...
    @overload
    def __getitem__(self, key: slice) -> list[V]: ...

    def __getitem__(self, key: K | slice) -> V | list[V]:
        if isinstance(key, slice):
            self._refuse(frozenset(MapType) - _ARRAY_TYPES, "slicing", "works on array maps only")
            return [self[i] for i in range(*key.indices(self.max_entries))]  # type: ignore[index]
        raw = self._lookup_raw(self._index(key))
        if raw is None:
            raise KeyError(key)
        value: V = self._decode_value(raw)
        return value

    def update(self, key: K, value: V, flags: int = BPF_ANY) -> None:
        """Write ``value`` at ``key``. ``flags``: BPF_ANY, BPF_NOEXIST, BPF_EXIST, BPF_F_LOCK."""
        raw_key = self.encode_key(self._index(key)) if self.key_size else None
        raw_value = self.encode_value(value)
        try:
            _elems.update(self.fd, raw_key, raw_value, flags)
        except BPFKitError as exc:
            raise exc.wrap(f"update map {self.name!r}")

    __setitem__ = update

    def push(self, value: V, flags: int = BPF_ANY) -> None:
        """Add ``value`` to a queue or stack (BPF_EXIST: drop the oldest when full)."""
        self.update(None, value, flags)  # type: ignore[arg-type]

    def _delete_raw(self, raw_key: bytes) -> bool:
        try:
            return _elems.delete(self.fd, raw_key)
        except BPFKitError as exc:
            raise exc.wrap(f"delete from map {self.name!r}")

    def delete(self, key: K) -> bool:
        """Remove ``key``; False if it was not there. Array maps refuse: every index exists."""
        self._refuse(_ARRAY_TYPES, "delete", "is not possible: every index of an array exists "
                     "(assign a zero value, or clear() to zero them all)")
        return self._delete_raw(self.encode_key(key))

    def __delitem__(self, key: K) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        """``key in m``: one lookup (bloom filters: ``value in m`` asks the filter)."""
        self._refuse(_QUEUE_TYPES, "'in'", "has no keys to test")
        if self.type == MapType.BLOOM_FILTER:
            raw_value = self._encode_one(key, self._codecs()[1])
            try:
                return _elems.holds(self.fd, raw_value)
            except BPFKitError as exc:
                raise exc.wrap(f"lookup in map {self.name!r}")
        if self.type in _ARRAY_TYPES and isinstance(key, int) and not isinstance(key, bool):
            return -self.max_entries <= key < self.max_entries
        return self._lookup_raw(key) is not None

    def __len__(self) -> int:
        """Arrays: max_entries. Other maps keep no count the kernel reports: len() walks every
        key (one BPF_MAP_GET_NEXT_KEY per element). Queues, stacks and maps without elements
        refuse."""
        if self.type in _ARRAY_TYPES:
            return self.max_entries
        self._refuse(_QUEUE_TYPES | _NO_ELEMENTS, "len()", "is unknown: the kernel does not count its elements")
        return sum(1 for _ in self._raw_keys())

    def __bool__(self) -> bool:
        return True  # a Map object is true (len() may be expensive or refused)

    def lookup_and_delete(self, key: Any = None) -> Any:
        """Pop ``key`` (or the next element of a queue/stack when key is None); None if empty."""
        raw_key = self.encode_key(key) if key is not None else None
        try:
            raw = _elems.lookup_and_delete(self.fd, raw_key, self._value_buf_size)
        except KernelError as exc:
            if exc.errno in (_ENOTSUPP, errno.EOPNOTSUPP) and self.type not in (MapType.QUEUE, MapType.STACK):
                # Queues and stacks had it first (4.20); hash maps since 5.14 (3e87f192b405).
                raise NotSupportedError(f"lookup-and-delete in {self.type.name.lower()} map {self.name!r}",
                                        f"BPF_MAP_LOOKUP_AND_DELETE_ELEM gave {errno_name(exc.errno)}", "5.14") from None
            raise exc.wrap(f"lookup-and-delete in map {self.name!r}")
        except BPFKitError as exc:
            raise exc.wrap(f"lookup-and-delete in map {self.name!r}")
        return None if raw is None else self._decode_value(raw)

    def pop(self, key: Any = _MISSING, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value (BPF_MAP_LOOKUP_AND_DELETE_ELEM: atomic on 5.14+;
        older kernels: a lookup then a delete). Queues and stacks: ``pop()`` takes the next
        element. Missing or empty: ``default``, else KeyError."""
        queue = self.type in _QUEUE_TYPES
        if queue and key is not _MISSING:
            raise UsageError(f"map {self.name!r} ({self.type.kernel_name}): pop() takes no key "
                             "(it removes the next element; pop(default=...) for an empty one)")
        self._refuse(_ARRAY_TYPES, "pop", "is not possible: every index of an array exists")
        if not queue and key is _MISSING:
            raise UsageError(f"map {self.name!r}: pop() needs a key")
        try:
            value = self.lookup_and_delete(None if queue else key)
        except NotSupportedError:
            raw_key = self.encode_key(key)
            value = self.lookup(key, _MISSING)
            if value is not _MISSING and not self._delete_raw(raw_key):
                value = _MISSING  # deleted by someone else between the two calls
            value = None if value is _MISSING else value
        if value is None:
            if default is _MISSING:
                raise KeyError(key if not queue else f"map {self.name!r} is empty")
            return default
        return value

    def next_key(self, key: Any = None) -> Any:
        """The key after ``key`` (the first key for None); None at the end."""
        raw = _elems.next_key(self.fd, self.encode_key(key) if key is not None else None, self.key_size)
        return None if raw is None else self._decode_key(raw)

    def _raw_keys(self) -> Iterator[bytes]:
        """Every key as bytes, with MAP_GET_NEXT_KEY."""
        try:
            yield from _elems.keys(self.fd, self.key_size)
        except BPFKitError as exc:
            raise exc.wrap(f"iterate keys of map {self.name!r}")

    def keys(self) -> Iterator[K]:
        """Iterate keys with MAP_GET_NEXT_KEY (a hash map may skip or repeat keys that are
        deleted concurrently; that is the kernel's contract)."""
        self._refuse(_QUEUE_TYPES | _NO_ELEMENTS, "keys", "cannot be listed")
        for raw in self._raw_keys():
            yield self._decode_key(raw)

    def items(self) -> Iterator[tuple[K, V]]:
        """Every (key, value): BPF_MAP_LOOKUP_BATCH (5.6+), 256 per syscall; map types
        without batch lookups (and older kernels) one lookup per key."""
        self._refuse(_QUEUE_TYPES | _NO_ELEMENTS, "items", "cannot be listed")
        if self._batch_ok:
            yield from self._batch(256, fallback=True)
            return
        yield from self._items_by_key()

    def values(self) -> Iterator[V]:
        """Every value, as :meth:`items` reads them."""
        for _, value in self.items():
            yield value

    def _items_by_key(self) -> Iterator[tuple[K, V]]:
        for raw in self._raw_keys():
            value = self._lookup_raw(raw)
            if value is not None:  # deleted meanwhile
                yield self._decode_key(raw), self._decode_value(value)

    def __iter__(self) -> Iterator[K]:
        return self.keys()

    def clear(self) -> None:
        """Empty the map. Hash-like maps and arrays of fds/objects: every key deleted; queues
        and stacks: popped until empty. Arrays (every index exists) are zeroed, as bcc does.
        Ring buffers, bloom filters, storage and struct_ops maps refuse."""
        self._refuse(_NO_ELEMENTS, "clear", "is not possible: it has no elements to delete")
        if self.type in _QUEUE_TYPES:
            while self.lookup_and_delete() is not None:
                pass
        elif self.type in _ARRAY_TYPES:
            zero = bytes(self._value_buf_size)
            for i in range(self.max_entries):
                try:
                    _elems.update(self.fd, struct.pack("=I", i), zero, BPF_ANY)
                except BPFKitError as exc:
                    raise exc.wrap(f"clear map {self.name!r}")
        else:
            for raw in list(self._raw_keys()):
                self._delete_raw(raw)

    def lookup_batch(self, batch_size: int = 256) -> Iterator[tuple[K, V]]:
        """Every (key, value) through BPF_MAP_LOOKUP_BATCH, ``batch_size`` per syscall
        (NotSupportedError for map types or kernels without it: :meth:`items` falls back)."""
        return self._batch(batch_size, fallback=False)

    def raw_batches(self, batch_size: int = 256) -> Iterator[tuple[bytes, bytes, int]]:
        """Every entry undecoded, a batch at a time: ``(keys, values, count)``, keys
        ``key_size`` bytes apart, values ``value_stride`` apart (per-CPU: one 8-byte aligned slot
        per possible CPU, as the kernel copies them). BPF_MAP_LOOKUP_BATCH where the map type
        and kernel (5.6+) have it, else one lookup per key in batches of the same size."""
        self._refuse(_QUEUE_TYPES | _NO_ELEMENTS, "items", "cannot be listed")
        for keys, values, count, _ in self._read(batch_size, batched=self._batch_ok):
            yield keys, values, count

    def dump_batches(self, batch_size: int = 4096) -> Iterator[tuple[bytes, bytes, int, int]]:
        """Every entry undecoded as ``bpfkit map dump`` reads it, as bpftool does:
        ``(keys, values, count, errno)``, batches as :meth:`raw_batches` gives them with errno 0;
        prog arrays, map arrays and hashes of maps (values read as ids) key by key, their empty
        slots left out. A key whose lookup fails comes alone with the lookup's errno and no
        value (an empty devmap slot: ENOENT; an xskmap's: EOPNOTSUPP). No map type is refused:
        one without keys fails with the kernel's error (a queue's GET_NEXT_KEY: EINVAL)."""
        batched = self._batch_ok and bool(self.key_size) and self.type not in _ID_VALUE_TYPES
        return self._read(batch_size, batched=batched, errors=True)

    _drain_batched = True  # BPF_MAP_LOOKUP_AND_DELETE_BATCH not refused yet (set False on the instance)

    def drain(self, batch_size: int = 256) -> list[tuple[K, V]]:
        """Take every (key, value) out of the map, for a tool that reads and resets a map each
        interval (libbpf-tools' syscount; map_helpers.c dump_hash with lookup_and_delete).

        BPF_MAP_LOOKUP_AND_DELETE_BATCH (5.6+), ``batch_size`` elements a syscall: the kernel
        copies and deletes each hash bucket's elements under the bucket's lock, so an element is
        returned by exactly one drain, and one inserted while draining stays for the next.
        Map types and kernels without it (EINVAL, ENOTSUPP: remembered) fall back as libbpf-tools
        does: every key (BPF_MAP_GET_NEXT_KEY), then a lookup and a delete each; an element whose
        delete finds it gone (taken by another drainer) is left out. Per-CPU maps give one value
        per possible CPU. Either way a value is what was copied: a program that changes a value in
        place, through bpf_map_lookup_elem's pointer, just as it is drained loses that change (a
        count meant to survive drains is inserted whole, as a new key, or read with
        :meth:`items` and subtracted). Everything is read before this returns. Arrays (every
        index exists: :meth:`items` then :meth:`clear`), queues and maps without elements refuse."""
        self._refuse(_ARRAY_TYPES | _QUEUE_TYPES | _NO_ELEMENTS, "drain",
                     "is not possible: it has no keys to take out")
        if batch_size < 1:
            raise UsageError(f"drain map {self.name!r}: batch_size must be 1 or more, not {batch_size}")
        out: list[tuple[K, V]] = []
        if self._drain_batched and self.key_size:
            try:
                for kraw, vraw, count in _elems.lookup_and_delete_batches(
                        self.fd, self.key_size, self._value_buf_size, batch_size, max(self.max_entries, 1) * 2):
                    out.extend(zip(self._decode_keys(kraw, count), self._decode_values(vraw, count), strict=True))
                return out
            except KernelError as exc:
                if out or exc.errno not in _NO_BATCH:
                    raise exc.wrap(f"drain map {self.name!r} (BPF_MAP_LOOKUP_AND_DELETE_BATCH)")
                self._drain_batched = False
        return self._drain_by_key()

    def _drain_by_key(self) -> list[tuple[K, V]]:
        """:meth:`drain` without the batch op: the keys first, then a lookup and a delete each."""
        out: list[tuple[K, V]] = []
        for raw in list(self._raw_keys()):
            try:
                value = _elems.lookup(self.fd, raw, self._value_buf_size)
            except BPFKitError as exc:
                raise exc.wrap(f"drain map {self.name!r}: lookup")
            if value is not None and self._delete_raw(raw):
                out.append((self._decode_key(raw), self._decode_value(value)))
        return out

    @property
    def value_stride(self) -> int:
        """Bytes between two values in :meth:`raw_batches` (per-CPU: every CPU's slot)."""
        return self._value_buf_size

    def _batch(self, batch_size: int, fallback: bool) -> Iterator[tuple[K, V]]:
        for kraw, vraw, count, _ in self._read(batch_size, fallback=fallback):
            yield from zip(self._decode_keys(kraw, count), self._decode_values(vraw, count))

    def _read(self, batch_size: int, *, batched: bool = True, fallback: bool = True,
              errors: bool = False) -> Iterator[tuple[bytes, bytes, int, int]]:
        """The one reader of every entry: ``(keys, values, count, errno)``, by
        BPF_MAP_LOOKUP_BATCH (``batched``) or else key by key. A map type or kernel without
        the batch ops (refused on the first call) is read key by key from then on
        (``fallback``), or raises NotSupportedError. ``errors``: a key whose lookup fails
        comes alone with its errno instead of raising (:meth:`dump_batches`)."""
        if batched:
            first = True
            try:
                for keys, values, count in _elems.lookup_batches(
                        self.fd, self.key_size, self._value_buf_size, batch_size, max(self.max_entries, 1) * 2):
                    first = False
                    yield keys, values, count, 0
                return
            except KernelError as exc:
                if not first or exc.errno not in _NO_BATCH:
                    raise exc.wrap(f"batch lookup in map {self.name!r}")
                if not fallback:
                    raise NotSupportedError(f"batch lookup in {self.type.kernel_name} map {self.name!r}",
                                            f"BPF_MAP_LOOKUP_BATCH gave {errno_name(exc.errno)}", "5.6") from None
                self._batch_ok = False
        yield from self._read_by_key(batch_size, errors)

    def _read_by_key(self, batch_size: int, errors: bool) -> Iterator[tuple[bytes, bytes, int, int]]:
        """:meth:`_read` without batch ops: GET_NEXT_KEY, then LOOKUP_ELEM each key, gathered
        ``batch_size`` at a time."""
        keys: list[bytes] = []
        values: list[bytes] = []
        size = self._value_buf_size
        for raw in self._raw_keys():
            try:
                value = _elems.lookup(self.fd, raw, size)
                err = 0 if value is not None else errno.ENOENT  # deleted meanwhile, or an empty slot
            except KernelError as exc:
                if not errors:
                    raise exc.wrap(f"lookup in map {self.name!r}")
                value, err = None, exc.errno
            if value is None:
                if errors and not (err == errno.ENOENT and self.type in _ID_VALUE_TYPES):
                    if keys:
                        yield b"".join(keys), b"".join(values), len(keys), 0
                        keys, values = [], []
                    yield raw, b"", 1, err
                continue
            keys.append(raw)
            values.append(value)
            if len(keys) == batch_size:
                yield b"".join(keys), b"".join(values), len(keys), 0
                keys, values = [], []
        if keys:
            yield b"".join(keys), b"".join(values), len(keys), 0

    def update_batch(self, pairs: list[tuple[K, V]], flags: int = BPF_ANY) -> int:
        """Write many (key, value) pairs with one BPF_MAP_UPDATE_BATCH; returns the count."""
        kraw = b"".join(self.encode_key(k) for k, _ in pairs)
        vraw = b"".join(self.encode_value(v) for _, v in pairs)
        return _elems.update_batch(self.fd, kraw, vraw, len(pairs), flags)

    def freeze(self) -> None:
        """Make the map read-only for user space (BPF_MAP_FREEZE, 5.2+)."""
        try:
            _bpf.map_freeze(self.fd)
        except BPFKitError as exc:
            raise exc.wrap(f"freeze map {self.name!r}")

    def info(self) -> MapInfo:
        """The kernel's description of this map (struct bpf_map_info, BPF_OBJ_GET_INFO_BY_FD)."""
        from ._kernel import info as _info

        return _info.map_info(self.fd)

    @property
    def id(self) -> int:
        from ._kernel.info import object_id

        return object_id(self.fd, "map")

    def __repr__(self) -> str:
        return f"Map({self.name!r}, {self.type.kernel_name}, fd={self.fd!r})"


def map_ids() -> Iterator[int]:
    """The ids of every map in the system, ascending (BPF_MAP_GET_NEXT_ID, 4.13; needs
    CAP_SYS_ADMIN). Open one with :meth:`Map.from_id` (it may be gone by then: ENOENT)."""
    return _bpf.iter_ids("map")
