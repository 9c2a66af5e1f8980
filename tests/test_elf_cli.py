# SPDX-License-Identifier: Apache-2.0
"""`bpfkit inspect` and the loader's pure helpers, without the kernel."""

from __future__ import annotations

import json
import os

import pytest

from bpfkit.cli.main import main
from bpfkit.collection import _adjust_ringbuf_size, _kernel_version_code, object_name
from conftest import bpf_object


def test_inspect_json_shape(bpf_obj, capsys):
    assert main(["inspect", "--json", str(bpf_obj("loader_mapinmap"))]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in info["programs"]] == ["tail_one", "tail_two", "dispatch", "use_inner"]
    for prog in info["programs"]:
        assert set(prog) >= {"name", "section", "type", "attach_type", "attach_to", "insns"}
        assert prog["type"] == "xdp" and prog["attach_type"] == "xdp"
    maps = {m["name"]: m for m in info["maps"]}
    assert maps["outer_array"]["type"] == "array_of_maps"
    assert maps["jump_table"] == {
        "name": "jump_table", "kernel_name": "jump_table", "type": "prog_array", "key_size": 4,
        "value_size": 4, "max_entries": 4, "flags": 0, "pinning": "none"}
    assert info["variables"] == [
        {"name": "which", "section": ".bss", "offset": 0, "size": 4, "type": "__u32", "value": 0}]


def test_inspect_text(bpf_obj, capsys):
    assert main(["inspect", str(bpf_obj("loader_bad"))]) == 0
    out = capsys.readouterr().out
    assert "xdp_bad (not autoloaded)" in out and "runs" in out


def test_inspect_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "x.o"
    bad.write_bytes(b"nope")
    assert main(["inspect", str(bad)]) == 2
    assert "not an ELF file" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "missing.o")]) == 1


def test_helpers():
    page = os.sysconf("SC_PAGE_SIZE")
    assert _adjust_ringbuf_size(0) == 0
    assert _adjust_ringbuf_size(page) == page
    assert _adjust_ringbuf_size(page * 4) == page * 4
    assert _adjust_ringbuf_size(page * 3) == page * 4
    assert _adjust_ringbuf_size(1000) == page
    code = _kernel_version_code()
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    assert code >> 16 == major and (code >> 8) & 0xFF == minor
    assert object_name("/x/minimal.bpf.o") == "minimal"


def test_inspect_errors_say_inspect(tmp_path, capsys):
    # Issue #18 item 6: parsing for inspect is no "load".
    bad = tmp_path / "x.o"
    bad.write_bytes(b"nope")
    assert main(["inspect", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"bpfkit: error: inspect {bad}: ")
    assert main(["inspect", str(tmp_path / "missing.o")]) == 1
    assert capsys.readouterr().err == f"bpfkit: error: inspect {tmp_path / 'missing.o'}: no such file\n"
    assert main(["inspect", "--core", "--kernel-btf", str(tmp_path / "no-btf"), str(bpf_object("core_task"))]) != 0
    assert capsys.readouterr().err.startswith(f"bpfkit: error: inspect {bpf_object('core_task')}: ")
