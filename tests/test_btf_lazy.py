# SPDX-License-Identifier: Apache-2.0
"""Lazy BTF parsing (kernel BTF), name and flavor lookups, split BTF on a lazy base, and
reading BTF from files (bpfkit.btf.spec, bpfkit.kernel_btf). Pure: the vmlinux tests read
/sys/kernel/btf/vmlinux as a file and skip without it."""

from __future__ import annotations

import gc
import os
import struct

import pytest

from bpfkit.btf import BTF, Int, IntEncoding, Kind, Member, Pointer, Struct
from bpfkit import kernel_btf
from bpfkit.btf.spec import essential_name
from bpfkit.elf import ElfFile
from bpfkit.errors import ParseError

VMLINUX = "/sys/kernel/btf/vmlinux"
needs_vmlinux = pytest.mark.skipif(not os.path.exists(VMLINUX), reason="no kernel BTF")


def object_btf_bytes(path) -> bytes:
    return bytes(ElfFile(open(path, "rb").read()).by_name[".BTF"].data)


@pytest.mark.parametrize("name, essential", [
    ("task_struct", "task_struct"), ("task_struct___old", "task_struct"), ("a___b___c", "a___b"),
    ("x____y", "x____y"), ("__x___y", "__x"), ("___", "___"), ("a___", "a___"), ("", ""),
])
def test_essential_name(name, essential):
    assert essential_name(name) == essential


def test_lazy_and_eager_parses_agree(bpf_obj):
    raw = object_btf_bytes(bpf_obj("core_task"))
    eager, lazy = BTF.from_bytes(raw), BTF.from_bytes(raw, lazy=True)
    assert lazy.lazy and not eager.lazy and len(lazy) == len(eager)
    assert [repr(t) for t in lazy.types] == [repr(t) for t in eager.types]
    for name in ("task_struct", "core_result", "bpf_func_id"):
        assert [t.id for t in lazy.find(name)] == [t.id for t in eager.find(name)]
    assert lazy.to_bytes() == raw
    flavors = sorted(t.name for t in lazy.find_flavors("task_struct"))
    assert flavors == sorted(t.name for t in eager.find_flavors("task_struct"))
    assert flavors == ["task_struct", "task_struct___fake", "task_struct___n", "task_struct___o"]


@needs_vmlinux
def test_vmlinux_lazy_lookups():
    data = open(VMLINUX, "rb").read()
    btf = BTF.from_bytes(data, lazy=True, name="vmlinux")
    task = btf.lookup("task_struct", Kind.STRUCT)
    assert isinstance(task, Struct) and task.member("pid") is not None
    assert btf.size_of(task.member("pid").type) == 4
    assert [t.id for t in btf.find_flavors("task_struct")] == [task.id]
    # A decoded type is decoded once.
    assert btf.types[task.id] is task
    assert btf.find("no_such_type_anywhere") == []
    assert "vmlinux" in repr(btf)


@needs_vmlinux
def test_kernel_btf_is_cached_and_files_load():
    first = kernel_btf.vmlinux()
    assert kernel_btf.vmlinux() is first and first.lazy and first.name == "vmlinux"
    again = kernel_btf.load_file(VMLINUX)
    assert again is not first and len(again) == len(first)


def test_btf_from_elf_file(bpf_obj):
    btf = kernel_btf.load_file(bpf_obj("core_task"))
    assert btf.lookup("core_result").size > 0


def test_load_file_refuses_other_files(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello world")
    with pytest.raises(ParseError, match="neither a BTF blob nor an ELF"):
        kernel_btf.load_file(junk)


def _base() -> BTF:
    base = BTF()
    u32 = base.add(Int(0, "u32", 4, IntEncoding.NONE, 0, 32))
    base.add(Struct(0, "shared", 4, [Member("x", u32, 0)]))
    return BTF.from_bytes(base.to_bytes(), lazy=True, name="base")


def test_split_btf_on_a_lazy_base():
    base = _base()
    split = BTF(base=base, name="mod")
    u32 = base.lookup("u32").id
    mine = split.add(Struct(0, "mod_thing", 8, [Member("a", u32, 0), Member("b", u32, 32)]))
    split.add(Struct(0, "shared___mod", 4, [Member("x", u32, 0)]))
    parsed = BTF.from_bytes(split.to_bytes(), base=base, lazy=True, name="mod")
    assert parsed.first_id == len(base) and parsed.lookup("mod_thing").id == mine
    # own_only: only the module's own types (what CO-RE and ksym lookups search).
    assert [t.name for t in parsed.find_flavors("shared")] == ["shared___mod"]
    assert [t.name for t in parsed.find_flavors("shared", own_only=False)] == ["shared", "shared___mod"]
    assert parsed.find("u32", own_only=True) == [] and parsed.find("u32")[0].id == u32
    assert parsed.types[u32] is base.types[u32]


def test_lazy_parse_reports_bad_types_when_used():
    btf = BTF()
    btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    btf.add(Pointer(0, "", 1))
    blob = bytearray(btf.to_bytes())
    struct.pack_into("<I", blob, 24 + 16 + 8, 77)  # the pointer now points at type 77
    lazy = BTF.from_bytes(bytes(blob), lazy=True)
    assert lazy.types[1].name == "int"
    with pytest.raises(ParseError, match="refers to type 77"):
        lazy.types[2]
    with pytest.raises(ParseError, match="refers to type 77"):
        BTF.from_bytes(bytes(blob))
    with pytest.raises(ParseError, match="unknown kind 31"):
        struct.pack_into("<I", blob, 24 + 4, 31 << 24)
        BTF.from_bytes(bytes(blob), lazy=True)


def test_adding_to_a_lazy_btf_keeps_lookups_and_decoding(bpf_obj):
    btf = BTF.from_bytes(object_btf_bytes(bpf_obj("core_task")), lazy=True)
    u32 = btf.lookup("__u32").id
    new = btf.add(Struct(0, "added_later", 4, [Member("x", u32, 0)]))
    assert btf.lookup("added_later").id == new
    assert btf.lookup("core_result").size > 0  # still decodes untouched types
    assert [t.name for t in btf.find_flavors("added_later")] == ["added_later"]


def test_batched_flavor_search_agrees_with_one_by_one(bpf_obj):
    """find_flavors_many (one pass over the strings, what a CO-RE load's prefetch does) finds
    what find_flavors finds name by name: exact names, ___flavors, names that are prefixes of
    others, missing names; lazily and eagerly."""
    raw = object_btf_bytes(bpf_obj("core_task"))
    names = ["task_struct", "task", "core_result", "no_such_name", "bpf_func_id", "task_struct___o"]
    for btf in (BTF.from_bytes(raw), BTF.from_bytes(raw, lazy=True)):
        many = btf.find_flavors_many(names)
        assert {n: [t.id for t in many[n]] for n in names} == {n: [t.id for t in btf.find_flavors(n)] for n in names}
        assert sorted(t.name for t in many["task_struct"]) == ["task_struct", "task_struct___fake", "task_struct___n", "task_struct___o"]
        assert many["no_such_name"] == [] and many["task"] == []


def test_a_flavored_name_is_not_its_own_essential_name(bpf_obj):
    """find_flavors_many("task_struct___o") finds the types whose essential name is
    "task_struct___o" (none in core_task; "a___o___x" for "a___o"), not the type called
    that: lazy and full parses agree, through the few-names search and the one-pass one."""
    raw = object_btf_bytes(bpf_obj("core_task"))
    few, many = ["task_struct___o"], ["task_struct___o", "task_struct", "core_result", "bpf_func_id"]
    for btf in (BTF.from_bytes(raw), BTF.from_bytes(raw, lazy=True)):
        assert btf.find_flavors_many(few)["task_struct___o"] == []
        assert btf.find_flavors_many(many)["task_struct___o"] == []
        assert btf.find_flavors_many(many, kinds=[Kind.STRUCT])["task_struct___o"] == []
        assert btf.find_flavors("task_struct___o") == []
        assert len(btf.find_flavors_many(many)["task_struct"]) == 4
    made = BTF()
    u32 = made.add(Int(0, "u32", 4, IntEncoding.NONE, 0, 32))
    for name in ("a", "a___o", "a___o___x"):
        made.add(Struct(0, name, 4, [Member("x", u32, 0)]))
    for btf in (BTF.from_bytes(made.to_bytes()), BTF.from_bytes(made.to_bytes(), lazy=True)):
        for names in (["a___o"], ["a___o", "a", "u32"]):
            found = btf.find_flavors_many(names)
            assert [t.name for t in found["a___o"]] == ["a___o___x"]
            if "a" in names:
                assert [t.name for t in found["a"]] == ["a", "a___o"]


def test_split_btf_batched_flavors_include_the_first_string():
    """In split BTF the string section's first string is a name too (offset 0 of a base is "")."""
    base = _base()
    split = BTF(base=base, name="mod")
    u32 = base.lookup("u32").id
    split.add(Struct(0, "shared___mod", 4, [Member("x", u32, 0)]))
    split.add(Struct(0, "other", 4, [Member("x", u32, 0)]))
    split.add(Struct(0, "other___b", 4, [Member("x", u32, 0)]))
    parsed = BTF.from_bytes(split.to_bytes(), base=base, lazy=True, name="mod")
    many = parsed.find_flavors_many(["shared", "other", "absent"], own_only=False)
    assert {n: [t.name for t in ts] for n, ts in many.items()} == {
        "shared": ["shared", "shared___mod"], "other": ["other", "other___b"], "absent": []}
    # By kind: the search stops at the largest name offset of the split part's structs
    # (in its own strings, past the base's); the base's types come from the base's search.
    structs = parsed.find_flavors_many(["shared", "other", "absent", "u32"], own_only=False, kinds=[Kind.STRUCT])
    assert {n: [t.name for t in ts] for n, ts in structs.items()} == {
        "shared": ["shared", "shared___mod"], "other": ["other", "other___b"], "absent": [], "u32": []}
    assert [t.name for t in parsed.find_flavors_many(["u32"], own_only=False, kinds=[Kind.INT])["u32"]] == ["u32"]


@needs_vmlinux
def test_core_prefetch_resolves_like_one_by_one(bpf_obj):
    """CORERelocator.prefetch (all root types searched at once) gives the resolutions the
    per-type search gives."""
    import bpfkit
    from bpfkit.btf.core import CORERelocator

    spec = bpfkit.load_spec(bpf_obj("core_task"))
    relos = [(p.name, i, r) for p in spec.programs.values() for i, r in p.core_relos]
    data = open(VMLINUX, "rb").read()
    results = []
    for prefetch in (False, True):
        relocator = CORERelocator(spec.btf, [BTF.from_bytes(data, lazy=True, name="vmlinux")])
        if prefetch:
            relocator.prefetch(r for _, _, r in relos)
        out = [relocator.resolve(r, p, i, k) for k, (p, i, r) in enumerate(relos)]
        results.append([(r.result.new, r.result.poison, r.candidates) for r in out])
    assert results[0] == results[1] and results[0]


def _kind_lookups(btf: BTF, names: list[str]) -> dict[tuple[str, Kind], list[int]]:
    return {(n, k): [t.id for t in btf.find(n, k)] for n in names for k in Kind if k != Kind.VOID}


def test_lookups_by_kind_agree_lazily_and_eagerly(bpf_obj):
    """A lazy parse answers lookups of the kinds its scan indexes (struct, union, enum,
    typedef, int, ...) from that index and the others (FUNC, VAR, ...) from the index of every
    type: both agree with a full parse, kind by kind, flavors too."""
    raw = object_btf_bytes(bpf_obj("core_task"))
    eager, lazy = BTF.from_bytes(raw), BTF.from_bytes(raw, lazy=True)
    names = sorted({t.name for t in eager.types if t.name})
    assert _kind_lookups(lazy, names) == _kind_lookups(eager, names)
    names = sorted({essential_name(n) for n in names})  # what flavor searches are given
    for kinds in ([Kind.STRUCT], [Kind.ENUM, Kind.ENUM64], [Kind.FUNC], [Kind.STRUCT, Kind.FUNC], None):
        want = {n: [t.id for t in ts] for n, ts in eager.find_flavors_many(names, kinds=kinds).items()}
        assert {n: [t.id for t in ts] for n, ts in lazy.find_flavors_many(names, kinds=kinds).items()} == want
    assert sorted(t.name for t in lazy.find_flavors_many(["task_struct"], kinds=[Kind.STRUCT])["task_struct"]) == [
        "task_struct", "task_struct___fake", "task_struct___n", "task_struct___o"]
    assert lazy.find_flavors_many(["task_struct"], kinds=[Kind.UNION])["task_struct"] == []


@needs_vmlinux
def test_vmlinux_lookups_by_kind_agree_with_a_full_parse():
    data = open(VMLINUX, "rb").read()
    eager, lazy = BTF.from_bytes(data), BTF.from_bytes(data, lazy=True)
    names = ["task_struct", "pid", "file", "u32", "bpf_map_type", "list_head", "do_sys_open", "jiffies", "callback_head"]
    for n in names:
        for k in (Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.TYPEDEF, Kind.INT, Kind.FUNC, Kind.FWD, Kind.VAR, None):
            assert [t.id for t in lazy.find(n, k)] == [t.id for t in eager.find(n, k)], (n, k)
    kinds = [Kind.STRUCT, Kind.UNION]
    assert ({n: [t.id for t in ts] for n, ts in lazy.find_flavors_many(names, kinds=kinds).items()}
            == {n: [t.id for t in ts] for n, ts in eager.find_flavors_many(names, kinds=kinds).items()})


def test_unchanging_buffers_are_read_in_place_others_copied(bpf_obj, tmp_path):
    """BTF.from_bytes copies a mapping (it changes when its file does, even a private
    read-only one) unless told it is unchanging; then it reads it in place, and the mapping
    cannot be closed while the BTF holds it."""
    import mmap

    raw = object_btf_bytes(bpf_obj("core_task"))
    want = repr(BTF.from_bytes(raw).lookup("task_struct", Kind.STRUCT))
    path = tmp_path / "core_task.btf"
    path.write_bytes(raw)
    with open(path, "rb") as f:
        kept = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
        copied_from = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
    in_place = BTF.from_bytes(kept, lazy=True, unchanging=True)
    with pytest.raises(BufferError):
        kept.close()  # the lazy BTF's words are a view of the mapping
    assert repr(in_place.lookup("task_struct", Kind.STRUCT)) == want
    copied = BTF.from_bytes(copied_from, lazy=True)
    copied_from.close()  # nothing of it is kept
    with open(path, "r+b") as f:
        f.write(b"\0" * len(raw))  # the file changes under both mappings
    assert repr(copied.lookup("task_struct", Kind.STRUCT)) == want and len(copied) == len(in_place)
    assert in_place.strings._data is kept and copied.strings._data is not copied_from  # strings too
    del in_place
    gc.collect()  # the BTF and its type table refer to each other
    kept.close()


@needs_vmlinux
def test_vmlinux_blob_is_a_read_only_mapping_where_the_kernel_allows_it():
    """Since 6.16 /sys/kernel/btf/vmlinux can be mmapped (btf_sysfs_vmlinux_mmap): bpfkit maps
    it read-only instead of copying its megabytes; before, it reads the file."""
    import mmap

    from bpfkit._kernel import sysfs_btf as _sysfs_btf

    blob = _sysfs_btf.vmlinux_btf()
    with open(VMLINUX, "rb") as f:
        assert blob[:4096] == f.read(4096)
    with open(VMLINUX, "rb") as f:
        mapping = _sysfs_btf._mapped(f.fileno())
    if mapping is None:
        assert isinstance(blob, bytes)  # an older kernel refuses the mapping
    else:
        mapping.close()
        assert isinstance(blob, mmap.mmap) and memoryview(blob).readonly
    assert kernel_btf.vmlinux().lookup("task_struct", Kind.STRUCT).size > 0


def test_strings_are_read_in_place_until_one_is_added(bpf_obj):
    """A blob's string section is read where it is (no copy of vmlinux's 2.3 MB): a window of
    the bytes given; the first add() copies it, keeping every offset."""
    raw = object_btf_bytes(bpf_obj("core_task"))
    btf = BTF.from_bytes(raw)
    strings = btf.strings
    assert strings._data is raw and strings.to_bytes() == BTF.from_bytes(bytes(raw)).strings.to_bytes()
    offsets = strings.offsets()
    at = strings.find("task_struct")
    assert at and all(strings.get(o) == "task_struct" for o in at)
    size = len(strings)
    added = strings.add("a_name_no_object_has")
    assert strings._data is not raw and added == size  # appended: the old offsets hold
    assert strings.offsets() == {**offsets, added: "a_name_no_object_has", len(strings): ""}
    assert strings.find("task_struct") == at and strings.get(added) == "a_name_no_object_has"
    assert BTF.from_bytes(btf.to_bytes()).lookup("task_struct", Kind.STRUCT).size == btf.lookup("task_struct", Kind.STRUCT).size
    # A bytearray (mutable: add() would extend the caller's) is copied, even said unchanging.
    mutable = bytearray(raw)
    BTF.from_bytes(mutable, unchanging=True).strings.add("a_name_no_object_has")
    assert mutable == raw
