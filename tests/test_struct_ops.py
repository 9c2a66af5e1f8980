# SPDX-License-Identifier: Apache-2.0
"""struct_ops parsing (no kernel) and the layout against this kernel's BTF (read-only
/sys/kernel/btf/vmlinux; skipped where it lacks struct bpf_struct_ops_tcp_congestion_ops)."""

from __future__ import annotations

import struct

import pytest

import bpfkit
from bpfkit._kernel.consts import MapFlag, MapType, ProgType
from bpfkit.errors import NotFoundError, UsageError
from bpfkit.struct_ops import essential_name, find_kernel_struct_ops, plan, fill_programs


def test_sections_become_struct_ops_maps(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("struct_ops_tcp_ca"))
    link_map = spec.maps["bpfkit_reno"]
    assert link_map.type == MapType.STRUCT_OPS
    assert link_map.key_size == 4 and link_map.max_entries == 1
    assert link_map.flags == int(MapFlag.LINK)
    ops = link_map.struct_ops
    assert ops.type_name == "tcp_congestion_ops" and ops.section == ".struct_ops.link" and ops.autocreate
    assert ops.programs == {"init": "reno_init", "cong_avoid": "reno_cong_avoid", "ssthresh": "reno_ssthresh",
                            "undo_cwnd": "reno_undo_cwnd", "release": "reno_release", "set_state": "reno_set_state"}
    legacy = spec.maps["bpfkit_reno_legacy"]
    assert legacy.flags == 0 and legacy.struct_ops.section == ".struct_ops"
    assert not spec.maps["bpfkit_reno_v2"].struct_ops.autocreate  # SEC("?.struct_ops.link")
    assert spec.programs["reno_init"].type == ProgType.STRUCT_OPS
    copy = spec.copy()
    copy.maps["bpfkit_reno"].struct_ops.programs["init"] = "x"
    assert spec.maps["bpfkit_reno"].struct_ops.programs["init"] == "reno_init"


def test_flavored_type_name(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("struct_ops_scx"))
    ops = spec.maps["bpfkit_fifo"].struct_ops
    assert ops.type_name == "sched_ext_ops___bpfkit" and ops.kernel_type_name == "sched_ext_ops"
    assert ops.programs == {"enqueue": "fifo_enqueue"}
    assert essential_name("a___b___c") == "a" and essential_name("plain") == "plain"


@pytest.fixture
def tcp_ca():
    try:
        return find_kernel_struct_ops("tcp_congestion_ops")
    except NotFoundError as exc:
        pytest.skip(str(exc))


def test_layout_against_kernel(bpf_obj, tcp_ca):
    spec = bpfkit.load_spec(bpf_obj("struct_ops_tcp_ca"))
    ops = spec.maps["bpfkit_reno_legacy"].struct_ops
    layout = plan("bpfkit_reno_legacy", ops, tcp_ca)
    assert len(layout.value) == tcp_ca.value_size
    names = [m.name for m in tcp_ca.type.members]
    assert {m: idx for m, (idx, _) in layout.slots.items()} == {m: names.index(m) for m in ops.programs}
    name_off = tcp_ca.data_offset + tcp_ca.type.member("name").byte_offset
    assert bytes(layout.value[name_off : name_off + 13]) == b"bpfkit_reno2\0"
    flags_off = tcp_ca.data_offset + tcp_ca.type.member("flags").byte_offset
    assert layout.value[flags_off] == 1
    value = fill_programs(layout, ops, {"reno_init": 42})
    _, init_off = layout.slots["init"]
    assert struct.unpack_from("<Q", value, init_off)[0] == 42
    _, ssthresh_off = layout.slots["ssthresh"]
    assert struct.unpack_from("<Q", value, ssthresh_off)[0] == 0  # not loaded: left zero


def test_layout_errors(bpf_obj, tcp_ca):
    spec = bpfkit.load_spec(bpf_obj("struct_ops_tcp_ca"))
    ops = spec.maps["bpfkit_reno"].struct_ops
    ops.programs["no_such_member"] = "reno_init"
    with pytest.raises(UsageError, match="member 'no_such_member' is set to a program but is not a function pointer"):
        plan("bpfkit_reno", ops, tcp_ca)
