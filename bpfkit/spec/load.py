# SPDX-License-Identifier: Apache-2.0
"""load_spec: a BPF ELF object (a path or its bytes) parsed into a CollectionSpec. No syscalls
(the spec layer)."""

from __future__ import annotations

import os

from .._files import OBJECT_LIMIT, read_regular
from ..errors import BPFKitError, NotFoundError
from .collection import CollectionSpec
from .from_elf import parse_object

__all__ = ["load_spec", "spec_from_file", "object_name"]


def load_spec(source: str | os.PathLike[str] | bytes | bytearray | memoryview, name: str | None = None) -> CollectionSpec:
    """Parse a BPF ELF object (a path or its bytes) into a CollectionSpec. No syscalls."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_object(source, name or "")
    return spec_from_file(source, name)


def spec_from_file(path: str | os.PathLike[str], name: str | None = None, action: str = "load") -> CollectionSpec:
    """:func:`load_spec` of a file, its errors prefixed ``ACTION PATH:`` (the CLI's
    ``bpfkit inspect`` says ``inspect``, not ``load``). Only a regular file of bounded size is
    read (a FIFO or /dev/zero would block or exhaust memory)."""
    path = os.fspath(path)
    try:
        data = read_regular(path, "object", OBJECT_LIMIT)
    except NotFoundError:
        raise NotFoundError(f"{action} {path}: no such file") from None
    try:
        return parse_object(data, name if name is not None else object_name(path))
    except BPFKitError as exc:
        raise exc.wrap(f"{action} {path}")


def object_name(path: str | os.PathLike[str]) -> str:
    """libbpf's object name: the file name up to its first dot (``minimal`` for minimal.bpf.o)."""
    return os.path.basename(os.fspath(path)).split(".", 1)[0]
