# SPDX-License-Identifier: Apache-2.0
"""Multi-attach without a kernel: modes, cookie alignment, sections, info decoding."""

from __future__ import annotations

import pytest

from bpfkit import attach, link
from bpfkit._kernel.abi import ffi
from bpfkit._kernel.consts import BPF_F_KPROBE_MULTI_RETURN, BPF_F_UPROBE_MULTI_RETURN, LinkType
from bpfkit.errors import UsageError
from bpfkit.link import multi
from bpfkit.link.base import _INFO_DECODERS, _LINK_CLASSES


def test_modes_parse_and_refuse_unknown_ones() -> None:
    assert multi.MultiMode.of("PERF") is multi.MultiMode.PERF
    assert multi.MultiMode.of(multi.MultiMode.MULTI) is multi.MultiMode.MULTI
    with pytest.raises(UsageError, match="expected auto, multi or perf"):
        multi.MultiMode.of("links")


def test_cookies_align_with_targets() -> None:
    names = ["a", "b", "c"]
    assert multi._cookies_for(names, None, "x") == [0, 0, 0]
    assert multi._cookies_for(names, [1, 2, 3], "x") == [1, 2, 3]
    assert multi._cookies_for(names, {"b": 7}, "x") == [0, 7, 0]
    assert multi._cookies_for(names, attach._same_cookie(5), "x") == [5, 5, 5]
    assert attach._same_cookie(0) is None
    with pytest.raises(UsageError, match="2 cookies for 3 targets"):
        multi._cookies_for(names, [1, 2], "x")
    with pytest.raises(UsageError, match="not attached: z"):
        multi._cookies_for(names, {"z": 1}, "x")
    with pytest.raises(UsageError, match="unsigned 64-bit"):
        multi._cookies_for(["a"], [-1], "x")


def test_duplicates_are_refused() -> None:
    multi._check_unique(["a", "b"], "x")
    with pytest.raises(UsageError, match="a, b given more than once"):
        multi._check_unique(["a", "b", "a", "b", "c"], "x")


def test_glob_detection() -> None:
    assert multi._is_pattern("vfs_*") and multi._is_pattern("str?") and multi._is_pattern("[ab]x")
    assert not multi._is_pattern("vfs_read")


@pytest.mark.parametrize("section,kind,target", [
    ("uprobe.multi/libc.so.6:str*", "uprobe_multi", "libc.so.6:str*"),
    ("uprobe.multi.s//usr/bin/bash:read*", "uprobe_multi", "/usr/bin/bash:read*"),
    ("uretprobe.multi/libc.so.6:malloc", "uretprobe_multi", "libc.so.6:malloc"),
    ("uretprobe.multi.s/libc:f*", "uretprobe_multi", "libc:f*"),
    ("kprobe.multi/vfs_*", "kprobe_multi", "vfs_*"),
    ("kretprobe.multi/do_sys_*", "kretprobe_multi", "do_sys_*"),
    ("kprobe.multi", "kprobe_multi", ""),
])
def test_sections_are_plugged(section: str, kind: str, target: str) -> None:
    parsed = link.parse_section(section)
    assert parsed is not None and parsed.kind == kind and parsed.target == target


def test_targetless_sections_say_so() -> None:
    from bpfkit.errors import NotSupportedError, ParseError
    with pytest.raises(NotSupportedError, match="names no binary"):
        link.attach_section(0, "uprobe.multi")
    with pytest.raises(NotSupportedError, match="names no functions"):
        link.attach_section(0, "kprobe.multi")
    with pytest.raises(ParseError, match="expected BINARY:PATTERN"):
        link.attach_section(0, "uprobe.multi/str*")


def test_info_decoders_and_link_classes_are_registered() -> None:
    raw = ffi.new("struct bpf_link_info *")
    raw.type = int(LinkType.KPROBE_MULTI)
    raw.kprobe_multi.count, raw.kprobe_multi.flags, raw.kprobe_multi.missed = 4, BPF_F_KPROBE_MULTI_RETURN, 2
    assert _INFO_DECODERS[int(LinkType.KPROBE_MULTI)](raw) == link.KprobeMultiInfo(4, True, 2)
    raw = ffi.new("struct bpf_link_info *")
    raw.type = int(LinkType.UPROBE_MULTI)
    raw.uprobe_multi.count, raw.uprobe_multi.flags, raw.uprobe_multi.pid = 3, BPF_F_UPROBE_MULTI_RETURN, 42
    assert _INFO_DECODERS[int(LinkType.UPROBE_MULTI)](raw) == link.UprobeMultiInfo(3, True, 42)
    assert _LINK_CLASSES[int(LinkType.KPROBE_MULTI)](_FakeFD(), None).kind == "kprobe_multi"
    assert _LINK_CLASSES[int(LinkType.UPROBE_MULTI)](_FakeFD(), "/p").pinned_path == "/p"


class _FakeFD:
    closed = False
    raw = -1


def test_link_create_attr_layout_matches_the_uapi() -> None:
    # include/uapi/linux/bpf.h: link_create's union starts at offset 16; kprobe_multi's
    # syms at 24, uprobe_multi's cnt at 48 and pid at 56.
    attr = ffi.new("union bpf_attr *")
    base = int(ffi.cast("uintptr_t", attr))

    def off(struct: object, field: str) -> int:
        return int(ffi.cast("uintptr_t", ffi.addressof(struct, field))) - base

    lc = attr.link_create
    assert off(lc.kprobe_multi, "flags") == 16 and off(lc.kprobe_multi, "syms") == 24
    assert off(lc.kprobe_multi, "cookies") == 40
    assert off(lc.uprobe_multi, "path") == 16 and off(lc.uprobe_multi, "cnt") == 48
    assert off(lc.uprobe_multi, "pid") == 56
    assert ffi.offsetof("union bpf_attr", "link_create") == 0
    assert ffi.offsetof("struct bpf_link_info", "kprobe_multi") == ffi.offsetof("struct bpf_link_info", "uprobe_multi") == 16


def test_sessions_have_no_perf_form_and_sections_plug_in() -> None:
    # Refused before any kernel call: a session exists only as a multi link.
    with pytest.raises(UsageError, match="no perf-event form"):
        multi._require_session(link.MultiMode.PERF, "uprobe_session", "BPF_TRACE_UPROBE_SESSION")
    for section, kind in (("uprobe.session/libc.so.6:getpp*", "uprobe_session"),
                          ("uprobe.session.s/libc.so.6:f", "uprobe_session"), ("kprobe.session/vfs_*", "kprobe_session")):
        target = link.parse_section(section)
        assert target is not None and target.kind == kind and link.skip_reason(section) is None
    assert link.kprobe_session is multi.kprobe_session and link.uprobe_session is multi.uprobe_session
