# SPDX-License-Identifier: Apache-2.0
"""Object info: what BPF_OBJ_GET_INFO_BY_FD reports about a map or a program, as typed records.

:class:`MapInfo` and :class:`ProgramInfo` hold the fields of ``struct bpf_map_info`` and
``struct bpf_prog_info`` (include/uapi/linux/bpf.h) under their UAPI names, decoded here so that
no cffi object leaves ``bpfkit._kernel``: ``name`` is a str, ``tag`` bytes, ``type`` a
MapType/ProgType (a plain int for a type newer than bpfkit), ``gpl_compatible`` a bool. The
kernel's user-space pointers (``jited_prog_insns``, ``func_info``, ...) are left out: they are
buffers a caller lends, not facts. ``ProgramInfo.map_ids`` holds the ids themselves, read with
a second call sized by the first (``nr_map_ids``), as libbpf's callers and bpftool do.

A kernel older than a field reports it 0: it copies only the part of the struct it knows
(kernel/bpf/syscall.c bpf_check_uarg_tail_zero and the ``info_len`` it writes back).
"""

from __future__ import annotations

from .._record import FrozenRecord
from ..errors import BPFKitError
from . import bpf as _bpf
from .abi import ffi
from .consts import MapType, ProgType
from .fd import FD

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    Info = TypeVar("Info", "MapInfo", "ProgramInfo")

__all__ = ["MapInfo", "ProgramInfo", "map_info", "program_info", "object_id", "read_adopted"]


def _name(raw: object) -> str:
    text: str = ffi.string(raw).decode(errors="replace")
    return text


class MapInfo(FrozenRecord):
    """A map as the kernel describes it (``struct bpf_map_info``: the BTF ids since 4.18,
    ``map_extra`` since 5.16). Frozen, compared and hashed by value."""

    __slots__ = ("type", "id", "key_size", "value_size", "max_entries", "map_flags", "name", "ifindex",
                 "btf_vmlinux_value_type_id", "netns_dev", "netns_ino", "btf_id", "btf_key_type_id",
                 "btf_value_type_id", "btf_vmlinux_id", "map_extra")
    type: MapType | int
    id: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    name: str  # the kernel's copy: at most 15 bytes
    ifindex: int  # offloaded maps: the device
    btf_vmlinux_value_type_id: int  # struct_ops maps: the value's type in vmlinux BTF
    netns_dev: int
    netns_ino: int
    btf_id: int  # the BTF object the key and value types are in (0: none)
    btf_key_type_id: int
    btf_value_type_id: int
    btf_vmlinux_id: int
    map_extra: int  # bloom filters: the hash count; arenas: the user address

    def __init__(self, type: MapType | int, id: int, key_size: int, value_size: int, max_entries: int,
                 map_flags: int, name: str, ifindex: int = 0, btf_vmlinux_value_type_id: int = 0,
                 netns_dev: int = 0, netns_ino: int = 0, btf_id: int = 0, btf_key_type_id: int = 0,
                 btf_value_type_id: int = 0, btf_vmlinux_id: int = 0, map_extra: int = 0) -> None:
        self._set_fields(type, id, key_size, value_size, max_entries, map_flags, name, ifindex,
                         btf_vmlinux_value_type_id, netns_dev, netns_ino, btf_id, btf_key_type_id,
                         btf_value_type_id, btf_vmlinux_id, map_extra)

    @property
    def type_name(self) -> str:
        """``hash``, ``ringbuf``, ... (``type 42`` for a type newer than bpfkit)."""
        return self.type.kernel_name if isinstance(self.type, MapType) else f"type {self.type}"


class ProgramInfo(FrozenRecord):
    """A loaded program as the kernel describes it (``struct bpf_prog_info``). ``run_time_ns``
    and ``run_cnt`` count only while stats are enabled (BPF_ENABLE_STATS or
    kernel.bpf_stats_enabled, 5.1); ``verified_insns`` is reported since 5.16.
    Frozen, compared and hashed by value."""

    __slots__ = ("type", "id", "tag", "jited_prog_len", "xlated_prog_len", "load_time", "created_by_uid",
                 "nr_map_ids", "map_ids", "name", "ifindex", "gpl_compatible", "netns_dev", "netns_ino",
                 "nr_jited_ksyms", "nr_jited_func_lens", "btf_id", "func_info_rec_size", "nr_func_info",
                 "nr_line_info", "nr_jited_line_info", "line_info_rec_size", "jited_line_info_rec_size",
                 "nr_prog_tags", "run_time_ns", "run_cnt", "recursion_misses", "verified_insns",
                 "attach_btf_obj_id", "attach_btf_id")
    type: ProgType | int
    id: int
    tag: bytes  # 8 bytes: the hash of the instructions (bpftool prints it in hex)
    jited_prog_len: int
    xlated_prog_len: int
    load_time: int  # ns since boot
    created_by_uid: int
    nr_map_ids: int
    map_ids: tuple[int, ...]  # the maps the program uses
    name: str  # the kernel's copy: at most 15 bytes
    ifindex: int
    gpl_compatible: bool
    netns_dev: int
    netns_ino: int
    nr_jited_ksyms: int
    nr_jited_func_lens: int
    btf_id: int  # the program's BTF object (0: loaded without BTF)
    func_info_rec_size: int
    nr_func_info: int
    nr_line_info: int
    nr_jited_line_info: int
    line_info_rec_size: int
    jited_line_info_rec_size: int
    nr_prog_tags: int
    run_time_ns: int
    run_cnt: int
    recursion_misses: int
    verified_insns: int
    attach_btf_obj_id: int
    attach_btf_id: int

    def __init__(self, type: ProgType | int, id: int, tag: bytes, jited_prog_len: int, xlated_prog_len: int,
                 load_time: int, created_by_uid: int, nr_map_ids: int, map_ids: tuple[int, ...], name: str,
                 ifindex: int = 0, gpl_compatible: bool = False, netns_dev: int = 0, netns_ino: int = 0,
                 nr_jited_ksyms: int = 0, nr_jited_func_lens: int = 0, btf_id: int = 0,
                 func_info_rec_size: int = 0, nr_func_info: int = 0, nr_line_info: int = 0,
                 nr_jited_line_info: int = 0, line_info_rec_size: int = 0, jited_line_info_rec_size: int = 0,
                 nr_prog_tags: int = 0, run_time_ns: int = 0, run_cnt: int = 0, recursion_misses: int = 0,
                 verified_insns: int = 0, attach_btf_obj_id: int = 0, attach_btf_id: int = 0) -> None:
        self._set_fields(type, id, tag, jited_prog_len, xlated_prog_len, load_time, created_by_uid, nr_map_ids,
                         map_ids, name, ifindex, gpl_compatible, netns_dev, netns_ino, nr_jited_ksyms,
                         nr_jited_func_lens, btf_id, func_info_rec_size, nr_func_info, nr_line_info,
                         nr_jited_line_info, line_info_rec_size, jited_line_info_rec_size, nr_prog_tags,
                         run_time_ns, run_cnt, recursion_misses, verified_insns, attach_btf_obj_id, attach_btf_id)

    @property
    def type_name(self) -> str:
        """``xdp``, ``tracepoint``, ... (``type 42`` for a type newer than bpfkit)."""
        return self.type.kernel_name if isinstance(self.type, ProgType) else f"type {self.type}"


def _map_type(value: int) -> MapType | int:
    try:
        return MapType(value)
    except ValueError:
        return value


def _prog_type(value: int) -> ProgType | int:
    try:
        return ProgType(value)
    except ValueError:
        return value


def map_info(fd: FD | int) -> MapInfo:
    """The map ``fd`` as the kernel describes it."""
    r = _bpf.obj_info(fd, "struct bpf_map_info")
    return MapInfo(_map_type(r.type), r.id, r.key_size, r.value_size, r.max_entries, r.map_flags, _name(r.name),
                   r.ifindex, r.btf_vmlinux_value_type_id, r.netns_dev, r.netns_ino, r.btf_id, r.btf_key_type_id,
                   r.btf_value_type_id, r.btf_vmlinux_id, r.map_extra)


def program_info(fd: FD | int, *, with_map_ids: bool = True) -> ProgramInfo:
    """The program ``fd`` as the kernel describes it, with the ids of the maps it uses (asked
    for again, sized by the first answer, when it uses any; ``with_map_ids=False``: one call,
    ``map_ids`` left empty)."""
    r = _bpf.obj_info(fd, "struct bpf_prog_info")
    map_ids = tuple(_bpf.prog_map_ids(fd)) if r.nr_map_ids and with_map_ids else ()
    return ProgramInfo(_prog_type(r.type), r.id, bytes(ffi.buffer(r.tag)), r.jited_prog_len, r.xlated_prog_len,
                       r.load_time, r.created_by_uid, r.nr_map_ids, map_ids, _name(r.name), r.ifindex,
                       bool(r._bits_gpl_compatible & 1), r.netns_dev, r.netns_ino, r.nr_jited_ksyms,
                       r.nr_jited_func_lens, r.btf_id, r.func_info_rec_size, r.nr_func_info, r.nr_line_info,
                       r.nr_jited_line_info, r.line_info_rec_size, r.jited_line_info_rec_size, r.nr_prog_tags,
                       r.run_time_ns, r.run_cnt, r.recursion_misses, r.verified_insns, r.attach_btf_obj_id,
                       r.attach_btf_id)


def read_adopted(fd: FD, read: Callable[[FD], Info]) -> Info:
    """``read(fd)`` for a constructor adopting ``fd`` (Map.from_fd, Program.from_fd): on
    failure the fd, which the caller handed over, is closed."""
    try:
        return read(fd)
    except BPFKitError:
        fd.close()
        raise


def object_id(fd: FD | int, kind: str) -> int:
    """The id of the map or program (``kind`` "map" or "prog") ``fd``: one call, no record."""
    return int(_bpf.obj_info(fd, f"struct bpf_{kind}_info").id)
