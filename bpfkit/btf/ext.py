# SPDX-License-Identifier: Apache-2.0
""".BTF.ext: per-section func_info, line_info and CO-RE relocation records.

Layout (tools/lib/bpf/libbpf_internal.h, ``struct btf_ext_header``): magic, version, flags,
hdr_len, then (offset, length) pairs for func_info, line_info and, when hdr_len allows, CO-RE
relocations; offsets count from the end of the header. Each part starts with a u32 record
size, then blocks of ``{u32 sec_name_off; u32 num_info; records[num_info]}``. In an object
file ``insn_off`` is a *byte* offset into the ELF section; the kernel wants instruction
indexes into the final program, which the loader computes when it links programs.

Records are kept as tuples of u32 fields (rec_size / 4 of them), so records longer than bpfkit
knows (a newer compiler adding fields) pass through to the kernel unchanged.
"""

from __future__ import annotations

import struct

from .._record import FrozenRecord, SlottedRecord
from ..errors import ParseError
from .spec import BTF

__all__ = ["BTFExt", "InfoBlock", "CORERelo", "CORE_RELO_KINDS"]

_MAGIC = 0xEB9F
_HEADER = struct.Struct("<HBBIIIII")  # up to line_info_len: 24 bytes
_CORE = struct.Struct("<II")
_U32x2 = struct.Struct("<II")

FUNC_INFO_MIN = 8  # struct bpf_func_info: insn_off, type_id
LINE_INFO_MIN = 16  # struct bpf_line_info: insn_off, file_name_off, line_off, line_col
CORE_RELO_MIN = 16  # struct bpf_core_relo: insn_off, type_id, access_str_off, kind

# enum bpf_core_relo_kind
CORE_RELO_KINDS = {
    0: "field_byte_offset", 1: "field_byte_size", 2: "field_exists", 3: "field_signed",
    4: "field_lshift_u64", 5: "field_rshift_u64", 6: "type_id_local", 7: "type_id_target",
    8: "type_exists", 9: "type_size", 10: "enumval_exists", 11: "enumval_value",
    12: "type_matches",
}


# SlottedRecords (bpfkit._record), not dataclasses: the same repr, equality and hashing without
# generating methods at import (this module is on every `bpfkit load`'s path).
class InfoBlock(SlottedRecord):
    """func_info or line_info records of one ELF section: ``records[i][0]`` is insn_off (bytes)."""

    __slots__ = ("rec_size", "records")
    rec_size: int
    records: list[tuple[int, ...]]

    def __init__(self, rec_size: int, records: list[tuple[int, ...]]) -> None:
        self.rec_size = rec_size
        self.records = records


class CORERelo(FrozenRecord):
    """One CO-RE relocation (struct bpf_core_relo) in an ELF section."""

    __slots__ = ("insn_off", "type_id", "access", "kind")
    insn_off: int  # byte offset in the section
    type_id: int  # root type in the object's BTF
    access: str  # accessor spec, e.g. "0:1:2"
    kind: int  # enum bpf_core_relo_kind

    def __init__(self, insn_off: int, type_id: int, access: str, kind: int) -> None:
        self._set_fields(insn_off, type_id, access, kind)

    @property
    def kind_name(self) -> str:
        return CORE_RELO_KINDS.get(self.kind, f"kind {self.kind}")


class BTFExt(SlottedRecord):
    """A parsed .BTF.ext section: func_info, line_info and CO-RE relocations by ELF section."""

    __slots__ = ("func_info", "line_info", "core_relos")
    func_info: dict[str, InfoBlock]
    line_info: dict[str, InfoBlock]
    core_relos: dict[str, list[CORERelo]]

    def __init__(self, func_info: dict[str, InfoBlock], line_info: dict[str, InfoBlock],
                 core_relos: dict[str, list[CORERelo]]) -> None:
        self.func_info = func_info
        self.line_info = line_info
        self.core_relos = core_relos

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, btf: BTF) -> BTFExt:
        """Parse a .BTF.ext section; names and access strings are looked up in ``btf``."""
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ParseError(f".BTF.ext is {len(data)} bytes, shorter than its header")
        magic, version, _flags, hdr_len, fi_off, fi_len, li_off, li_len = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ParseError(f".BTF.ext has bad magic {magic:#06x}")
        if version != 1:
            raise ParseError(f".BTF.ext version {version} is not supported")
        if hdr_len < _HEADER.size or hdr_len > len(data):
            raise ParseError(f".BTF.ext header length {hdr_len} is invalid")
        body = data[hdr_len:]
        func_info = _info_blocks(body, fi_off, fi_len, FUNC_INFO_MIN, "func_info", btf)
        line_info = _info_blocks(body, li_off, li_len, LINE_INFO_MIN, "line_info", btf)
        core: dict[str, list[CORERelo]] = {}
        if hdr_len >= _HEADER.size + _CORE.size:
            cr_off, cr_len = _CORE.unpack_from(data, _HEADER.size)
            for sec, block in _info_blocks(body, cr_off, cr_len, CORE_RELO_MIN, "CO-RE relocation", btf).items():
                core[sec] = [
                    CORERelo(rec[0], rec[1], _string(btf, rec[2], "CO-RE access string"), rec[3])
                    for rec in block.records
                ]
        return cls(func_info, line_info, core)


def _string(btf: BTF, offset: int, what: str) -> str:
    try:
        return btf.strings.get(offset)
    except ParseError as exc:
        raise ParseError(f".BTF.ext {what}: {exc}") from None
    except ValueError:
        raise ParseError(f".BTF.ext {what} at {offset} is not NUL-terminated") from None


def _info_blocks(body: bytes, off: int, length: int, min_size: int, what: str, btf: BTF) -> dict[str, InfoBlock]:
    if length == 0:
        return {}
    if off + length > len(body) or length < 4:
        raise ParseError(f".BTF.ext {what} ({length} bytes at {off}) runs past the section")
    (rec_size,) = struct.unpack_from("<I", body, off)
    if rec_size < min_size or rec_size % 4:
        raise ParseError(f".BTF.ext {what} record size {rec_size} is invalid (at least {min_size}, a multiple of 4)")
    record = struct.Struct(f"<{rec_size // 4}I")
    pos, end = off + 4, off + length
    blocks: dict[str, InfoBlock] = {}
    while pos < end:
        if pos + 8 > end:
            raise ParseError(f".BTF.ext {what}: truncated block header")
        name_off, count = _U32x2.unpack_from(body, pos)
        pos += 8
        if pos + count * rec_size > end:
            raise ParseError(f".BTF.ext {what}: {count} records of {rec_size} bytes run past the end")
        section = _string(btf, name_off, f"{what} section name")
        records = [record.unpack_from(body, pos + i * rec_size) for i in range(count)]
        pos += count * rec_size
        if section in blocks:
            blocks[section].records.extend(records)
        else:
            blocks[section] = InfoBlock(rec_size, records)
    return blocks
