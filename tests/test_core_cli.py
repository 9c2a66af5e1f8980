# SPDX-License-Identifier: Apache-2.0
"""``bpfkit inspect OBJ --core``: CO-RE relocations and how they resolve. Against
``--kernel-btf`` (here: the object's own BTF, which holds the vmlinux.h types it was built
with, minus its ___flavor and made-up types) the answers are fixed, so no kernel is needed."""

from __future__ import annotations

import json

import pytest

from bpfkit.btf import BTF
from bpfkit.cli.main import main
from bpfkit.elf import ElfFile


@pytest.fixture
def kernel_like(bpf_obj, tmp_path):
    """core_task's BTF with its local-only (flavored) types renamed out of the way: a stand-in
    for the kernel the object was built against."""
    btf = BTF.from_bytes(ElfFile(open(bpf_obj("core_task"), "rb").read()).by_name[".BTF"].data)
    for t in btf.types:
        if "___" in t.name or t.name == "bpfkit_no_such_type":
            t.name = "local_only_" + str(t.id)
    path = tmp_path / "kernel.btf"
    path.write_bytes(btf.to_bytes())
    return str(path)


def run(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_inspect_core_table(bpf_obj, capsys, kernel_like):
    obj = str(bpf_obj("core_task"))
    out = run(capsys, "inspect", obj, "--core", "--kernel-btf", kernel_like)
    assert f"CO-RE relocations (49), against {kernel_like}:" in out
    lines = out.splitlines()
    header = next(line for line in lines if "PROGRAM" in line and "KIND" in line)
    assert header.split() == ["PROGRAM", "INSN", "KIND", "LOCAL", "KERNEL", "VALUE"]
    assert any("field_byte_offset" in line and "struct task_struct.pid" in line for line in lines)
    assert any("poisoned: struct task_struct has no member 'state'" in line for line in lines)
    assert any("type_exists" in line and "no struct named 'bpfkit_no_such_type'" in line for line in lines)


def test_ambiguous_candidates_fail_the_command(bpf_obj, capsys):
    # Against itself, task_struct___n's __state has two candidates: task_struct and itself.
    obj = str(bpf_obj("core_task"))
    assert main(["inspect", obj, "--core", "--kernel-btf", obj]) != 0
    assert "is ambiguous: candidates" in capsys.readouterr().err


def test_inspect_core_json(bpf_obj, capsys, kernel_like):
    obj = str(bpf_obj("core_task"))
    info = json.loads(run(capsys, "inspect", "--json", obj, "--kernel-btf", kernel_like))
    core = info["core"]
    assert len(core) == 49 and set(core[0]) == {
        "program", "insn", "kind", "local", "target", "orig", "new", "poisoned", "why", "candidates"}
    kinds = {r["kind"] for r in core}
    assert kinds == {"field_byte_offset", "field_byte_size", "field_exists", "field_signed", "field_lshift_u64",
                     "field_rshift_u64", "type_id_local", "type_id_target", "type_exists", "type_size",
                     "type_matches", "enumval_exists", "enumval_value"}
    # Against its own types every field resolves to where the compiler put it.
    for r in core:
        if r["kind"] == "field_byte_offset" and not r["poisoned"]:
            assert r["orig"] == r["new"] or "task_struct___n" in r["local"]


def test_inspect_without_core_relocations(bpf_obj, capsys):
    out = run(capsys, "inspect", str(bpf_obj("minimal")), "--core", "--kernel-btf", str(bpf_obj("minimal")))
    assert "CO-RE relocations (0)" in out
