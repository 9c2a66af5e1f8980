# SPDX-License-Identifier: Apache-2.0
"""Counts maps recognised by their key's shape, in the spellings of bcc's and libbpf-tools'
profile and offcputime (bpfkit.profile.keys), unsized stack-trace maps given sizes
(bpfkit.profile.stackmap), and what ``bpfkit attach --stacks`` decides from an object before
loading it (cmd_attach._stack_maps). On the objects bpf/profile_*.bpf.c, written as those
tools write theirs; the kernel runs of the same objects are integration/test_profile_keys.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

import bpfkit
from bpfkit.btf.values import StructValue
from bpfkit.cli.cmd_attach import _stack_maps
from bpfkit.errors import UsageError
from bpfkit.profile import CountsShape, counts_maps, counts_shape, from_maps, size_stack_map, stack_key_fields
from bpfkit.profile.keys import key_summary
from bpfkit.profile.stackmap import DEFAULT_MAX_ENTRIES, PERF_MAX_STACK_DEPTH, max_stack_depth
from bpfkit.spec.consts import MapFlag, MapType
from bpfkit.spec.maps import MapSpec

DEPTH = max_stack_depth()


def spec_of(bpf_obj: Any, name: str) -> Any:
    return bpfkit.load_spec(str(bpf_obj(name)))


def test_counts_maps_by_key_shape(bpf_obj: Any) -> None:
    """The decoys (pids, start: u32 keys; start's value even holds a key_t) are not picked."""
    lt = spec_of(bpf_obj, "profile_libbpf_tools")
    assert counts_maps(lt.maps) == ["counts"]
    assert counts_shape(lt.maps["counts"]) == CountsShape(
        pid="pid", user="user_stack_id", kernel="kern_stack_id", comm="name", kernel_ip=None,
        value_delta=False, value_comm=None)
    assert counts_shape(lt.maps["pids"]) is None and counts_shape(lt.maps["stackmap"]) is None
    off = spec_of(bpf_obj, "profile_offcputime")
    assert counts_maps(off.maps) == ["info"]
    assert counts_shape(off.maps["info"]) == CountsShape(  # tgid over pid: offcputime's pid is the thread
        pid="tgid", user="user_stack_id", kernel="kern_stack_id", comm=None, kernel_ip=None,
        value_delta=True, value_comm="comm")
    bcc = spec_of(bpf_obj, "profile_bcc")
    assert counts_maps(bcc.maps) == ["counts"]
    assert counts_shape(bcc.maps["counts"]) == CountsShape(
        pid="pid", user="user_stack_id", kernel="kernel_stack_id", comm="name", kernel_ip="kernel_ip",
        value_delta=False, value_comm=None)
    assert counts_maps(spec_of(bpf_obj, "stacks").maps) == ["counts"]  # bpfkit's own convention
    assert key_summary(lt.maps["counts"]) == "struct key_t {pid, user_stack_id, kern_stack_id, name}"
    assert key_summary(lt.maps["pids"]) == "u32"
    assert key_summary(off.maps["stackmap"]) == "4 bytes without BTF"


def test_size_stack_map(bpf_obj: Any, tmp_path: Path) -> None:
    spec = spec_of(bpf_obj, "profile_libbpf_tools")
    m = spec.maps["stackmap"]
    assert (m.key_size, m.value_size, m.max_entries) == (4, 0, 0)  # as libbpf-tools leaves it
    assert size_stack_map(m) == [f"value_size = {DEPTH * 8} (kernel.perf_event_max_stack {DEPTH} x 8)",
                                 f"max_entries = {DEFAULT_MAX_ENTRIES} (bcc's --stack-storage-size default)"]
    assert (m.value_size, m.max_entries) == (DEPTH * 8, 16384)
    assert size_stack_map(m) == []  # sized: left alone
    kept = spec_of(bpf_obj, "profile_libbpf_tools").maps["stackmap"]
    assert size_stack_map(kept, keep=frozenset({"max_entries"})) == [
        f"value_size = {DEPTH * 8} (kernel.perf_event_max_stack {DEPTH} x 8)"]
    assert kept.max_entries == 0
    build_ids = MapSpec("b", MapType.STACK_TRACE, flags=MapFlag.STACK_BUILD_ID)
    assert size_stack_map(build_ids)[:2] == ["key_size = 4 (a u32 stack id)",
                                             f"value_size = {DEPTH * 32} (kernel.perf_event_max_stack {DEPTH} x 32)"]
    assert size_stack_map(MapSpec("h", MapType.HASH)) == []  # only stack-trace maps
    bad = tmp_path / "max_stack"
    bad.write_text("many\n")
    assert max_stack_depth(str(bad)) == PERF_MAX_STACK_DEPTH == 127
    assert max_stack_depth(str(tmp_path / "absent")) == 127
    bad.write_text("300\n")
    assert max_stack_depth(str(bad)) == 300


def test_stack_key_fields_spellings() -> None:
    """Decoded keys (and values) as the BTF decoder gives them: StructValue."""
    lt = StructValue(pid=7, user_stack_id=3, kern_stack_id=-14, name="burn")
    assert stack_key_fields(lt) == (7, 3, -14, "burn")
    off = StructValue(pid=8, tgid=7, user_stack_id=-1, kern_stack_id=5)
    assert stack_key_fields(off, StructValue(delta=120, comm="sleeper")) == (7, -1, 5, "sleeper")
    assert stack_key_fields(off, [StructValue(delta=1, comm="percpu")]) == (7, -1, 5, "percpu")
    assert stack_key_fields(off) == (7, -1, 5, "")
    bcc = StructValue(pid=7, kernel_ip=0xffffffff81000000, user_stack_id=1, kernel_stack_id=2, name="w")
    assert stack_key_fields(bcc) == (7, 1, 2, "w")
    with pytest.raises(UsageError, match=r"neither user_stack_id nor kernel_stack_id nor kern_stack_id \(fields: pid\)"):
        stack_key_fields(StructValue(pid=1))
    with pytest.raises(UsageError, match=r"key 4 is not a struct typed by BTF.*kern_stack_id"):
        stack_key_fields(4)


class _Map:
    """Stands in for a counts or stack-trace map where the kernel cannot give the case: a
    kernel stack that does not start at the sampled ip (6.18's perf-event stacks always do;
    integration/test_profile_keys.py checks that case on the kernel), and values written by hand."""

    def __init__(self, items: list[tuple[Any, Any]]) -> None:
        self._items = items

    def items(self) -> Any:
        return iter(self._items)

    def lookup(self, key: int) -> Any:
        return dict(self._items).get(key)


class _Sym:
    def kernel_stack(self, addrs: list[int]) -> list[Any]:
        from bpfkit.symbols import Frame

        return [Frame(a, f"f{a:x}") for a in addrs]

    def user_stack(self, pid: int, addrs: list[int]) -> list[Any]:
        return self.kernel_stack(addrs)


def test_from_maps_values_and_kernel_ip() -> None:
    stacks = _Map([(1, [0x20, 0x30]), (2, [0x40, 0x50])])
    keys = [StructValue(pid=7, kernel_ip=0x10, user_stack_id=-14, kernel_stack_id=1, name="w"),  # ip not in stack
            StructValue(pid=7, kernel_ip=0x40, user_stack_id=-14, kernel_stack_id=2, name="w")]  # stack starts there
    prof = from_maps(_Map([(keys[0], 5), (keys[1], 3)]), stacks, symbolizer=_Sym())  # type: ignore[arg-type]
    assert dict(prof.stacks) == {("w", "f30_[k]", "f20_[k]", "f10_[k]"): 5, ("w", "f50_[k]", "f40_[k]"): 3}
    assert (prof.sample_type, prof.unit) == ("samples", "count")
    off = StructValue(pid=8, tgid=7, user_stack_id=-1, kern_stack_id=2)
    idle = StructValue(pid=9, tgid=7, user_stack_id=-1, kern_stack_id=1)
    prof = from_maps(_Map([(off, StructValue(delta=1500, comm="sleeper")), (idle, StructValue(delta=0, comm="x"))]),
                     stacks, symbolizer=_Sym())  # type: ignore[arg-type]
    assert dict(prof.stacks) == {("sleeper", "f50_[k]", "f40_[k]"): 1500}  # delta 0: never switched back in
    assert (prof.sample_type, prof.unit) == ("off_cpu", "microseconds")
    with pytest.raises(UsageError, match="value is a struct without a delta field \\(fields: ns, comm\\)"):
        from_maps(_Map([(off, StructValue(ns=1, comm="x"))]), stacks, symbolizer=_Sym())  # type: ignore[arg-type]


def args(stacks: str, stack_map: str | None = None, *map_size: str) -> argparse.Namespace:
    return argparse.Namespace(stacks=stacks, stack_map=stack_map, object="o.bpf.o", map_size=list(map_size))


def test_attach_stack_maps(bpf_obj: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """What ``bpfkit attach OBJ --stacks MAP`` picks, says and refuses before loading."""
    spec = spec_of(bpf_obj, "profile_libbpf_tools")
    assert _stack_maps(args("stackmap"), spec) == ("counts", "stackmap")
    err = capsys.readouterr().err
    assert ("bpfkit: note: --stacks stackmap is the stack-trace map: counting map counts "
            "(key struct key_t {pid, user_stack_id, kern_stack_id, name})") in err
    assert (f"bpfkit: note: stack-trace map stackmap is unsized in o.bpf.o: value_size = {DEPTH * 8} "
            f"(kernel.perf_event_max_stack {DEPTH} x 8); max_entries = 16384 (bcc's --stack-storage-size default) "
            "(--map-size stackmap.FIELD=N sets another)") in err
    spec = spec_of(bpf_obj, "profile_libbpf_tools")
    assert _stack_maps(args("counts", None, "stackmap.max_entries=64", "pids.max_entries=9"), spec) == (
        "counts", "stackmap")
    err = capsys.readouterr().err
    assert "is the stack-trace map" not in err and "value_size = " in err and "max_entries = " not in err
    assert spec.maps["stackmap"].max_entries == 0  # --map-size sets it, after
    with pytest.raises(UsageError) as exc:
        _stack_maps(args("pids"), spec)
    assert str(exc.value) == (
        "--stacks pids: not a map of stack counts: a hash map whose key is a BTF struct with user_stack_id or "
        "kernel_stack_id (kern_stack_id) fields; its key is u32; the maps keyed so: counts")
    with pytest.raises(UsageError, match="--stacks stackmap is a stack-trace map, and --stack-map names other"):
        _stack_maps(args("stackmap", "other"), spec)
    spec.maps["counts2"] = spec.maps["counts"].copy()
    with pytest.raises(UsageError) as exc:
        _stack_maps(args("stackmap"), spec)
    assert str(exc.value) == (
        "--stacks stackmap: a stack-trace map; o.bpf.o has 2 hash maps keyed by a struct with stack ids "
        "(counts, counts2): name the one that counts the stacks, --stacks COUNTS --stack-map stackmap")
    off = spec_of(bpf_obj, "profile_offcputime")
    assert _stack_maps(args("info"), off) == ("info", "stackmap")
