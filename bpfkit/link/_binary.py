# SPDX-License-Identifier: Apache-2.0
"""User-space binaries for uprobes: symbols to file offsets, and library names to paths.

Pure file parsing (no syscalls beyond reading files), through bpfkit's one ELF reader
(bpfkit.elf.reader over bpfkit.elf.headers: the file is read with pread, only the pieces the
symbol tables need, its headers held to the limits of the symbolizer's): an executable or
shared object's ``.symtab`` and ``.dynsym`` give each function's virtual address (a plain name
binds to its default symbol version); the PT_LOAD segment holding that address turns it into
the file offset the kernel's uprobe wants (offset = st_value - p_vaddr + p_offset). Library
names (``libc``, ``libc.so.6``) resolve as bpftrace resolves them: through the ld.so cache
(/etc/ld.so.cache), then the standard library directories; program names (``bash``) through
$PATH.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import os
import platform
import shutil
import stat
import struct
from typing import ClassVar

from ..elf.headers import is_elf
from ..elf.image import open_binary
from ..elf.reader import (
    ET_DYN,
    ET_EXEC,
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    STT_FUNC,
    STT_GNU_IFUNC,
    ElfImage,
    Symbol,
    SymbolTable,
)
from ..errors import NotFoundError, ParseError

__all__ = ["ElfSymbol", "BinaryImage", "resolve_binary", "ld_cache_entries", "LIBRARY_DIRS"]
__all__ += ["STT_FUNC", "STT_GNU_IFUNC", "STB_LOCAL", "STB_GLOBAL", "STB_WEAK"]

ElfSymbol = Symbol  # the reader's symbol (name, value, size, type, bind, defined, table, version)


class BinaryImage(SymbolTable):
    """The symbol table of an ELF executable or shared object, as uprobes need it
    (bpfkit.elf.reader.SymbolTable: one reader, one address rule, one version rule).

    :meth:`cached` shares one parsed image per file (attaching many probes in libc parses
    its symbol tables once, not once per probe or per Executable)."""

    _CACHE: ClassVar[dict[str, tuple[tuple[int, int, int, int], BinaryImage]]] = {}
    _CACHE_SIZE = 16

    @classmethod
    def cached(cls, path: str) -> BinaryImage:
        """The image of ``path``, parsed again only when the file changed (device, inode,
        size or mtime differ) since it was last parsed."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise NotFoundError(f"binary {path} does not exist") from None
        except OSError:
            return cls(path)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = cls._CACHE.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        image = cls(path)
        if len(cls._CACHE) >= cls._CACHE_SIZE:
            cls._CACHE.pop(next(iter(cls._CACHE)))
        cls._CACHE[path] = (key, image)
        return image

    def __init__(self, path: str) -> None:
        with open_binary(path) as image:
            elf = ElfImage(image, bounded=True)
            if elf.type not in (ET_EXEC, ET_DYN):
                raise ParseError(f"{path}: ELF type {elf.type} is neither an executable nor a shared object")
            super().__init__(elf)


# --------------------------------------------------------------------- library names
def _multiarch() -> str:
    machine = platform.machine()
    return {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "riscv64": "riscv64-linux-gnu"}.get(
        machine, f"{machine}-linux-gnu"
    )


LIBRARY_DIRS = (
    f"/lib/{_multiarch()}",
    f"/usr/lib/{_multiarch()}",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
)

LD_SO_CACHE = "/etc/ld.so.cache"
_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
# flags of a cache entry: FLAG_ELF_LIBC6 (3) with the arch's "required" bits (sysdeps
# dl-cache.h): x86-64 0x0300, aarch64 0x0a00, riscv64 (lp64d) 0x1000.
_ARCH_FLAGS = {"x86_64": 0x0303, "aarch64": 0x0A03, "riscv64": 0x1003}


def parse_ld_cache(data: bytes) -> list[tuple[str, str, int]]:
    """(library name, path, flags) of every entry of an ld.so.cache image, in cache order."""
    start = 0
    if data.startswith(_OLD_MAGIC):
        # Old format first ("ld.so-1.7.0", nlibs, 12-byte entries), new format after it,
        # aligned to 8 bytes; string offsets of the new format count from its header.
        (nlibs,) = struct.unpack_from("<I", data, 12)
        start = (16 + nlibs * 12 + 7) & ~7
    if data[start : start + len(_NEW_MAGIC)] != _NEW_MAGIC:
        raise ParseError(f"{LD_SO_CACHE}: unknown format")
    nlibs, _strlen = struct.unpack_from("<II", data, start + 20)
    entries = []
    base = start + 48
    for i in range(nlibs):
        off = base + i * 24
        if off + 24 > len(data):
            raise ParseError(f"{LD_SO_CACHE}: truncated at entry {i}")
        flags, key, value = struct.unpack_from("<iII", data, off)
        key_abs, value_abs = (key + start, value + start) if start else (key, value)
        name = data[key_abs : data.find(b"\0", key_abs)].decode(errors="replace")
        path = data[value_abs : data.find(b"\0", value_abs)].decode(errors="replace")
        entries.append((name, path, flags))
    return entries


@functools.cache
def ld_cache_entries() -> tuple[tuple[str, str], ...]:
    """(name, path) of the ld.so cache's libraries for this machine's ABI ('' when unreadable)."""
    try:
        with open(LD_SO_CACHE, "rb") as f:
            entries = parse_ld_cache(f.read())
    except (OSError, ParseError, struct.error):
        return ()
    want = _ARCH_FLAGS.get(platform.machine())
    return tuple((n, p) for n, p, fl in entries if want is None or fl == want)


def _library_candidates(name: str) -> list[str]:
    """libc -> [libc.so, libc.so.*]; libc.so.6 -> [libc.so.6]."""
    if ".so" in name:
        return [name]
    base = name if name.startswith("lib") else "lib" + name
    return [base + ".so", base + ".so.*"]


def _is_elf(path: str) -> bool:
    """True for a regular file starting with the ELF magic (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and is_elf(os.pread(fd, 4, 0))
    except OSError:
        return False
    finally:
        os.close(fd)


def _find_library(name: str) -> str | None:
    patterns = _library_candidates(name)
    # The ld.so cache lists the versioned names (libc.so.6), which is what programs load.
    for pattern in patterns:
        for entry, path in ld_cache_entries():
            if fnmatch.fnmatchcase(entry, pattern) and os.path.exists(path):
                return path
    for d in LIBRARY_DIRS:
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(d, pattern)))
            hits = [h for h in hits if _is_elf(h)]  # libc.so itself is a linker script
            if hits:
                return hits[0]
    return None


# Library names already resolved (libc -> its path): the ld.so cache scan costs milliseconds,
# and attaching many probes resolves the same name each time. Checked to exist on every use.
_RESOLVED: dict[str, str] = {}


def resolve_binary(name: str) -> str:
    """An absolute, existing path for a binary named like bpftrace accepts it.

    ``/usr/bin/bash`` or ``./a.out`` (anything with a ``/``) is taken as a path; ``libc``,
    ``libc.so.6`` or ``c`` ... are libraries looked up in the ld.so cache then the standard
    directories; anything else is looked up in $PATH first, then as a library.
    """
    if not name:
        raise ParseError("empty binary name")
    if "/" in name:
        path = os.path.abspath(name)
        if not os.path.exists(path):
            raise NotFoundError(f"binary {name} does not exist")
        return os.path.realpath(path)
    cached = _RESOLVED.get(name)
    if cached is not None and os.path.exists(cached):
        return cached
    looks_like_lib = name.startswith("lib") or ".so" in name
    if not looks_like_lib:
        found = shutil.which(name)
        if found:
            return os.path.realpath(found)
    lib = _find_library(name)
    if lib:
        _RESOLVED[name] = os.path.realpath(lib)
        return _RESOLVED[name]
    where = "the ld.so cache and " + ", ".join(LIBRARY_DIRS)
    if not looks_like_lib:
        where = "$PATH, " + where
    raise NotFoundError(f"binary {name!r} not found in {where}")
