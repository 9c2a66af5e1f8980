"""Maps: Map (a kernel map owning its fd), made from a MapSpec (plain data, defined in the
spec layer, bpfkit.spec.maps, and re-exported here).

Keys and values cross into the kernel as bytes. A Map accepts bytes, or ints for keys/values
of 1, 2, 4 or 8 bytes, or anything its ``key_format``/``value_format`` (a :mod:`struct` format)
packs; with a format set, lookups return decoded values. Per-CPU maps take and return one value
per possible CPU (the kernel lays them out 8-byte aligned, one per possible CPU).
"""

from __future__ import annotations

import errno
import re
import struct
from collections.abc import Iterator
from typing import Any

from ._kernel import bpf as _bpf
from ._kernel.abi import ffi
from ._kernel.consts import BPF_ANY, Cmd, MapType
from ._kernel.cpus import num_possible_cpus
from ._kernel.fd import FD, PinnableObject
from ._kernel.rlimit import bump_memlock
from .errors import BPFKitError, KernelError, NotSupportedError, UsageError, errno_name
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

_ENOTSUPP = 524  # kernel-internal ENOTSUPP: a map type without the operation

__all__ = ["MapSpec", "Map", "PinType", "PERCPU_TYPES"]

_MAP_IN_MAP = frozenset({MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS})
_FD_VALUE_TYPES = _MAP_IN_MAP | {MapType.PROG_ARRAY, MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY}
# Map types created without key/value BTF, as libbpf does (the kernel rejects or ignores it).
_NO_BTF_TYPES = frozenset({
    MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY, MapType.STACK_TRACE, MapType.ARRAY_OF_MAPS,
    MapType.HASH_OF_MAPS, MapType.DEVMAP, MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.XSKMAP,
    MapType.SOCKMAP, MapType.SOCKHASH, MapType.QUEUE, MapType.STACK, MapType.ARENA,
})
_MAP_NAME_OK = re.compile(r"[A-Za-z0-9_.]*\Z").match


def _int_codec(size: int) -> str | None:
    return {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}.get(size)


class Map(PinnableObject):
    """A kernel map. Create from a MapSpec, or open an existing one with
    :meth:`load_pinned` / :meth:`from_id` / :meth:`from_fd`. Close with :meth:`close` or
    ``with``."""

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
                exc.message += "; " + zero_size_hint(spec.name, zero)
                exc.args = (exc.message,)
            raise exc.wrap(f"create map {spec.name!r} ({spec.type.kernel_name})")
        self._init(fd, spec)

    def _init(self, fd: FD, spec: MapSpec) -> None:
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
        self.pinned_path: str | None = None
        self._percpu = spec.type in PERCPU_TYPES
        self._ncpus = num_possible_cpus() if self._percpu else 1
        self._slot = (spec.value_size + 7) & ~7 if self._percpu else spec.value_size

    # ------------------------------------------------------------------ other constructors
    @classmethod
    def from_fd(cls, fd: FD, name: str | None = None) -> Map:
        """Adopt ``fd`` (ownership moves to the Map), describing it from the kernel's info."""
        try:
            info = _bpf.obj_info(fd, "struct bpf_map_info")
        except BPFKitError:
            fd.close()
            raise
        spec = MapSpec(
            name=name or ffi.string(info.name).decode(errors="replace"),
            type=MapType(info.type),
            key_size=info.key_size,
            value_size=info.value_size,
            max_entries=info.max_entries,
            flags=info.map_flags,
            map_extra=info.map_extra,
        )
        self = cls.__new__(cls)
        self._init(fd, spec)
        return self

    @classmethod
    def load_pinned(cls, path: str, readonly: bool = False) -> Map:
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
    def from_id(cls, map_id: int) -> Map:
        return cls.from_fd(_bpf.fd_by_id("map", map_id))

    # ------------------------------------------------------------------------ encoding
    def _buf(self, size: int) -> Any:
        return ffi.new("char[]", max(size, 1))

    def encode_key(self, key: Any) -> bytes:
        return self._encode(key, self.key_size, self.key_format, "key")

    def _encode(self, obj: Any, size: int, fmt: str | None, what: str) -> bytes:
        if isinstance(obj, (bytes, bytearray, memoryview)):
            raw = bytes(obj)
        elif fmt is not None:
            raw = struct.pack(fmt, *obj) if isinstance(obj, tuple) else struct.pack(fmt, obj)
        elif isinstance(obj, int) and _int_codec(size):
            raw = struct.pack(_int_codec(size), obj)  # type: ignore[arg-type]
        elif hasattr(obj, "fd") and isinstance(obj.fd, FD) and size == 4:
            raw = struct.pack("<I", obj.fd.raw)  # a Map or Program as a prog/map-array value
        else:
            raise UsageError(f"map {self.name!r}: cannot encode {what} {obj!r} as {size} bytes")
        if len(raw) != size:
            raise UsageError(f"map {self.name!r}: {what} is {len(raw)} bytes, the map's are {size}")
        return raw

    def _decode(self, raw: bytes, fmt: str | None) -> Any:
        if fmt is None:
            return raw
        values = struct.unpack(fmt, raw)
        return values[0] if len(values) == 1 else values

    def _encode_value(self, value: Any) -> bytes:
        if not self._percpu:
            return self._encode(value, self.value_size, self.value_format, "value")
        if not isinstance(value, (list, tuple)) or len(value) != self._ncpus:
            raise UsageError(
                f"map {self.name!r} is per-CPU: give a list of {self._ncpus} values (one per possible CPU)"
            )
        pad = bytes(self._slot - self.value_size)
        return b"".join(self._encode(v, self.value_size, self.value_format, "value") + pad for v in value)

    def _decode_value(self, raw: bytes) -> Any:
        if not self._percpu:
            return self._decode(raw, self.value_format)
        return [
            self._decode(raw[i * self._slot : i * self._slot + self.value_size], self.value_format)
            for i in range(self._ncpus)
        ]

    @property
    def _value_buf_size(self) -> int:
        return self._slot * self._ncpus

    # ---------------------------------------------------------------------- operations
    def lookup(self, key: Any, default: Any = None, flags: int = 0) -> Any:
        """The value at ``key``, or ``default`` when absent."""
        ckey = ffi.from_buffer(self.encode_key(key)) if self.key_size else ffi.NULL
        cval = self._buf(self._value_buf_size)
        try:
            found = _bpf.map_lookup(self.fd, ckey, cval, flags)
        except BPFKitError as exc:
            raise exc.wrap(f"lookup in map {self.name!r}")
        if not found:
            return default
        return self._decode_value(ffi.buffer(cval, self._value_buf_size)[:])

    def __getitem__(self, key: Any) -> Any:
        marker = object()
        value = self.lookup(key, marker)
        if value is marker:
            raise KeyError(key)
        return value

    def update(self, key: Any, value: Any, flags: int = BPF_ANY) -> None:
        """Write ``value`` at ``key``. ``flags``: BPF_ANY, BPF_NOEXIST, BPF_EXIST, BPF_F_LOCK."""
        ckey = ffi.from_buffer(self.encode_key(key)) if self.key_size else ffi.NULL
        cval = ffi.from_buffer(self._encode_value(value))
        try:
            _bpf.map_update(self.fd, ckey, cval, flags)
        except BPFKitError as exc:
            raise exc.wrap(f"update map {self.name!r}")

    __setitem__ = update

    def delete(self, key: Any) -> bool:
        """Remove ``key``; False if it was not there."""
        ckey = ffi.from_buffer(self.encode_key(key))
        try:
            return _bpf.map_delete(self.fd, ckey)
        except BPFKitError as exc:
            raise exc.wrap(f"delete from map {self.name!r}")

    def __delitem__(self, key: Any) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def lookup_and_delete(self, key: Any = None) -> Any:
        """Pop ``key`` (or the next element of a queue/stack when key is None); None if empty."""
        ckey = ffi.from_buffer(self.encode_key(key)) if key is not None else ffi.NULL
        cval = self._buf(self._value_buf_size)
        try:
            found = _bpf.map_lookup_and_delete(self.fd, ckey, cval)
        except KernelError as exc:
            if exc.errno in (_ENOTSUPP, errno.EOPNOTSUPP) and self.type not in (MapType.QUEUE, MapType.STACK):
                # Queues and stacks had it first (4.20); hash maps since 5.14 (3e87f192b405).
                raise NotSupportedError(f"lookup-and-delete in {self.type.name.lower()} map {self.name!r}",
                                        f"BPF_MAP_LOOKUP_AND_DELETE_ELEM gave {errno_name(exc.errno)}", "5.14") from None
            raise exc.wrap(f"lookup-and-delete in map {self.name!r}")
        except BPFKitError as exc:
            raise exc.wrap(f"lookup-and-delete in map {self.name!r}")
        return self._decode_value(ffi.buffer(cval, self._value_buf_size)[:]) if found else None

    def next_key(self, key: Any = None) -> Any:
        """The key after ``key`` (the first key for None); None at the end."""
        ckey = ffi.from_buffer(self.encode_key(key)) if key is not None else ffi.NULL
        cnext = self._buf(self.key_size)
        if not _bpf.map_next_key(self.fd, ckey, cnext):
            return None
        return self._decode(ffi.buffer(cnext, self.key_size)[:], self.key_format)

    def keys(self) -> Iterator[Any]:
        """Iterate keys with MAP_GET_NEXT_KEY (a hash map may skip or repeat keys that are
        deleted concurrently; that is the kernel's contract)."""
        key = self.next_key(None)
        while key is not None:
            yield key
            key = self.next_key(key)

    def items(self) -> Iterator[tuple[Any, Any]]:
        for key in self.keys():
            value = self.lookup(key)
            if value is not None:
                yield key, value

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    def lookup_batch(self, batch_size: int = 256) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) through BPF_MAP_LOOKUP_BATCH, ``batch_size`` per syscall."""
        keys = self._buf(self.key_size * batch_size)
        values = self._buf(self._value_buf_size * batch_size)
        in_batch = None
        out_batch = self._buf(max(self.key_size, 8))
        while True:
            try:
                count, done = _bpf.map_batch(
                    Cmd.MAP_LOOKUP_BATCH, self.fd, keys, values, batch_size, in_batch, out_batch
                )
            except KernelError as exc:
                # A hash bucket holds more elements than fit in one batch: retry bigger.
                if exc.errno != errno.ENOSPC or batch_size >= max(self.max_entries, 1) * 2:
                    raise exc.wrap(f"batch lookup in map {self.name!r}")
                batch_size *= 2
                keys = self._buf(self.key_size * batch_size)
                values = self._buf(self._value_buf_size * batch_size)
                continue
            kraw = ffi.buffer(keys, self.key_size * count)[:]
            vraw = ffi.buffer(values, self._value_buf_size * count)[:]
            for i in range(count):
                k = kraw[i * self.key_size : (i + 1) * self.key_size]
                v = vraw[i * self._value_buf_size : (i + 1) * self._value_buf_size]
                yield self._decode(k, self.key_format), self._decode_value(v)
            if done:
                return
            in_batch = out_batch
            out_batch = self._buf(max(self.key_size, 8))
            if in_batch is out_batch:  # pragma: no cover - defensive
                break

    def update_batch(self, pairs: list[tuple[Any, Any]], flags: int = BPF_ANY) -> int:
        """Write many (key, value) pairs with one BPF_MAP_UPDATE_BATCH; returns the count."""
        kraw = b"".join(self.encode_key(k) for k, _ in pairs)
        vraw = b"".join(self._encode_value(v) for _, v in pairs)
        count, _ = _bpf.map_batch(
            Cmd.MAP_UPDATE_BATCH, self.fd, ffi.from_buffer(kraw), ffi.from_buffer(vraw), len(pairs),
            elem_flags=flags,
        )
        return count

    def freeze(self) -> None:
        """Make the map read-only for user space (BPF_MAP_FREEZE, 5.2+)."""
        try:
            _bpf.map_freeze(self.fd)
        except BPFKitError as exc:
            raise exc.wrap(f"freeze map {self.name!r}")

    def info(self) -> Any:
        """The kernel's struct bpf_map_info for this map."""
        return _bpf.obj_info(self.fd, "struct bpf_map_info")

    @property
    def id(self) -> int:
        return int(self.info().id)

    def __repr__(self) -> str:
        return f"Map({self.name!r}, {self.type.kernel_name}, fd={self.fd!r})"


def map_ids() -> Iterator[int]:
    """The ids of every map in the system, ascending (BPF_MAP_GET_NEXT_ID, 4.13; needs
    CAP_SYS_ADMIN). Open one with :meth:`Map.from_id` (it may be gone by then: ENOENT)."""
    return _bpf.iter_ids("map")
