# SPDX-License-Identifier: Apache-2.0
"""Choosing programs: Collection(programs=[name, (alternative, ...)]) and `bpfkit attach -p
NAME -p 'A|B'` load only the programs named, and of a group of alternatives the first the
kernel accepts (bpf/cli_alternatives.bpf.c: fentry or tracepoint on getppid, tp_btf or raw_tp
on sys_enter)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading

import pytest

from conftest import congestion_control_names

import bpfkit
from bpfkit import features
from bpfkit._kernel.consts import MapFlag
from bpfkit.errors import BPFKitError, NotFoundError, UsageError

from .test_link_cli import ENV, SUBPROCESS_TIMEOUT, Attached, bpfkit_cmd

libc = ctypes.CDLL(None, use_errno=True)
GETPPID_SLOTS = {"getppid_fentry": 2, "getppid_tp": 3}


def _spec(bpf_obj) -> bpfkit.CollectionSpec:
    spec = bpfkit.load_spec(str(bpf_obj("cli_alternatives")))
    spec.variables["target_tid"].value = threading.get_native_id()
    return spec


def _count(coll: bpfkit.Collection, slot: int) -> int:
    return int(coll.maps["hits"][slot])  # typed through BTF: u32 -> u64


def test_collection_loads_first_alternative_the_kernel_accepts(bpf_obj) -> None:
    trampolines = bool(features.probe("tracing_programs"))
    with bpfkit.Collection(_spec(bpf_obj), programs=[("getppid_fentry", "getppid_tp"), "enter_raw"]) as coll:
        chosen = "getppid_fentry" if trampolines else "getppid_tp"
        assert sorted(coll.programs) == sorted([chosen, "enter_raw"])  # enter_btf: not loaded at all
        if trampolines:
            assert coll.not_loaded == {}
        else:  # this host: BPF_PROG_LOAD of fentry gives EPERM before verification
            assert list(coll.not_loaded) == ["getppid_fentry"]
            assert "BPF_PROG_LOAD: EPERM" in coll.not_loaded["getppid_fentry"]
        made = coll.attach_all()
        try:
            assert sorted(made.links) == sorted([chosen, "enter_raw"])
            for _ in range(3):
                libc.getppid()
            assert _count(coll, GETPPID_SLOTS[chosen]) == 3
            assert _count(coll, 1) >= 3  # raw sys_enter of this thread
        finally:
            made.close()


def test_collection_alternatives_none_loads(bpf_obj) -> None:
    if features.probe("tracing_programs"):
        pytest.skip("needs a kernel that refuses fentry programs (no BPF trampolines) to have every alternative fail")
    spec = _spec(bpf_obj)
    spec.programs["getppid_tp"].type = spec.programs["getppid_fentry"].type  # a tracing program without target
    with pytest.raises(BPFKitError) as info:
        bpfkit.Collection(spec, programs=[("getppid_fentry", "getppid_tp")])
    text = str(info.value)
    assert text.startswith("none of the alternative programs getppid_fentry | getppid_tp loaded: getppid_fentry: ")
    assert "getppid_tp: " in text


def test_collection_program_names_checked(bpf_obj) -> None:
    with pytest.raises(NotFoundError, match="no program named 'nope'"):
        bpfkit.Collection(_spec(bpf_obj), programs=[("enter_btf", "nope")])
    with pytest.raises(UsageError, match="each name once"):
        bpfkit.Collection(_spec(bpf_obj), programs=["enter_raw", ("enter_btf", "enter_raw")])


def test_cli_attach_programs_and_alternatives(bpf_obj) -> None:
    trampolines = bool(features.probe("tracing_programs"))
    run = Attached(str(bpf_obj("cli_alternatives")), "-p", "getppid_fentry|getppid_tp", "-p", "enter_btf|enter_raw")
    try:
        attached = sorted(line.split()[1].rstrip(":") for line in run.lines if line.startswith("attached "))
    finally:
        rc, _out, err = run.stop()
    assert rc == 0, err
    # tp_btf needs no trampoline (a raw tracepoint with BTF arguments): it loads where BTF does.
    assert attached == ["enter_btf", "getppid_fentry" if trampolines else "getppid_tp"]
    if not trampolines:
        assert "note: did not load program getppid_fentry (an alternative loaded instead): load program " \
               "'getppid_fentry' (tracing): BPF_PROG_LOAD: EPERM" in err


def test_cli_attach_program_selection_errors(bpf_obj) -> None:
    obj = str(bpf_obj("cli_alternatives"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(bpfkit_cmd("attach", obj, *args), capture_output=True, text=True, env=ENV,
                              timeout=SUBPROCESS_TIMEOUT)

    several = run("tracepoint:syscalls:sys_enter_getppid", "-p", "getppid_tp", "-p", "enter_raw")
    assert several.returncode == 2
    assert ("a SPEC attaches one program, and --program names 2 (getppid_tp, enter_raw): attach them at their "
            "sections' targets (no SPEC), or run one attach per program") in several.stderr
    empty = run("-p", "enter_raw|")
    assert empty.returncode == 2 and "--program 'enter_raw|': a name, or names separated by '|'" in empty.stderr
    missing = run("-p", "nope")
    assert missing.returncode != 0 and "no program named 'nope' in the object" in missing.stderr


def test_cli_attach_spec_with_alternatives(bpf_obj) -> None:
    if features.probe("tracing_programs"):
        pytest.skip("needs a kernel that refuses fentry programs (no BPF trampolines): then getppid_tp is chosen")
    run = Attached(str(bpf_obj("cli_alternatives")), "tracepoint:syscalls:sys_enter_getppid",
                   "-p", "getppid_fentry|getppid_tp")
    try:
        (line,) = [x for x in run.lines if x.startswith("attached ")]
    finally:
        rc, _out, err = run.stop()
    assert rc == 0, err
    assert line == "attached getppid_tp: tracepoint syscalls/sys_enter_getppid (link)"


if os.geteuid() != 0:  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="needs root (BPF_PROG_LOAD of tracing programs)")


def test_cli_attach_program_names_a_struct_ops_map(bpf_obj) -> None:
    from .test_struct_ops import _load_cc

    _, coll = _load_cc(bpf_obj, v2=True)  # skips where the kernel has no BPF congestion controls
    with coll:  # BPF_F_LINK kept: struct_ops links (6.4); before, the map update registers it
        how = "link" if int(coll.maps["bpfkit_reno_v2"].flags) & int(MapFlag.LINK) else "map update, no link"
    # bpfkit_reno_v2 is SEC("?.struct_ops.link"): named, it is created (with reno_init_v2);
    # bpfkit_reno and bpfkit_reno_legacy, not named, are not.
    with congestion_control_names():  # the names are the machine's: one copy of the suite at a time
        run = Attached(str(bpf_obj("struct_ops_tcp_ca")), "-p", "bpfkit_reno_v2")
        try:
            attached = [line for line in run.lines if line.startswith("attached ")]
        finally:
            rc, _out, err = run.stop()
    assert rc == 0, err
    assert attached == [f"attached bpfkit_reno_v2: struct_ops map 'bpfkit_reno_v2' (struct tcp_congestion_ops) ({how})"]
