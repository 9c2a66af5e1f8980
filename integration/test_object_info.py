# SPDX-License-Identifier: Apache-2.0
"""Map.info() and Program.info() against the running kernel: typed MapInfo / ProgramInfo records
(issue #36 item 4) whose fields are plain Python values (no cffi object leaves bpfkit._kernel),
agreeing with what bpfkit made and with bpftool; and Map.dump_batches, the reader under
``bpfkit map dump``, on the map types whose lookups fail or whose slots are empty."""

from __future__ import annotations

import dataclasses
import enum
import errno
import json
import pickle
import shutil
import subprocess

import pytest

from bpfkit import Collection, asm, load_spec
from bpfkit._kernel import bpf as kbpf
from bpfkit._kernel.consts import MapType, ProgType
from bpfkit.errors import KernelError
from bpfkit.maps import Map, MapInfo, MapSpec
from bpfkit.program import Program, ProgramInfo, ProgramSpec

PLAIN = (int, str, bytes, bool, tuple, enum.Enum)


def plain_fields(record: MapInfo | ProgramInfo) -> dict[str, object]:
    """The record's fields, each checked to be a plain Python value (not a cffi object)."""
    fields = {name: getattr(record, name) for name in record.__slots__}
    for name, value in fields.items():
        assert isinstance(value, PLAIN) and "cffi" not in type(value).__module__, (name, type(value))
    return fields


def test_map_info_is_a_typed_record() -> None:
    spec = MapSpec(name="info_hash", type=MapType.HASH, key_size=4, value_size=8, max_entries=16)
    with Map(spec) as m:
        info = m.info()
        assert type(info) is MapInfo
        fields = plain_fields(info)
        assert info.type is MapType.HASH and info.type_name == "hash"
        assert (info.name, info.key_size, info.value_size, info.max_entries, info.map_flags) == \
            ("info_hash", 4, 8, 16, 0)
        assert info.id == m.id > 0 and info.btf_id == 0 and info.map_extra == 0
        assert set(fields) >= {"btf_key_type_id", "btf_value_type_id", "btf_vmlinux_value_type_id", "ifindex"}
        # A frozen record: equal and hashed by value, not assignable, picklable.
        assert m.info() == info and hash(m.info()) == hash(info)
        with pytest.raises(AttributeError):
            info.max_entries = 1  # type: ignore[misc]
        assert pickle.loads(pickle.dumps(info)) == info
        with Map.from_id(info.id) as again:
            assert again.info() == info and again.name == "info_hash" and again.type is MapType.HASH


def test_map_info_of_a_btf_typed_map(bpf_obj) -> None:
    with Collection(load_spec(bpf_obj("map_dump"))) as coll:
        m = coll.maps["recs"]
        info = m.info()
        plain_fields(info)
        assert info.btf_id and info.btf_key_type_id == m.spec.btf_key_type_id != 0
        assert info.btf_value_type_id == m.spec.btf_value_type_id != 0
        rodata = next(mp for name, mp in coll.maps.items() if name.endswith(".rodata"))
        assert rodata.info().map_flags & 0x80  # BPF_F_RDONLY_PROG: libbpf's flags for .rodata


def test_program_info_is_a_typed_record() -> None:
    counts = Map(MapSpec(name="info_counts", type=MapType.ARRAY, key_size=4, value_size=8, max_entries=1))
    spec = ProgramSpec(name="info_prog", type=ProgType.SOCKET_FILTER, instructions=asm.count_in_array(counts.fd.raw))
    with counts, Program(spec) as prog:
        info = prog.info()
        assert type(info) is ProgramInfo
        plain_fields(info)
        assert info.type is ProgType.SOCKET_FILTER and info.type_name == "socket_filter"
        assert info.name == "info_prog" and info.id == prog.id > 0
        assert info.map_ids == (counts.id,) and info.nr_map_ids == 1  # the ids themselves
        assert isinstance(info.tag, bytes) and len(info.tag) == 8 and info.tag != bytes(8)
        assert info.gpl_compatible is True  # ProgramSpec's license is GPL
        assert info.xlated_prog_len >= len(spec.instructions) and info.jited_prog_len >= 0  # the verifier may inline
        assert info.btf_id == 0 and info.nr_func_info == 0  # no BTF given
        with Program.from_id(info.id) as again:
            assert again.name == "info_prog" and again.type is ProgType.SOCKET_FILTER
            assert again.info().tag == info.tag and again.info().map_ids == info.map_ids
        if shutil.which("bpftool"):
            out = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(info.id)], capture_output=True, text=True,
                                 check=False)
            if out.returncode == 0:
                shown = json.loads(out.stdout)
                assert (shown["tag"], shown["gpl_compatible"]) == (info.tag.hex(), True)
                assert shown.get("map_ids", []) == list(info.map_ids)


def test_program_info_with_btf_and_stats(bpf_obj) -> None:
    with Collection(load_spec(bpf_obj("loader_calls")), programs=["calls_a"]) as coll:
        prog = coll.programs["calls_a"]
        info = prog.info()
        assert info.btf_id and info.nr_func_info == len(prog.spec.functions) and info.func_info_rec_size == 8
        assert info.type is ProgType.XDP and isinstance(info.run_cnt, int) and isinstance(info.verified_insns, int)
        assert info.map_ids == tuple(kbpf.prog_map_ids(prog.fd))


def test_dataclasses_helpers_are_not_needed_for_records() -> None:
    """The records are slotted FrozenRecords (bpfkit._record), not dataclasses: asdict-like
    use goes through __slots__, and the repr names every field."""
    info = MapInfo(MapType.ARRAY, 7, 4, 4, 1, 0, "x")
    assert not dataclasses.is_dataclass(info)
    assert repr(info).startswith("MapInfo(type=<MapType.ARRAY: 2>, id=7, key_size=4") and "map_extra=0" in repr(info)
    assert MapInfo(9999, 1, 4, 4, 1, 0, "x").type_name == "type 9999"


# ------------------------------------------------------------------ Map.dump_batches
def test_dump_batches_reports_failed_lookups_and_leaves_out_empty_id_slots() -> None:
    """An empty devmap slot comes as its own entry with ENOENT; an xskmap's lookups with
    EOPNOTSUPP; a prog array's empty slots are left out (as bpftool prints them)."""
    prog = Program(ProgramSpec(name="dump_p", type=ProgType.SOCKET_FILTER, instructions=asm.return_imm(0)))
    dev = Map(MapSpec(name="dump_dev", type=MapType.DEVMAP, key_size=4, value_size=4, max_entries=3))
    jumps = Map(MapSpec(name="dump_jumps", type=MapType.PROG_ARRAY, key_size=4, value_size=4, max_entries=4))
    xsk = Map(MapSpec(name="dump_xsk", type=MapType.XSKMAP, key_size=4, value_size=4, max_entries=2))
    with prog, dev, jumps, xsk:
        dev.update(1, 1)  # ifindex 1: lo
        entries = list(dev.dump_batches())
        assert [(k, err) for k, _, n, err in entries for _ in range(n)] == \
            [(b"\0\0\0\0", errno.ENOENT), (b"\1\0\0\0", 0), (b"\2\0\0\0", errno.ENOENT)]
        assert [v for _, v, _, err in entries if not err] == [b"\1\0\0\0"]
        jumps.update(2, prog)
        assert list(jumps.dump_batches()) == [(b"\2\0\0\0", prog.id.to_bytes(4, "little"), 1, 0)]
        assert [(k, v, err) for k, v, _, err in xsk.dump_batches()] == \
            [(b"\0\0\0\0", b"", errno.EOPNOTSUPP), (b"\1\0\0\0", b"", errno.EOPNOTSUPP)]
        with pytest.raises(KernelError, match=r"^lookup in map 'dump_xsk': BPF_MAP_LOOKUP_ELEM: EOPNOTSUPP"):
            list(xsk.raw_batches())  # the API's readers raise where the dump reports


def test_dump_batches_batches_as_raw_batches() -> None:
    with Map(MapSpec(name="dump_hash", type=MapType.HASH, key_size=4, value_size=8, max_entries=600)) as m:
        m.update_batch([(i, i * 7) for i in range(500)])
        dumped = [(k, v, n) for k, v, n, err in m.dump_batches(128) if not err]
        assert sum(n for _, _, n in dumped) == 500 and len(dumped) >= 4
        assert dumped == list(m.raw_batches(128))
