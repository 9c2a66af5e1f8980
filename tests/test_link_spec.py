# SPDX-License-Identifier: Apache-2.0
"""The link layer's pure parts: section targets, probe names, tracefs lines, symbols, modes."""

from __future__ import annotations

import os
import platform

import pytest

from bpfkit._kernel.tracefs import ProbeEvent, parse_probe_events
from bpfkit.errors import ParseError, UsageError
from bpfkit.link import AttachMode, SectionTarget, parse_section, syscall_wrapper
from bpfkit.link.kprobe import validate_kernel_symbol
from bpfkit.link.tracefs_probes import GROUP_PREFIX, event_name, new_group, parse_group
from bpfkit.link.tracepoint import split_tracepoint


@pytest.mark.parametrize(
    "section, want",
    [
        ("kprobe/do_sys_open", SectionTarget("kprobe", "do_sys_open", "do_sys_open")),
        ("kprobe/tcp_v4_connect+0x10", SectionTarget("kprobe", "tcp_v4_connect+0x10", "tcp_v4_connect", 16)),
        ("kprobe/udp_send_skb.isra.52", SectionTarget("kprobe", "udp_send_skb.isra.52", "udp_send_skb.isra.52")),
        ("kretprobe/do_sys_open", SectionTarget("kretprobe", "do_sys_open", "do_sys_open")),
        ("ksyscall/openat", SectionTarget("ksyscall", "openat", "openat")),
        ("kretsyscall/openat", SectionTarget("kretsyscall", "openat", "openat")),
        ("tracepoint/syscalls/sys_enter_openat",
         SectionTarget("tracepoint", "syscalls/sys_enter_openat", "sys_enter_openat", group="syscalls")),
        ("tp/sched/sched_switch", SectionTarget("tracepoint", "sched/sched_switch", "sched_switch", group="sched")),
        ("uprobe//usr/lib/x86_64-linux-gnu/libc.so.6:malloc",
         SectionTarget("uprobe", "/usr/lib/x86_64-linux-gnu/libc.so.6:malloc", "malloc",
                       binary="/usr/lib/x86_64-linux-gnu/libc.so.6")),
        ("uprobe/libc.so.6:malloc+4", SectionTarget("uprobe", "libc.so.6:malloc+4", "malloc", 4, binary="libc.so.6")),
        ("uprobe//bin/bash:0x1234", SectionTarget("uprobe", "/bin/bash:0x1234", binary="/bin/bash", file_offset=0x1234)),
        ("uretprobe//bin/bash:readline", SectionTarget("uretprobe", "/bin/bash:readline", "readline", binary="/bin/bash")),
        ("uprobe.s//bin/bash:readline", SectionTarget("uprobe", "/bin/bash:readline", "readline", binary="/bin/bash")),
        ("?tp/syscalls/sys_enter_getppid",
         SectionTarget("tracepoint", "syscalls/sys_enter_getppid", "sys_enter_getppid", group="syscalls")),
        ("kprobe", SectionTarget("kprobe")),
        ("uprobe", SectionTarget("uprobe")),
        ("tracepoint", SectionTarget("tracepoint")),
    ],
)
def test_parse_section(section: str, want: SectionTarget) -> None:
    assert parse_section(section) == want


@pytest.mark.parametrize("section", ["socket", "license"])  # kprobe.multi/: bpfkit.link.multi
def test_sections_not_attached_here(section: str) -> None:
    assert parse_section(section) is None


def test_a_bare_xdp_section_names_no_interface() -> None:
    # xdp/IFACE attaches (ebpf_exporter's sections); a bare SEC("xdp") parses with no interface
    # and is never auto-attached, with the reason.
    from bpfkit.link.attach import skip_reason

    assert parse_section("xdp") == SectionTarget("xdp", "")
    assert parse_section("xdp/eth0") == SectionTarget("xdp", "eth0")
    assert "xdp/IFACE" in (skip_reason("xdp") or "")


@pytest.mark.parametrize("section", ["tracepoint/syscalls", "uprobe//bin/bash", "uprobe/:main", "kprobe/+0x10"])
def test_malformed_sections(section: str) -> None:
    with pytest.raises(ParseError):
        parse_section(section)


def test_split_tracepoint() -> None:
    assert split_tracepoint("syscalls/sys_enter_openat") == ("syscalls", "sys_enter_openat")
    assert split_tracepoint("syscalls:sys_enter_openat") == ("syscalls", "sys_enter_openat")
    with pytest.raises(UsageError):
        split_tracepoint("sys_enter_openat")


def test_group_names_carry_the_owner_pid() -> None:
    group = new_group()
    assert group.startswith(GROUP_PREFIX + "_") and len(group) <= 63
    assert parse_group(group) == os.getpid()
    assert parse_group(new_group(pid=4242)) == 4242
    assert new_group() != new_group()
    for other in ("kprobes", "ebpf_1234abcd", "bpfkit_12", "bpfkit_x_deadbeef", "bpfkit_1_DEADBEEF"):
        assert parse_group(other) is None


@pytest.mark.parametrize(
    "hint, want",
    [
        ("do_sys_open", "do_sys_open"),
        ("udp_send_skb.isra.52", "udp_send_skb_isra_52"),
        ("libc.so.6_malloc", "libc_so_6_malloc"),
        ("0x1234", "_0x1234"),
        ("nf_conntrack:nf_ct_delete", "nf_conntrack_nf_ct_delete"),
        ("", "probe"),
        ("x" * 100, "x" * 48),
    ],
)
def test_event_names(hint: str, want: str) -> None:
    assert event_name(hint) == want


def test_parse_probe_events() -> None:
    text = (
        "p:bpfkit_123_0011aabb/do_sys_open do_sys_open\n"
        "r16:bpfkit_123_0011aabc/do_sys_open do_sys_open\n"
        "p:kprobes/p_tcp_v4_connect_0 tcp_v4_connect+16\n"
        "garbage line\n"
    )
    events = parse_probe_events("kprobe", text)
    assert events == [
        ProbeEvent("kprobe", False, "bpfkit_123_0011aabb", "do_sys_open", "do_sys_open", 0),
        ProbeEvent("kprobe", True, "bpfkit_123_0011aabc", "do_sys_open", "do_sys_open", 16),
        ProbeEvent("kprobe", False, "kprobes", "p_tcp_v4_connect_0", "tcp_v4_connect+16", 0),
    ]
    (up,) = parse_probe_events("uprobe", "r:bpfkit_9_01234567/bash_readline /usr/bin/bash:0x00000000000b1234(0x10)\n")
    assert up.retprobe and up.target == "/usr/bin/bash:0x00000000000b1234(0x10)"


@pytest.mark.parametrize("symbol", ["do_sys_open", "udp_send_skb.isra.52", "nf_conntrack:nf_ct_delete", "_x", "__x64_sys_openat"])
def test_valid_kernel_symbols(symbol: str) -> None:
    assert validate_kernel_symbol(symbol) == symbol


@pytest.mark.parametrize("symbol", ["", "1abc", "do sys", "a/b", ".isra", "do_sys_open+4", "a:b:c"])
def test_invalid_kernel_symbols(symbol: str) -> None:
    with pytest.raises(ParseError):
        validate_kernel_symbol(symbol)


def test_syscall_wrapper() -> None:
    if platform.machine() != "x86_64":
        pytest.skip("checks the x86_64 prefix")
    assert syscall_wrapper("sys_openat") == "__x64_sys_openat"
    assert syscall_wrapper("__x64_sys_openat") == "__x64_sys_openat"
    assert syscall_wrapper("mod:sym") == "mod:sym"


def test_attach_mode_of() -> None:
    assert AttachMode.of("link") is AttachMode.LINK
    assert AttachMode.of("IOCTL") is AttachMode.IOCTL
    assert AttachMode.of(AttachMode.AUTO) is AttachMode.AUTO
    with pytest.raises(UsageError):
        AttachMode.of("legacy")
