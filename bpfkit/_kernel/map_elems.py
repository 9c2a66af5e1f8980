# SPDX-License-Identifier: Apache-2.0
"""Map elements as bytes: BPF_MAP_LOOKUP_ELEM, UPDATE_ELEM, DELETE_ELEM, LOOKUP_AND_DELETE_ELEM,
GET_NEXT_KEY and the LOOKUP/LOOKUP_AND_DELETE/UPDATE_BATCH commands with Python bytes in and out.

The cffi buffers these commands fill stay here: bpfkit.maps and the CLI hand over and get back
bytes. A key of None is the NULL key: the first key for GET_NEXT_KEY, the head of a queue or
stack for a lookup or a pop. A buffer is at least one byte (a map whose key_size or
value_size is 0 still takes a pointer). Errors are the kernel's (KernelError with its errno);
ENOENT, "no such key" or "no more keys", is an answer (None, False), not an error.
"""

from __future__ import annotations

import errno

from ..errors import KernelError
from . import bpf as _bpf
from .abi import ffi
from .consts import Cmd
from .fd import FD

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

__all__ = ["lookup", "update", "delete", "lookup_and_delete", "holds", "next_key", "keys", "lookup_batches",
           "lookup_and_delete_batches", "update_batch"]


def _buf(size: int) -> Any:
    return ffi.new("char[]", max(size, 1))


def _key(key: bytes | None) -> Any:
    return ffi.NULL if key is None else ffi.from_buffer(key)


def lookup(fd: FD | int, key: bytes | None, size: int, flags: int = 0) -> bytes | None:
    """The ``size`` bytes of value at ``key`` (queues and stacks: the head, key None); None
    if absent. ``flags``: BPF_F_LOCK."""
    value = _buf(size)
    if not _bpf.map_lookup(fd, _key(key), value, flags):
        return None
    data: bytes = ffi.buffer(value, size)[:]
    return data


def holds(fd: FD | int, value: bytes) -> bool:
    """Whether a bloom filter holds ``value`` (a lookup with no key, the value as input:
    kernel/bpf/bloom_filter.c bloom_map_peek_elem)."""
    return _bpf.map_lookup(fd, ffi.NULL, ffi.from_buffer(value))


def update(fd: FD | int, key: bytes | None, value: bytes, flags: int = 0) -> None:
    """Write ``value`` at ``key`` (queues and stacks: push, key None). ``flags``: BPF_ANY,
    BPF_NOEXIST, BPF_EXIST, BPF_F_LOCK."""
    _bpf.map_update(fd, _key(key), ffi.from_buffer(value), flags)


def delete(fd: FD | int, key: bytes) -> bool:
    """Remove ``key``; False if it was not there."""
    return _bpf.map_delete(fd, ffi.from_buffer(key))


def lookup_and_delete(fd: FD | int, key: bytes | None, size: int) -> bytes | None:
    """Remove ``key`` (queues and stacks: the head, key None) and give its ``size`` bytes of
    value; None if absent."""
    value = _buf(size)
    if not _bpf.map_lookup_and_delete(fd, _key(key), value):
        return None
    data: bytes = ffi.buffer(value, size)[:]
    return data


def next_key(fd: FD | int, key: bytes | None, size: int) -> bytes | None:
    """The ``size``-byte key after ``key`` (the first key for None); None at the end."""
    out = _buf(size)
    if not _bpf.map_next_key(fd, _key(key), out):
        return None
    data: bytes = ffi.buffer(out, size)[:]
    return data


def keys(fd: FD | int, size: int) -> Iterator[bytes]:
    """Every ``size``-byte key, by GET_NEXT_KEY from the first (two buffers, taking turns)."""
    prev: Any = ffi.NULL
    bufs = _buf(size), _buf(size)
    i = 0
    while _bpf.map_next_key(fd, prev, bufs[i]):
        prev = bufs[i]
        yield ffi.buffer(prev, size)[:]
        i ^= 1


def lookup_batches(fd: FD | int, key_size: int, value_size: int, batch_size: int,
                   max_batch_size: int) -> Iterator[tuple[bytes, bytes, int]]:
    """Every entry by BPF_MAP_LOOKUP_BATCH (5.6+), ``batch_size`` a call: ``(keys, values,
    count)``, keys ``key_size`` and values ``value_size`` bytes apart. A hash bucket holding more
    elements than a batch (ENOSPC: kernel/bpf/hashtab.c __htab_map_lookup_and_delete_batch)
    doubles the batch, up to ``max_batch_size``; past it the KernelError is raised."""
    return _batches(Cmd.MAP_LOOKUP_BATCH, fd, key_size, value_size, batch_size, max_batch_size)


def lookup_and_delete_batches(fd: FD | int, key_size: int, value_size: int, batch_size: int,
                              max_batch_size: int) -> Iterator[tuple[bytes, bytes, int]]:
    """Every entry taken out by BPF_MAP_LOOKUP_AND_DELETE_BATCH (5.6+), as :func:`lookup_batches`
    reads them. The kernel copies and deletes a hash bucket's elements under the bucket's lock
    (kernel/bpf/hashtab.c __htab_map_lookup_and_delete_batch): an element is returned once, and
    one written meanwhile stays for the next drain. A batch the caller does not take (the
    generator left early) was deleted all the same: read it to the end."""
    return _batches(Cmd.MAP_LOOKUP_AND_DELETE_BATCH, fd, key_size, value_size, batch_size, max_batch_size)


def _batches(cmd: Cmd, fd: FD | int, key_size: int, value_size: int, batch_size: int,
             max_batch_size: int) -> Iterator[tuple[bytes, bytes, int]]:
    keys, values = _buf(key_size * batch_size), _buf(value_size * batch_size)
    in_batch: Any = None
    out_batch = _buf(max(key_size, 8))
    while True:
        try:
            count, done = _bpf.map_batch(cmd, fd, keys, values, batch_size, in_batch, out_batch)
        except KernelError as exc:
            if exc.errno != errno.ENOSPC or batch_size >= max_batch_size:
                raise
            batch_size *= 2
            keys, values = _buf(key_size * batch_size), _buf(value_size * batch_size)
            continue
        if count:
            yield ffi.buffer(keys, key_size * count)[:], ffi.buffer(values, value_size * count)[:], count
        if done:
            return
        in_batch, out_batch = out_batch, _buf(max(key_size, 8))


def update_batch(fd: FD | int, keys: bytes, values: bytes, count: int, flags: int = 0) -> int:
    """Write ``count`` entries (keys and values laid out one after another) with one
    BPF_MAP_UPDATE_BATCH (5.6+); returns how many the kernel wrote."""
    written, _ = _bpf.map_batch(Cmd.MAP_UPDATE_BATCH, fd, ffi.from_buffer(keys), ffi.from_buffer(values), count,
                                elem_flags=flags)
    return written
