# SPDX-License-Identifier: Apache-2.0
"""ELF objects -> CollectionSpec (bpfkit.load_spec): pure parsing of the objects in bpf/."""

from __future__ import annotations

import struct

import pytest

import bpfkit
from bpfkit._kernel.consts import AttachType, MapFlag, MapType, ProgType
from bpfkit.errors import UsageError
from bpfkit.maps import PinType
from bpfkit.program import RefKind
from bpfkit.spec.from_elf import internal_map_name

CALL, LDDW = 0x85, 0x18


def insns(prog):
    return [struct.unpack_from("<BBhi", prog.instructions, i) for i in range(0, len(prog.instructions), 8)]


def test_minimal(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("minimal"))
    assert spec.name == "minimal" and spec.license == "Dual BSD/GPL" and spec.kernel_version == 0
    prog = spec.programs["count_getppid"]
    assert prog.type == ProgType.TRACEPOINT and prog.attach_type is None
    assert prog.section == "tracepoint/syscalls/sys_enter_getppid"
    assert prog.attach_to == "syscalls/sys_enter_getppid"
    assert prog.license == "Dual BSD/GPL" and prog.autoload
    hits = spec.maps["hits"]
    assert (hits.type, hits.key_size, hits.value_size, hits.max_entries) == (MapType.ARRAY, 4, 8, 1)
    assert spec.btf.type_by_id(hits.btf_key_type_id).name == "__u32"
    assert spec.btf.type_by_id(hits.btf_value_type_id).name == "__u64"
    rodata = spec.maps[".rodata"]
    assert rodata.kernel_name == "minimal.rodata" and rodata.freeze
    assert rodata.flags == MapFlag.RDONLY_PROG | MapFlag.MMAPABLE
    refs = {(r.map, r.kind) for r in prog.references}
    assert refs == {("hits", RefKind.MAP_FD), (".rodata", RefKind.MAP_VALUE)}
    for ref in prog.references:
        assert insns(prog)[ref.insn][0] == LDDW


def test_from_bytes_has_no_object_name(bpf_obj):
    data = bpf_obj("minimal").read_bytes()
    spec = bpfkit.load_spec(data)
    assert spec.name == "" and spec.maps[".rodata"].kernel_name == ".rodata"
    assert bpfkit.load_spec(memoryview(data), name="x").maps[".rodata"].kernel_name == "x.rodata"


def test_global_data_and_variables(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_basic"))
    maps = spec.maps
    assert {".rodata", ".data", ".bss", ".data.custom", ".rodata.custom"} <= set(maps)
    assert maps[".bss"].data == bytes(maps[".bss"].value_size)
    assert maps[".data"].flags == MapFlag.MMAPABLE and not maps[".data"].freeze
    assert maps[".rodata.custom"].freeze and maps[".rodata.custom"].flags & MapFlag.RDONLY_PROG
    # libbpf's names: object prefix for the classic sections, none for custom ones.
    assert maps[".data"].kernel_name == "loader_b.data"
    assert maps[".data.custom"].kernel_name == ".data.custom"
    v = spec.variables
    assert v["magic"].value == 0x1122334455667788 and v["magic"].constant
    assert v["bias"].value == -5 and v["bias"].type_name == "const volatile __s32"
    assert v["data_counter"].value == 40 and v["data_counter"].section == ".data"
    assert v["data_array"].value == struct.pack("<4I", 1, 2, 3, 4)
    assert v["custom_value"].value == 7 and v["custom_const"].value == 9
    assert v["seq"].static and v["seq"].section == ".bss"
    v["target_tgid"].value = 4242
    v["bias"].set(-100)
    v["data_array"].value = struct.pack("<4I", 9, 9, 9, 9)
    rodata = maps[".rodata"].data
    assert struct.unpack_from("<I", rodata, v["target_tgid"].offset)[0] == 4242
    assert struct.unpack_from("<i", rodata, v["bias"].offset)[0] == -100
    assert v["target_tgid"].get() == 4242
    with pytest.raises(UsageError, match=r"got 1099511627776 \(out of range\)"):
        v["target_tgid"].value = 1 << 40
    with pytest.raises(UsageError, match="is 16 bytes"):
        v["data_array"].value = b"\0"
    with pytest.raises(UsageError, match="cannot set"):
        v["magic"].value = "text"


def test_ring_buffer_and_autoload(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_basic"))
    events = spec.maps["events"]
    assert (events.type, events.key_size, events.value_size, events.max_entries) == (MapType.RINGBUF, 0, 0, 16384)
    counts = spec.maps["counts"]
    assert counts.flags == 1 and counts.type == MapType.HASH
    results = spec.maps["results"]  # key_size/value_size given as numbers, no BTF types
    assert (results.key_size, results.value_size, results.btf_key_type_id) == (4, 8, 0)
    assert spec.programs["xdp_globals"].attach_type == AttachType.XDP
    bad = bpfkit.load_spec(bpf_obj("loader_bad"))
    assert not bad.programs["xdp_bad"].autoload and bad.programs["xdp_good"].autoload


def test_subprograms_are_linked(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_calls"))
    a = spec.programs["calls_a"]
    names = [name for name, _ in a.functions]
    assert names[0] == "calls_a" and set(names[1:]) == {"sum_of_squares", "global_add", "square"}
    starts = dict(a.functions)
    # Every bpf-to-bpf call lands on the start of a placed function.
    targets = set()
    for i, (code, regs, _, imm) in enumerate(insns(a)):
        if code == CALL and regs >> 4 == 1:
            targets.add(i + imm + 1)
    assert targets == {starts["sum_of_squares"], starts["global_add"], starts["square"]}
    # func_info: one record per function, at its start, sorted.
    recs = [struct.unpack_from("<II", a.func_info, i) for i in range(0, len(a.func_info), 8)]
    assert [r[0] for r in recs] == sorted(starts.values())
    assert {spec.btf.type_by_id(r[1]).name for r in recs} == set(names)
    lines = [struct.unpack_from("<I", a.line_info, i)[0] for i in range(0, len(a.line_info), 16)]
    assert lines == sorted(lines) and lines[0] == 0 and lines[-1] < a.insn_count
    # calls_b shares square/global_add but gets its own copies.
    assert {n for n, _ in spec.programs["calls_b"].functions} == {"calls_b", "square", "global_add"}


def test_callbacks_become_pseudo_func(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_calls"))
    cb = spec.programs["callbacks"]
    starts = dict(cb.functions)
    funcs = [(i, imm) for i, (code, regs, _, imm) in enumerate(insns(cb)) if code == LDDW and regs >> 4 == 4]
    assert {i + imm + 1 for i, imm in funcs} == {starts["loop_cb"], starts["elem_cb"]}


def test_map_in_map_and_prog_array_values(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_mapinmap"))
    outer = spec.maps["outer_array"]
    assert outer.type == MapType.ARRAY_OF_MAPS and outer.value_size == 4
    assert outer.inner is not None and outer.inner.type == MapType.ARRAY and outer.inner.value_size == 8
    assert outer.contents == [(0, "inner_a"), (2, "inner_b")]
    assert spec.maps["outer_hash"].contents == [(1, "inner_b")]
    assert spec.maps["outer_hash"].inner.max_entries == 1
    jt = spec.maps["jump_table"]
    assert jt.type == MapType.PROG_ARRAY and (jt.key_size, jt.value_size) == (4, 4)
    assert jt.contents == [(0, "tail_one"), (3, "tail_two")]


def test_legacy_maps_and_version(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_legacy"))
    h = spec.maps["legacy_hash"]
    assert (h.type, h.key_size, h.value_size, h.max_entries, h.btf_value_type_id) == (MapType.HASH, 4, 8, 16, 0)
    assert spec.kernel_version == 0xFFFFFFFE
    assert spec.programs["old_kprobe"].needs_kernel_version
    assert spec.programs["old_kprobe"].attach_to == "do_sys_openat2"
    assert not spec.programs["count_len"].needs_kernel_version
    assert spec.programs["count_len"].type == ProgType.SOCKET_FILTER


def test_iproute2_elf_maps(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_elfmap"))
    outer = spec.maps["elf_outer"]
    assert outer.type == MapType.ARRAY_OF_MAPS and outer.inner.name == "elf_inner"
    assert outer.contents == [(0, "elf_inner")]
    assert spec.programs["tc_count"].type == ProgType.SCHED_CLS


def test_pinning_attribute(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_pin"))
    assert spec.maps["loader_pinned_counter"].pinning == PinType.BY_NAME
    assert spec.maps["private_counter"].pinning == PinType.NONE


def test_core_relocations_are_recorded(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_core"))
    prog = spec.programs["core_getppid"]
    assert prog.core_relos
    insn, relo = prog.core_relos[0]
    assert 0 <= insn < prog.insn_count and relo.kind_name == "field_byte_offset"


def test_spec_copy_is_independent(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("loader_basic"))
    clone = spec.copy()
    clone.variables["magic"].value = 1
    clone.maps["counts"].max_entries = 7
    assert spec.variables["magic"].value == 0x1122334455667788
    assert spec.maps["counts"].max_entries == 64
    assert clone.variables["magic"].map_spec is clone.maps[".rodata"]


@pytest.mark.parametrize(
    "obj, section, expected",
    [
        ("prog", ".rodata", "prog.rodata"),
        ("my_object_name", ".rodata", "my_objec.rodata"),
        ("my_object_name", ".bss", "my_objec.bss"),
        ("my_object_name", ".kconfig", "my_obje.kconfig"),
        ("x", ".rodata.abracadabra", ".rodata.abracad"),
        ("x", ".data.custom", ".data.custom"),
        ("a-b", ".data", "a_b.data"),
    ],
)
def test_internal_map_names_follow_libbpf(obj, section, expected):
    assert internal_map_name(obj, section) == expected
