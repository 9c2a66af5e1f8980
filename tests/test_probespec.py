# SPDX-License-Identifier: Apache-2.0
"""bpftrace-grammar probe specs: every form, every alias, and errors that point at the bad part."""

import pytest

from bpfkit.errors import ParseError
from bpfkit.probespec import ALIASES, parse_probe


@pytest.mark.parametrize(
    "text, fields",
    [
        ("kprobe:do_sys_open", dict(kind="kprobe", function="do_sys_open")),
        ("k:do_sys_open+0x10", dict(kind="kprobe", function="do_sys_open", offset=16)),
        ("kprobe:nf_conntrack:nf_ct_delete", dict(kind="kprobe", module="nf_conntrack", function="nf_ct_delete")),
        ("kprobe:tcp_v4_rcv.isra.0", dict(kind="kprobe", function="tcp_v4_rcv.isra.0")),
        ("kr:vfs_read", dict(kind="kretprobe", function="vfs_read")),
        ("uprobe:/bin/bash:readline", dict(kind="uprobe", binary="/bin/bash", function="readline")),
        ("u:libc:malloc", dict(kind="uprobe", binary="libc", function="malloc")),
        ("uprobe:/bin/true:main+4", dict(kind="uprobe", binary="/bin/true", function="main", offset=4)),
        ("uprobe:/bin/true:0x1234", dict(kind="uprobe", binary="/bin/true", address=0x1234, function="")),
        ("ur:libc:free", dict(kind="uretprobe", binary="libc", function="free")),
        ("usdt:/usr/bin/python3:function__entry", dict(kind="usdt", function="function__entry", provider="")),
        ("U:/usr/bin/python3:python:function__entry", dict(kind="usdt", provider="python", function="function__entry")),
        ("tracepoint:syscalls:sys_enter_openat", dict(kind="tracepoint", category="syscalls", function="sys_enter_openat")),
        ("t:sched:sched_*", dict(kind="tracepoint", category="sched", function="sched_*")),
        ("rawtracepoint:sched_switch", dict(kind="rawtracepoint", function="sched_switch")),
        ("rt:module:event", dict(kind="rawtracepoint", module="module", function="event")),
        ("fentry:vfs_read", dict(kind="fentry", function="vfs_read")),
        ("fr:vfs_read", dict(kind="fexit", function="vfs_read")),
        ("profile:hz:99", dict(kind="profile", unit="hz", count=99)),
        ("p:ms:10", dict(kind="profile", unit="ms", count=10)),
        ("software:page-faults:100", dict(kind="software", event="page-faults", config=2, count=100)),
        ("s:cpu-clock", dict(kind="software", event="cpu-clock", config=0, count=0)),
        ("hardware:cache-misses:1000000", dict(kind="hardware", event="cache-misses", config=3, count=1000000)),
        ("xdp:veth0", dict(kind="xdp", iface="veth0")),
        ("tc:eth0:egress", dict(kind="tc", iface="eth0", direction="egress")),
    ],
)
def test_valid_specs(text, fields):
    spec = parse_probe(text)
    for name, value in fields.items():
        assert getattr(spec, name) == value, name
    assert str(spec) == text


def test_every_alias_maps_to_a_kind():
    for alias, kind in ALIASES.items():
        assert parse_probe(f"{alias}:x:y:z" if kind == "usdt" else {
            "uprobe": f"{alias}:/bin/true:main", "uretprobe": f"{alias}:/bin/true:main",
            "tracepoint": f"{alias}:a:b", "profile": f"{alias}:hz:9",
            "software": f"{alias}:dummy", "hardware": f"{alias}:cycles",
        }.get(kind, f"{alias}:fn")).kind == kind


def test_wildcards_and_return_flags():
    assert parse_probe("kprobe:vfs_*").is_wildcard
    assert parse_probe("u:libc:str?").is_wildcard
    assert not parse_probe("kprobe:vfs_read").is_wildcard
    assert parse_probe("kr:f").is_return and parse_probe("ur:libc:f").is_return
    assert not parse_probe("k:f").is_return


@pytest.mark.parametrize(
    "text, column, why",
    [
        ("kprobe:do_sys_open+x", 19, "offset must be a number"),
        ("kprobez:foo", 0, "unknown probe type 'kprobez'"),
        ("kprobe:", 7, "missing target"),
        ("tracepoint:syscalls", 19, "too few fields"),
        ("tracepoint:sys.calls:x", 11, "invalid tracepoint category"),
        ("tracepoint:a:b:c", 15, "too many fields"),
        ("kretprobe:f+4", 11, "takes no offset"),
        ("uprobe::malloc", 7, "missing binary"),
        ("profile:min:5", 8, "unknown unit"),
        ("profile:hz:0", 11, "rate must be positive"),
        ("software:bogus", 9, "unknown software event"),
        ("tc:eth0:sideways", 8, "direction must be ingress or egress"),
        ("kprobe:1abc", 7, "invalid function name"),
    ],
)
def test_errors_point_at_the_bad_part(text, column, why):
    with pytest.raises(ParseError) as info:
        parse_probe(text)
    first, second = str(info.value).split("\n")
    assert first == f"bad probe spec: {text}"
    assert why in second
    assert second.index("^") == len("bad probe spec: ") + column


def test_empty_spec():
    with pytest.raises(ParseError, match="empty"):
        parse_probe("  ")


def test_session_specs():
    spec = parse_probe("uprobe.session:libc:str*")
    assert (spec.kind, spec.binary, spec.function, spec.is_wildcard) == ("uprobe.session", "libc", "str*", True)
    spec = parse_probe("kprobe.session:vfs_read")
    assert (spec.kind, spec.function, spec.module) == ("kprobe.session", "vfs_read", "")
    for bad, why in (("kprobe.session:mod:fn", "too many fields"), ("uprobe.session:libc", "too few fields"),
                     ("uprobe.session::fn", "missing binary"), ("kprobe.session:fn+4", "invalid function name")):
        with pytest.raises(ParseError, match=why):
            parse_probe(bad)


def test_uprobe_function_with_a_symbol_version():
    """A binary's function may name its version (issue #21): memcpy@GLIBC_2.2.5 is glibc's compat
    memcpy, memcpy@@GLIBC_2.14 the default one a plain name means; not with a wildcard, and not
    for kernel functions."""
    for text, func, offset in (("uprobe:libc:memcpy@GLIBC_2.2.5", "memcpy@GLIBC_2.2.5", 0),
                               ("ur:libc:memcpy@@GLIBC_2.14", "memcpy@@GLIBC_2.14", 0),
                               ("uprobe:/lib/libc.so.6:memcpy@GLIBC_2.2.5+4", "memcpy@GLIBC_2.2.5", 4),
                               ("uprobe.session:libc:memcpy@GLIBC_2.2.5", "memcpy@GLIBC_2.2.5", 0)):
        spec = parse_probe(text)
        assert (spec.function, spec.offset, spec.is_wildcard) == (func, offset, False), text
    for bad in ("uprobe:libc:mem*@GLIBC_2.2.5", "uprobe:libc:memcpy@", "uprobe:libc:@GLIBC_2.2.5",
                "kprobe:vfs_read@X"):
        with pytest.raises(ParseError, match="invalid function name"):
            parse_probe(bad)
