# SPDX-License-Identifier: Apache-2.0
"""Raw tracepoint, tracing and iterator links without a kernel: argument checks, the section
table, the iterator parameter layout, the pre-5.7 fd object (a real pre-5.7 kernel is not
available here, so it wraps a pipe fd), and the probe-spec/target agreement check."""

from __future__ import annotations

import os
import struct
from types import SimpleNamespace

import pytest

from bpfkit import link
from bpfkit._kernel import bpf as _bpf
from bpfkit._kernel.consts import AttachType, ProgType
from bpfkit._kernel.fd import FD
from bpfkit.errors import NotSupportedError, UsageError
from bpfkit.attach import attach_probe, parse_section
from bpfkit.probespec import parse_probe
from bpfkit.program import ProgramSpec


def fake_prog(ptype: ProgType, attach_type: AttachType | None = None, attach_to: str = "", name: str = "p") -> SimpleNamespace:
    # fd 0 is never a program: anything that reaches the kernel fails the _prog_fd check.
    return SimpleNamespace(type=ptype, attach_type=attach_type, attach_to=attach_to, name=name, fd=0)


@pytest.mark.parametrize("section,kind,target", [
    ("raw_tp/sys_enter", "raw_tracepoint", "sys_enter"),
    ("raw_tracepoint/sched_switch", "raw_tracepoint", "sched_switch"),
    ("raw_tp.w/bpf_test_finish", "raw_tracepoint", "bpf_test_finish"),
    ("raw_tracepoint.w/nbd_send_request", "raw_tracepoint", "nbd_send_request"),
    ("tp_btf/sched_switch", "tp_btf", "sched_switch"),
    ("fentry/do_unlinkat", "fentry", "do_unlinkat"),
    ("fexit/bpf_testmod:bpf_testmod_test_read", "fexit", "bpf_testmod:bpf_testmod_test_read"),
    ("fmod_ret/security_file_open", "fmod_ret", "security_file_open"),
    ("fentry.s/do_sys_openat2", "fentry", "do_sys_openat2"),
    ("fexit.s/x", "fexit", "x"),
    ("fmod_ret.s/x", "fmod_ret", "x"),
    ("lsm/file_open", "lsm", "file_open"),
    ("lsm.s/bprm_committed_creds", "lsm", "bprm_committed_creds"),
    ("iter/task", "iter", "task"),
    ("iter.s/task_vma", "iter", "task_vma"),
    ("fentry", "fentry", ""),
])
def test_sections_are_plugged(section: str, kind: str, target: str) -> None:
    t = parse_section(section)
    assert t is not None and (t.kind, t.target) == (kind, target)


def test_iter_link_info_layout() -> None:
    assert _bpf.pack_iter_link_info() == b""
    assert _bpf.pack_iter_link_info(map_fd=7) == struct.pack("<I", 7)
    assert _bpf.pack_iter_link_info(pid=42) == struct.pack("<III", 0, 42, 0)
    assert _bpf.pack_iter_link_info(tid=5) == struct.pack("<III", 5, 0, 0)
    # union bpf_iter_link_info.cgroup: order, cgroup_fd, cgroup_id (16 bytes: the union's size)
    packed = _bpf.pack_iter_link_info(cgroup_fd=3, order=2)
    assert packed == struct.pack("<IIQ", 2, 3, 0) and len(packed) == 16


def test_pre_5_7_fd_says_what_it_cannot() -> None:
    r, w = os.pipe()
    os.close(w)
    lk = link.RawTracepointFd(FD(r), "raw tracepoint sys_enter")
    assert isinstance(lk, link.Link)
    for op, args in (("pin", ("/sys/fs/bpf/x",)), ("unpin", ()), ("update", (None,)), ("detach", ()), ("info", ())):
        with pytest.raises(NotSupportedError) as caught:
            getattr(lk, op)(*args)
        assert "raw_tp bpf_link, 5.7" in str(caught.value) and "Linux 5.7" in str(caught.value)
    with lk:
        pass
    assert lk.closed
    lk.close()  # idempotent


def test_wrong_program_types_are_refused() -> None:
    with pytest.raises(UsageError, match="not raw_tracepoint"):
        link.raw_tracepoint("sys_enter", fake_prog(ProgType.KPROBE))
    with pytest.raises(UsageError, match="no tracepoint name"):
        link.raw_tracepoint("", fake_prog(ProgType.RAW_TRACEPOINT))
    with pytest.raises(UsageError, match="not a BTF tracing program"):
        link.attach_tracing(fake_prog(ProgType.TRACEPOINT))
    with pytest.raises(UsageError, match="link.iterate"):
        link.attach_tracing(fake_prog(ProgType.TRACING, AttachType.TRACE_ITER, "task"))
    with pytest.raises(NotSupportedError, match="lsm_cgroup"):
        link.attach_tracing(fake_prog(ProgType.LSM, AttachType.LSM_CGROUP, "socket_bind"))
    with pytest.raises(UsageError, match="loaded as fexit, not fentry"):
        link.fentry(fake_prog(ProgType.TRACING, AttachType.TRACE_FEXIT, "do_unlinkat"))
    with pytest.raises(UsageError, match="loaded as fentry, not lsm"):
        link.lsm(fake_prog(ProgType.TRACING, AttachType.TRACE_FENTRY, "x"))


def test_iterate_checks_parameters() -> None:
    elem = fake_prog(ProgType.TRACING, AttachType.TRACE_ITER, "bpf_map_elem")
    task = fake_prog(ProgType.TRACING, AttachType.TRACE_ITER, "task")
    with pytest.raises(UsageError, match="pass map="):
        link.iterate(elem)
    with pytest.raises(UsageError, match="map= is for"):
        link.iterate(task, map=3)
    with pytest.raises(UsageError, match="one of tid, pid, pid_fd"):
        link.iterate(task, tid=1, pid=2)
    with pytest.raises(UsageError, match="tid/pid/pid_fd are for"):
        link.iterate(elem, map=3, pid=1)
    with pytest.raises(UsageError, match="not an iterator program"):
        link.iterate(fake_prog(ProgType.TRACING, AttachType.TRACE_FENTRY, "x"))


def test_probe_spec_must_match_the_loaded_target() -> None:
    prog = fake_prog(ProgType.TRACING, AttachType.TRACE_FENTRY, "do_unlinkat", name="on_unlink")
    with pytest.raises(UsageError, match=r"loaded for 'do_unlinkat'.*set_attach_target\('vfs_read'\)"):
        attach_probe(parse_probe("fentry:vfs_read"), prog)
    with pytest.raises(UsageError, match="not fexit"):
        attach_probe(parse_probe("fexit:do_unlinkat"), prog)
    mod = fake_prog(ProgType.TRACING, AttachType.TRACE_FEXIT, "nf_conntrack:nf_confirm")
    with pytest.raises(UsageError, match="loaded for 'nf_conntrack:nf_confirm'"):
        attach_probe(parse_probe("fexit:nf_ct_delete"), mod)


def test_set_attach_target_resets_the_resolved_target() -> None:
    spec = ProgramSpec("p", ProgType.TRACING, b"", section="fentry", attach_type=AttachType.TRACE_FENTRY,
                       attach_btf_id=99, attach_btf_obj_fd=5)
    spec.set_attach_target("bpf_testmod:bpf_testmod_test_read")
    assert (spec.attach_to, spec.attach_btf_id, spec.attach_btf_obj_fd) == ("bpf_testmod:bpf_testmod_test_read", 0, 0)


def test_iter_info_decoding() -> None:
    from bpfkit.link.iter import _decode_iter

    raw = SimpleNamespace(iter=SimpleNamespace(map=SimpleNamespace(map_id=9),
                                               task=SimpleNamespace(tid=0, pid=33),
                                               cgroup=SimpleNamespace(cgroup_id=1, order=2)))
    assert _decode_iter(raw, "bpf_map_elem") == link.IterInfo("bpf_map_elem", map_id=9)
    assert _decode_iter(raw, "task") == link.IterInfo("task", pid=33)
    assert _decode_iter(raw, "cgroup") == link.IterInfo("cgroup", cgroup_id=1, order=2)
    assert _decode_iter(raw, "bpf_prog") == link.IterInfo("bpf_prog")
