# SPDX-License-Identifier: Apache-2.0
"""The section-name table (libbpf's section_defs as data) and libbpf's matching rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit._kernel.consts import BPF_F_SLEEPABLE, BPF_F_XDP_HAS_FRAGS, AttachType, ProgType
from bpfkit.sections import LIBBPF_VERSION, SECTION_DEFS, match_section
from conftest import source_path

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "section, prog_type, attach_type, attach_to",
    [
        ("tracepoint/syscalls/sys_enter_openat", ProgType.TRACEPOINT, None, "syscalls/sys_enter_openat"),
        ("tp/sched/sched_switch", ProgType.TRACEPOINT, None, "sched/sched_switch"),
        ("kprobe/do_sys_open", ProgType.KPROBE, None, "do_sys_open"),
        ("kretprobe/do_sys_open", ProgType.KPROBE, None, "do_sys_open"),
        ("uprobe//bin/bash:readline", ProgType.KPROBE, None, "/bin/bash:readline"),
        ("uretprobe/libc.so.6:malloc", ProgType.KPROBE, None, "libc.so.6:malloc"),
        ("ksyscall/openat", ProgType.KPROBE, None, "openat"),
        ("usdt/libc:setjmp", ProgType.KPROBE, None, "libc:setjmp"),
        ("kprobe.multi/do_*", ProgType.KPROBE, AttachType.TRACE_KPROBE_MULTI, "do_*"),
        ("uprobe.multi//bin/true:m*", ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, "/bin/true:m*"),
        ("raw_tp/sched_switch", ProgType.RAW_TRACEPOINT, None, "sched_switch"),
        ("raw_tracepoint.w/foo", ProgType.RAW_TRACEPOINT_WRITABLE, None, "foo"),
        ("tp_btf/sched_switch", ProgType.TRACING, AttachType.TRACE_RAW_TP, "sched_switch"),
        ("fentry/do_unlinkat", ProgType.TRACING, AttachType.TRACE_FENTRY, "do_unlinkat"),
        ("fexit/do_unlinkat", ProgType.TRACING, AttachType.TRACE_FEXIT, "do_unlinkat"),
        ("fmod_ret/x", ProgType.TRACING, AttachType.MODIFY_RETURN, "x"),
        ("freplace/handler", ProgType.EXT, None, "handler"),
        ("lsm/file_open", ProgType.LSM, AttachType.LSM_MAC, "file_open"),
        ("iter/task", ProgType.TRACING, AttachType.TRACE_ITER, "task"),
        ("perf_event", ProgType.PERF_EVENT, None, ""),
        ("xdp", ProgType.XDP, AttachType.XDP, ""),
        ("xdp/devmap", ProgType.XDP, AttachType.XDP_DEVMAP, ""),
        ("tc", ProgType.SCHED_CLS, None, ""),
        ("classifier", ProgType.SCHED_CLS, None, ""),
        ("action", ProgType.SCHED_ACT, None, ""),
        ("tcx/ingress", ProgType.SCHED_CLS, AttachType.TCX_INGRESS, ""),
        ("netkit/peer", ProgType.SCHED_CLS, AttachType.NETKIT_PEER, ""),
        ("cgroup_skb/egress", ProgType.CGROUP_SKB, AttachType.CGROUP_INET_EGRESS, ""),
        ("cgroup/connect4", ProgType.CGROUP_SOCK_ADDR, AttachType.CGROUP_INET4_CONNECT, ""),
        ("cgroup/sock", ProgType.CGROUP_SOCK, AttachType.CGROUP_INET_SOCK_CREATE, ""),
        ("sk_skb/stream_parser", ProgType.SK_SKB, AttachType.SK_SKB_STREAM_PARSER, ""),
        ("sk_msg", ProgType.SK_MSG, AttachType.SK_MSG_VERDICT, ""),
        ("sockops", ProgType.SOCK_OPS, AttachType.CGROUP_SOCK_OPS, ""),
        ("socket", ProgType.SOCKET_FILTER, None, ""),
        ("flow_dissector", ProgType.FLOW_DISSECTOR, AttachType.FLOW_DISSECTOR, ""),
        ("netfilter", ProgType.NETFILTER, AttachType.NETFILTER, ""),
        ("syscall", ProgType.SYSCALL, None, ""),
        ("struct_ops/my_op", ProgType.STRUCT_OPS, None, "my_op"),
        ("sk_lookup", ProgType.SK_LOOKUP, AttachType.SK_LOOKUP, ""),
    ],
)
def test_known_sections(section, prog_type, attach_type, attach_to):
    info = match_section(section)
    assert (info.prog_type, info.attach_type, info.attach_to) == (prog_type, attach_type, attach_to)
    assert info.autoload and info.section == section


def test_plus_means_exact_or_slash_extra():
    assert match_section("kprobe").prog_type == ProgType.KPROBE
    assert match_section("kprobe").attach_to == ""
    # "kprobeX" is not "kprobe" followed by "/": no match (libbpf's sec_def_matches).
    assert match_section("kprobeX").prog_type == ProgType.UNSPEC
    assert match_section("kprobeX").definition is None


def test_exact_entries_do_not_take_extras():
    assert match_section("socket/extra").prog_type == ProgType.UNSPEC
    assert match_section("sk_skb/whatever").prog_type == ProgType.UNSPEC


def test_question_mark_disables_autoload():
    info = match_section("?tp/syscalls/sys_enter_getpid")
    assert not info.autoload
    assert info.section == "tp/syscalls/sys_enter_getpid"
    assert info.prog_type == ProgType.TRACEPOINT and info.attach_to == "syscalls/sys_enter_getpid"


def test_flags_become_prog_flags():
    assert match_section("uprobe.s//bin/true:main").prog_flags == BPF_F_SLEEPABLE
    assert match_section("xdp.frags").prog_flags == BPF_F_XDP_HAS_FRAGS
    assert match_section("syscall").prog_flags == BPF_F_SLEEPABLE
    assert match_section("xdp").prog_flags == 0


def test_first_match_wins_in_table_order():
    # "sk_reuseport/migrate" is listed before "sk_reuseport".
    assert match_section("sk_reuseport/migrate").attach_type == AttachType.SK_REUSEPORT_SELECT_OR_MIGRATE
    assert match_section("sk_reuseport").attach_type == AttachType.SK_REUSEPORT_SELECT
    assert match_section("uprobe.s/x").kind == "uprobe.s"
    assert match_section("uretprobe/x").kind == "uretprobe"


def test_table_is_marked_generated_and_complete():
    text = source_path("bpfkit/sections.py").read_text()
    assert f"generated by scripts/gen_sections.py from libbpf v{LIBBPF_VERSION}" in text
    assert len(SECTION_DEFS) > 90
    secs = [d.sec for d in SECTION_DEFS]
    assert len(secs) == len(set(secs))
    for prefix in ("kprobe+", "uprobe.s+", "ksyscall+", "usdt+", "kprobe.multi+", "uprobe.multi+",
                   "tracepoint+", "tp+", "raw_tracepoint+", "raw_tp+", "tp_btf+", "fentry+", "fexit+",
                   "fmod_ret+", "freplace+", "lsm+", "iter+", "perf_event", "xdp", "tc", "tcx/ingress",
                   "netkit/primary", "cgroup/dev", "sockops", "socket", "flow_dissector", "netfilter",
                   "syscall", "struct_ops+", "sk_lookup"):
        assert prefix in secs, prefix


FAKE_LIBBPF = """
static const struct bpf_sec_def section_defs[] = {
	SEC_DEF("socket",		SOCKET_FILTER, 0, SEC_NONE),
	/* SEC_DEF("commented",	XDP, 0, SEC_NONE), */
	SEC_DEF("kprobe+",		KPROBE,	0, SEC_NONE, attach_kprobe),
	SEC_DEF("fentry.s+",		TRACING, BPF_TRACE_FENTRY, SEC_ATTACH_BTF | SEC_SLEEPABLE, attach_trace),
	SEC_DEF("xdp",			XDP, BPF_XDP, SEC_ATTACHABLE_OPT),
};
"""


def test_generator_reads_section_defs(tmp_path):
    src = tmp_path / "libbpf.c"
    src.write_text(FAKE_LIBBPF)
    out = tmp_path / "sections.py"
    out.write_text("head\n# BEGIN GENERATED\nold\n# END GENERATED\ntail\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_sections.py"), str(src), "--version", "9.9.9", "--output", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.startswith("head\n# BEGIN GENERATED\n") and text.endswith("# END GENERATED\ntail\n")
    assert "from libbpf v9.9.9" in text
    assert 'SectionDef("socket", ProgType.SOCKET_FILTER, None, SecFlag.NONE)' in text
    assert 'SectionDef("fentry.s+", ProgType.TRACING, AttachType.TRACE_FENTRY, SecFlag.ATTACH_BTF | SecFlag.SLEEPABLE)' in text
    assert 'SectionDef("xdp", ProgType.XDP, AttachType.XDP, SecFlag.ATTACHABLE_OPT)' in text
    assert "commented" not in text


def test_generator_refuses_unknown_types(tmp_path):
    src = tmp_path / "libbpf.c"
    src.write_text(FAKE_LIBBPF.replace("SOCKET_FILTER", "BRAND_NEW_TYPE"))
    out = tmp_path / "sections.py"
    out.write_text("# BEGIN GENERATED\n# END GENERATED\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_sections.py"), str(src), "--version", "1", "--output", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode != 0 and "BRAND_NEW_TYPE" in proc.stderr
