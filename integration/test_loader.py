# SPDX-License-Identifier: Apache-2.0
"""The loader on the running kernel: every test object in bpf/loader_*.bpf.c is loaded, run
(BPF_PROG_TEST_RUN or a real tracepoint hit) and checked through its maps.

Covers: BTF and legacy maps, each global data section, static/global sub-programs, callbacks,
map-in-map and prog-array initialisers, pinning, map replacement, selected programs, kernel
version for old kprobe objects, func/line info, verifier errors and clean-up on failure.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
import uuid

import pytest

import bpfkit
from bpfkit import Collection, features, LoadOptions, load_spec
from bpfkit._kernel.consts import MapFlag, MapType
from bpfkit.errors import (
    BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError, VerifierError,
)
from bpfkit.maps import Map, MapSpec, PinType

PKT = bytes(64)  # a zero Ethernet frame for XDP/tc/socket test runs


def u64(raw: bytes | int) -> int:
    """A counter: maps declared through BTF read typed (an int), BTF-less ones as bytes."""
    return raw if isinstance(raw, int) else struct.unpack("<Q", raw)[0]


@pytest.fixture
def pin_dir():
    """A fresh directory under /sys/fs/bpf (mounting bpffs if needed), removed afterwards;
    the test fails if it leaves pins behind that it did not expect."""
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit-loader-{uuid.uuid4().hex[:8]}"
    yield path
    if os.path.exists(path):
        shutil.rmtree(path)


# --------------------------------------------------------------------------- basics
def test_minimal_tracepoint_counts_real_calls(bpf_obj):
    link = pytest.importorskip("bpfkit.link")
    spec = load_spec(bpf_obj("minimal"))
    spec.variables["target_tgid"].value = os.getpid()
    with Collection(spec) as coll:
        prog = coll.programs["count_getppid"]
        assert prog.attach_to == "syscalls/sys_enter_getppid" and prog.section.startswith("tracepoint/")
        with link.tracepoint("syscalls", "sys_enter_getppid", prog):
            for _ in range(5):
                os.getppid()
        assert u64(coll.maps["hits"][0]) == 5


def test_ring_buffer_events_from_a_tracepoint(bpf_obj):
    link = pytest.importorskip("bpfkit.link")
    events = pytest.importorskip("bpfkit.events")
    spec = load_spec(bpf_obj("loader_basic"))
    spec.variables["target_tgid"].value = os.getpid()
    spec.variables["magic"].value = 0xFEEDFACE
    with Collection(spec) as coll:
        assert coll.maps["events"].max_entries == 16384
        with events.RingBuffer(coll.maps["events"]) as rb, \
                link.tracepoint("syscalls", "sys_enter_getppid", coll.programs["tp_getppid"]):
            for _ in range(3):
                os.getppid()
            got = []
            rb.poll(timeout=1.0, callback=lambda rec: got.append(bytes(rec)))
        records = [struct.unpack("<IIQ", r) for r in got]
        assert records == [(os.getpid(), i + 1, 0xFEEDFACE) for i in range(3)]
        assert u64(coll.maps[".bss"][0][8:16]) == 3  # bss_counter


def test_global_data_sections(bpf_obj):
    spec = load_spec(bpf_obj("loader_basic"))
    spec.variables["bias"].value = -7
    spec.variables["data_counter"].value = 100
    with Collection(spec) as coll:
        prog = coll.programs["xdp_globals"]
        assert prog.test_run(PKT)[0] == 2  # XDP_PASS
        assert prog.test_run(PKT)[0] == 2
        results = coll.maps["results"]
        assert u64(results[0]) == 0x1122334455667788  # .rodata default
        assert u64(results[1]) == 104 + 4 + 7 + 9  # .data, .data array, .data.custom, .rodata.custom
        assert struct.unpack("<q", results[2])[0] == -7  # .rodata knob set before load
        assert u64(coll.maps[".data"][0][:8]) == 104
        assert u64(coll.maps[".bss"][0][8:16]) == 2
        assert u64(coll.maps["counts"][7]) == 2
        # The kernel sees libbpf's names and flags.
        info = coll.maps[".rodata"].info()
        assert info.name == "loader_b.rodata"
        assert info.map_flags == MapFlag.RDONLY_PROG | MapFlag.MMAPABLE
        # .rodata is frozen: user space can no longer write it.
        with pytest.raises(KernelError) as err:
            coll.maps[".rodata"].update(0, bytes(20))
        assert err.value.errno == errno.EPERM
        coll.maps[".data"].update(0, bytes(24))  # .data is not frozen


def test_func_and_line_info_reach_the_kernel(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_calls")), programs=["calls_a"]) as coll:
        prog = coll.programs["calls_a"]
        info = prog.info()
        assert info.btf_id != 0
        assert info.nr_func_info == len(prog.spec.functions) == 4
        assert info.nr_line_info > 10
        if shutil.which("bpftool"):
            out = subprocess.run(["bpftool", "prog", "dump", "xlated", "id", str(info.id)],
                                 capture_output=True, text=True).stdout
            assert "sum_of_squares(a, b)" in out or "square(" in out  # source lines from line_info


def test_subprograms(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_calls")), programs=["calls_a", "calls_b"]) as coll:
        for name in ("calls_a", "calls_b"):
            assert coll.programs[name].test_run(PKT)[0] == 2
        out = [u64(coll.maps["out"][i]) for i in range(4)]
        assert out == [25, 34, 81, 6]  # 3²+4², 10+20+2², 9², 1+1+2²


@pytest.mark.feature("callbacks")
def test_callbacks(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_calls")), programs=["callbacks"]) as coll:
        coll.maps["numbers"].update(2, 5)
        assert coll.programs["callbacks"].test_run(PKT)[0] == 2
        # sum(0..9) from bpf_loop, values+keys of `numbers` from bpf_for_each_map_elem
        assert [u64(coll.maps["out"][i]) for i in (4, 5)] == [45, 5 + 0 + 1 + 2 + 3 + 4]


def test_callbacks_on_a_kernel_without_them_name_the_feature(bpf_obj):
    if features.probe("callbacks"):
        pytest.skip("this kernel has callbacks (BPF_PSEUDO_FUNC, 5.13+): the refusal needs an older one (5.10 VM)")
    with pytest.raises(NotSupportedError, match=r"passes a callback.*needs Linux 5\.13") as err:
        Collection(load_spec(bpf_obj("loader_calls")), programs=["callbacks"])
    assert "unrecognized bpf_ld_imm64" in str(err.value)


def test_map_in_map_and_prog_array_initialisers(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_mapinmap"))) as coll:
        which = coll.maps[".bss"]
        dispatch = coll.programs["dispatch"]
        which.update(0, struct.pack("<I", 0))
        assert dispatch.test_run(PKT)[0] == 2  # tail_one: XDP_PASS
        which.update(0, struct.pack("<I", 3))
        assert dispatch.test_run(PKT)[0] == 1  # tail_two: XDP_DROP
        which.update(0, struct.pack("<I", 1))
        assert dispatch.test_run(PKT)[0] == 0  # empty slot: XDP_ABORTED
        assert [u64(coll.maps["out"][i]) for i in (1, 2)] == [111, 222]
        assert coll.programs["use_inner"].test_run(PKT)[0] == 2
        assert u64(coll.maps["inner_a"][0]) == 10
        assert u64(coll.maps["inner_b"][0]) == 100
        # The outer maps hold the inner maps' ids.
        outer = coll.maps["outer_array"]
        assert struct.unpack("<I", outer[0])[0] == coll.maps["inner_a"].id
        assert outer.lookup(1) is None


def test_legacy_maps_and_kernel_version(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_legacy"))) as coll:
        assert coll.programs["count_len"].test_run(bytes(90))[0] == 0
        assert coll.programs["count_len"].test_run(bytes(90))[0] == 0
        # skb->len of a test run excludes the 14-byte Ethernet header the kernel pulls.
        assert dict(coll.maps["legacy_hash"].items()) == {struct.pack("<I", 76): struct.pack("<Q", 2)}
        assert coll.maps["legacy_array"][0] == struct.pack("<I", 0xABCD)
        kprobe = coll.programs["old_kprobe"]
        # version 0xFFFFFFFE in the object: the running kernel's LINUX_VERSION_CODE is used.
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
        assert kprobe.spec.kernel_version >> 8 == (major << 8) | minor


def test_iproute2_map_in_map(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_elfmap"))) as coll:
        assert coll.programs["tc_count"].test_run(PKT)[0] == 0
        assert u64(coll.maps["elf_counter"][0]) == 1
        assert coll.maps["elf_inner"][0] == struct.pack("<I", 3)


@pytest.mark.parametrize("section", [".maps", "maps"])
def test_symbol_plus_offset_reference_runs_on_the_named_map(section, tmp_path):
    """A map reference written as "symbol + offset in imm" (clang's form for static maps,
    rewritten here onto global ones, which load) uses the map at that offset: the kernel's
    map_ids list only 'second' and the test run counts in 'second'. Before issue #18's fix
    both went to 'first'."""
    from bpfkit._kernel.bpf import prog_map_ids
    from bpfkit.elf.reader import ElfFile
    from tests.clang_objects import build_c, two_maps
    from tests.test_elf_maprefs import base_symbol, map_relocations, map_symbols, retarget

    data = build_c(two_maps(section, static=False), tmp_path)
    elf = ElfFile(data)
    starts = {name: start for start, _end, name in map_symbols(elf, section)}
    [(entry, insn_off, *_)] = [r for r in map_relocations(elf) if r[5] == starts["second"]]
    base = base_symbol(elf, section)
    patched = retarget(data, entry, insn_off, base.index, starts["second"] - base.value)
    with Collection(load_spec(patched)) as coll:
        prog = coll.programs["p"]
        assert prog_map_ids(prog.fd) == [coll.maps["second"].id]
        assert prog.test_run(PKT)[0] == 2
        assert u64(coll.maps["second"][0]) == 1 and u64(coll.maps["first"][0]) == 0


@pytest.mark.feature("map_type_bloom_filter")
def test_ulong_fields_reach_the_kernel(tmp_path):
    """__ulong() (libbpf 1.4+, an enum with one value) for map_extra and max_entries: the
    kernel's bpf_map_info shows them (issue #18 item 2; bpfkit refused the object before)."""
    from tests.clang_objects import ULONG, build_c

    src = ULONG + """
struct { __uint(type, BPF_MAP_TYPE_BLOOM_FILTER); __ulong(max_entries, 64); __type(value, __u32);
         __ulong(map_extra, 5); } bloom SEC(".maps");
SEC("xdp") int p(void *c) { __u32 v = 7; bpf_map_push_elem(&bloom, &v, 0); return 2; }
"""
    with Collection(load_spec(build_c(src, tmp_path))) as coll:
        info = coll.maps["bloom"].info()
        assert (int(info.max_entries), int(info.map_extra)) == (64, 5)  # 5 hash functions
        assert coll.programs["p"].test_run(PKT)[0] == 2


@pytest.mark.feature("map_type_arena")
def test_ulong_map_extra_of_an_arena_reaches_the_kernel(tmp_path):
    """An arena's map_extra is the user address it maps at (64 bits, hence __ulong())."""
    from tests.clang_objects import ULONG, build_c

    src = ULONG + """
struct { __uint(type, 33 /* BPF_MAP_TYPE_ARENA */); __uint(map_flags, BPF_F_MMAPABLE); __uint(max_entries, 2);
         __ulong(map_extra, 1ull << 44); } arena SEC(".maps");
SEC("xdp") int p(void *c) { return 2; }
"""
    with Collection(load_spec(build_c(src, tmp_path))) as coll:
        assert int(coll.maps["arena"].info().map_extra) == 1 << 44


def test_prog_array_with_a_value_type_and_values_tail_calls(tmp_path):
    """__type(value, __u32) with __array(values, ...) (accepted by libbpf; issue #18 item 3):
    the slot is filled and the tail call lands (tail returns XDP_DROP)."""
    from tests.clang_objects import build_c
    from tests.test_elf_mapfields import PROG_ARRAY

    with Collection(load_spec(build_c(PROG_ARRAY.format(value="__type(value, __u32);"), tmp_path))) as coll:
        assert coll.maps["jumps"].info().value_size == 4
        assert coll.programs["p"].test_run(PKT)[0] == 1


def test_zero_map_size_error_names_the_field_and_spec_sets_it(tmp_path):
    """Issue #18 item 6: a map sized 0 for user space to fill names the field and how to set
    it; setting it on the spec loads."""
    from tests.clang_objects import build_c

    src = """
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __u64); } sized SEC(".maps");
SEC("xdp") int p(void *c) { __u32 k = 0; return bpf_map_lookup_elem(&sized, &k) != 0; }
"""
    spec = load_spec(build_c(src, tmp_path))
    with pytest.raises(KernelError, match=r"create map 'sized' \(array\): BPF_MAP_CREATE: EINVAL .*its max_entries "
                                          r"is 0, .*\(spec.maps\['sized'\].max_entries = N; or bpfkit load/attach "
                                          r"--map-size sized.max_entries=N\)$"):
        Collection(spec)
    spec.maps["sized"].max_entries = 3
    with Collection(spec) as coll:
        assert coll.maps["sized"].info().max_entries == 3


# -------------------------------------------------------------------------- options
def test_selected_programs_only(bpf_obj):
    with Collection(load_spec(bpf_obj("loader_mapinmap")), programs=["use_inner"]) as coll:
        assert list(coll.programs) == ["use_inner"]
        assert "jump_table" in coll.maps  # maps are all created
        assert coll.maps["jump_table"].lookup(0) is None  # its programs were not loaded
    with pytest.raises(NotFoundError, match="no program named 'nope'"):
        Collection(load_spec(bpf_obj("loader_mapinmap")), programs=["nope"])


def test_not_autoloaded_program_can_be_selected(bpf_obj):
    spec = load_spec(bpf_obj("loader_bad"))
    with Collection(spec) as coll:
        assert "xdp_bad" not in coll.programs
    spec.programs["xdp_bad"].autoload = True
    with pytest.raises(VerifierError):
        Collection(spec)


def test_map_replacement(bpf_obj):
    spec = load_spec(bpf_obj("loader_calls"))
    with Map(spec.maps["out"]) as shared:
        with Collection(spec, map_replacements={"out": shared}, programs=["calls_b"]) as coll:
            assert coll.maps["out"] is shared
            coll.programs["calls_b"].test_run(PKT)
        assert not shared.closed  # the caller's map outlives the collection
        assert u64(shared[2]) == 81
    small = dataclass_copy(spec.maps["out"], max_entries=2)
    with Map(small) as wrong:
        with pytest.raises(UsageError, match="max_entries is 2, the object wants 8"):
            Collection(spec, map_replacements={"out": wrong})
        assert not wrong.closed
    with pytest.raises(NotFoundError, match="nope"):
        Collection(spec, map_replacements={"nope": None})  # type: ignore[dict-item]


def dataclass_copy(mspec: MapSpec, **changes) -> MapSpec:
    import dataclasses

    return dataclasses.replace(mspec, **changes)


def test_verifier_error_has_log_tail_and_leaves_nothing(bpf_obj):
    spec = load_spec(bpf_obj("loader_bad"))
    with pytest.raises(VerifierError) as err:
        Collection(spec, programs=["xdp_good", "xdp_bad"])
    exc = err.value
    assert exc.errno in (errno.EACCES, errno.EINVAL)
    assert "invalid variable-offset read from stack" in str(exc)
    # line_info puts the source lines in the log (6.5+ also names file:line).
    assert "int i = ctx->data_end - ctx->data;" in exc.log
    assert len(str(exc).splitlines()) <= VerifierError.TAIL_LINES + 2
    with pytest.raises(VerifierError) as whole:
        Collection(spec, programs=["xdp_bad"], options=LoadOptions(log_whole=True))
    assert whole.value.log.strip().splitlines()[0] in str(whole.value)
    # (the autouse fixture checks that no map/prog/btf fd of the failed loads is left open)


def test_verifier_log_on_request(bpf_obj):
    with Collection(load_spec(bpf_obj("minimal")), options=LoadOptions(log_level=2)) as coll:
        log = coll.programs["count_getppid"].verifier_log
        assert "processed" in log and "insns" in log


def test_core_object_loads_and_reads_the_parent(bpf_obj):
    # CO-RE relocations are resolved against the running kernel's BTF (docs/core.md; the
    # relocation kinds and other kernels are tested in tests/test_core*.py, integration/test_core*.py).
    link = pytest.importorskip("bpfkit.link")
    with Collection(load_spec(bpf_obj("loader_core"))) as coll:
        assert [r.kind.label for r in coll.core_resolutions["core_getppid"]][:2] == ["field_byte_offset"] * 2
        with link.tracepoint("syscalls", "sys_enter_getppid", coll.programs["core_getppid"]):
            os.getppid()
        assert struct.unpack("<I", coll.maps[".bss"][0][:4])[0] > 0  # some process's parent


def test_unknown_section_type_is_refused(bpf_obj):
    from bpfkit._kernel.consts import ProgType

    spec = load_spec(bpf_obj("loader_pin"))
    prog = spec.programs["count_runs"]
    prog.type, prog.section = ProgType.UNSPEC, "made_up"  # what an unknown SEC() parses to
    with pytest.raises(UsageError, match="section 'made_up' is not one libbpf knows"):
        Collection(spec)


# ------------------------------------------------------------------------- pinning
def test_pin_by_name_is_shared_between_loads(bpf_obj, pin_dir):
    spec = load_spec(bpf_obj("loader_pin"))
    with Collection(spec, pin_dir=pin_dir) as first:
        first.programs["count_runs"].test_run(PKT)
        assert os.listdir(pin_dir) == ["loader_pinned_counter"]
    with Collection(spec, pin_dir=pin_dir) as second:
        second.programs["count_runs"].test_run(PKT)
        assert u64(second.maps["loader_pinned_counter"][0]) == 2  # reused: state carried over
        assert u64(second.maps["private_counter"][0]) == 1  # not pinned: fresh
    pinned = Map.load_pinned(os.path.join(pin_dir, "loader_pinned_counter"))
    with pinned:
        assert u64(pinned[0]) == 2 and pinned.type == MapType.ARRAY
        pinned.unpin()
    assert os.listdir(pin_dir) == []


def test_incompatible_pin_is_refused(bpf_obj, pin_dir):
    spec = load_spec(bpf_obj("loader_pin"))
    os.makedirs(pin_dir)
    other = MapSpec("loader_pinned_counter", MapType.ARRAY, 4, 8, max_entries=3)
    with Map(other) as m:
        m.pin(os.path.join(pin_dir, "loader_pinned_counter"))
    with pytest.raises(UsageError, match="pinned at .* is incompatible: max_entries is 3, the object wants 1"):
        Collection(spec, pin_dir=pin_dir)
    assert os.listdir(pin_dir) == ["loader_pinned_counter"]  # the existing pin is left alone


def test_failure_after_pinning_leaves_nothing_pinned(bpf_obj, pin_dir):
    spec = load_spec(bpf_obj("loader_pin"))
    spec.programs["count_runs"].instructions = spec.programs["count_runs"].instructions[:-8]  # drop exit
    with pytest.raises(VerifierError):
        Collection(spec, pin_dir=pin_dir)
    assert not os.path.exists(pin_dir)  # neither pins nor the directory made for them


def test_pin_dir_must_be_bpffs(bpf_obj, tmp_path):
    spec = load_spec(bpf_obj("loader_pin"))
    with pytest.raises(UsageError, match="not on a bpf filesystem"):
        Collection(spec, pin_dir=str(tmp_path))


# -------------------------------------------------------------------- BTF attach ids
def test_btf_targets_are_resolved_in_vmlinux(bpf_obj):
    from bpfkit._kernel import bpf as _bpf
    from bpfkit import kernel_btf

    spec = load_spec(bpf_obj("loader_btf"))
    with Collection(spec) as coll:
        tp = coll.programs["on_sys_enter"]
        kernel = kernel_btf.vmlinux()  # parsed lazily, once per process
        assert kernel.type_by_id(tp.spec.attach_btf_id).name == "btf_trace_sys_enter"
        assert kernel.type_by_id(coll.programs["each_task"].spec.attach_btf_id).name == "bpf_iter_task"
        # A tp_btf program runs once attached (BPF_RAW_TRACEPOINT_OPEN with no name).
        with _bpf.raw_tracepoint_open(None, tp.fd):
            os.getppid()
        assert u64(coll.maps[".bss"][0]) > 0
    spec.programs["each_task"].attach_to = "no_such_iter"
    with pytest.raises(NotFoundError, match="no FUNC 'bpf_iter_no_such_iter'"):
        Collection(spec)


def test_btf_the_kernel_refuses_is_left_out(bpf_obj):
    """A real rejection: an INT wider than its size is invalid BTF. As libbpf, the collection
    warns and loads without BTF (no func/line info, no map key/value types)."""
    from bpfkit.btf import Int, IntEncoding

    spec = load_spec(bpf_obj("loader_basic"))
    spec.btf.add(Int(0, "broken", 4, IntEncoding.NONE, 0, 64))
    with pytest.warns(RuntimeWarning, match="loading the object's BTF failed"):
        coll = Collection(spec)
    with coll:
        assert isinstance(coll.btf_error, VerifierError) and coll.btf_fd is None
        assert coll.programs["xdp_globals"].info().btf_id == 0
        assert coll.programs["xdp_globals"].test_run(PKT)[0] == 2
        assert u64(coll.maps["results"][0]) == 0x1122334455667788
    # Callbacks cannot do without BTF (the verifier wants func_info): the error says why.
    if not features.probe("callbacks"):
        return  # before 5.13 callbacks do not load at all (test_callbacks_on_a_kernel_without_them...)
    calls = load_spec(bpf_obj("loader_calls"))
    calls.btf.add(Int(0, "broken", 4, IntEncoding.NONE, 0, 64))
    with pytest.warns(RuntimeWarning), pytest.raises(VerifierError, match="the kernel refused the object's BTF"):
        Collection(calls, programs=["callbacks"])
