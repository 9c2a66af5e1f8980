# SPDX-License-Identifier: Apache-2.0
"""Pure parts of the cgroup, netns, socket and netfilter link kinds (no root, no kernel):
hook names, enum parsing, section skip reasons, info decoding. The kernel behaviour is in
integration/test_link_{cgroup,netns,socket,netfilter}.py."""

from __future__ import annotations

import pytest

from bpfkit import attach, link
from bpfkit._kernel import abi
from bpfkit._kernel.consts import AttachType, LinkType
from bpfkit.errors import UsageError
from bpfkit.link import base
from bpfkit.link.cgroup import cgroup_hook, hook_name
from bpfkit.sections import SECTION_DEFS


def test_every_cgroup_section_names_a_known_hook() -> None:
    # Every libbpf section whose attach type is a cgroup hook maps back to a short name.
    cgroup_types = {at for at, _ in link.CGROUP_HOOKS.values()}
    for d in SECTION_DEFS:
        if d.prefix.startswith(("cgroup", "sockops")) and d.attach_type is not None and d.prog_type.name != "LSM":
            assert d.attach_type in cgroup_types, d.sec
            assert link.CGROUP_HOOKS[hook_name(d.attach_type)][1] == d.prog_type, d.sec


@pytest.mark.parametrize("text, want", [("connect4", AttachType.CGROUP_INET4_CONNECT),
                                        ("cgroup_inet_egress", AttachType.CGROUP_INET_EGRESS),
                                        ("BPF_CGROUP_SYSCTL", AttachType.CGROUP_SYSCTL),
                                        (AttachType.CGROUP_DEVICE, AttachType.CGROUP_DEVICE)])
def test_cgroup_hook_names(text: object, want: AttachType) -> None:
    assert cgroup_hook(text) == want  # type: ignore[arg-type]


def test_cgroup_hook_refuses_others() -> None:
    with pytest.raises(UsageError, match="unknown cgroup hook 'connect5'"):
        cgroup_hook("connect5")
    with pytest.raises(UsageError, match="trace_fentry is not a cgroup hook"):
        cgroup_hook(AttachType.TRACE_FENTRY)


@pytest.mark.parametrize("value, want", [("ipv4", 2), ("IPV6", 10), ("nfproto_ipv4", 2), (10, 10), ("inet6", 10)])
def test_netfilter_family(value: object, want: int) -> None:
    assert link.NetfilterFamily.of(value) == want  # type: ignore[arg-type]


@pytest.mark.parametrize("value, want", [("output", 3), ("input", 1), ("NF_INET_FORWARD", 2), (4, 4)])
def test_netfilter_hook(value: object, want: int) -> None:
    assert link.NetfilterHook.of(value) == want  # type: ignore[arg-type]


def test_netfilter_bad_names() -> None:
    with pytest.raises(UsageError, match="unknown netfilter hook 7"):
        link.NetfilterHook.of(7)
    with pytest.raises(UsageError, match="unknown netfilter family 'arp'"):
        link.NetfilterFamily.of("arp")


@pytest.mark.parametrize("section, says", [
    ("socket", "attach_socket_filter"), ("sk_reuseport", "attach_reuseport"),
    ("sk_skb/stream_verdict", "attach_sockmap"), ("sk_msg", "attach_sockmap"),
    ("sk_lookup", "attach_netns"), ("flow_dissector", "attach_netns"), ("netfilter", "attach_netfilter"),
    ("cgroup/skb", "names no hook"),
])
def test_hand_attached_sections_say_how(section: str, says: str) -> None:
    reason = attach.skip_reason(section)
    assert reason is not None and says in reason


@pytest.mark.parametrize("section", ["cgroup/connect4", "cgroup_skb/egress", "sockops", "cgroup/sysctl", "cgroup/dev"])
def test_cgroup_sections_are_auto_attached(section: str) -> None:
    assert attach.skip_reason(section) is None


def _raw(link_type: LinkType) -> object:
    raw = abi.ffi.new("struct bpf_link_info *")
    raw.type = int(link_type)
    raw.id, raw.prog_id = 5, 6
    return raw


def test_info_decoders() -> None:
    raw: object = _raw(LinkType.CGROUP)
    raw.cgroup.cgroup_id, raw.cgroup.attach_type = 77, int(AttachType.CGROUP_INET4_CONNECT)  # type: ignore[attr-defined]
    info = base._decode_info(raw, "")
    assert info.detail == link.CgroupInfo(77, AttachType.CGROUP_INET4_CONNECT) and info.detail.hook == "connect4"
    raw = _raw(LinkType.NETNS)
    raw.netns.netns_ino, raw.netns.attach_type = 4026531840, int(AttachType.SK_LOOKUP)  # type: ignore[attr-defined]
    assert base._decode_info(raw, "").detail.hook == "sk_lookup"
    raw = _raw(LinkType.SOCKMAP)
    raw.sockmap.map_id, raw.sockmap.attach_type = 9, int(AttachType.SK_MSG_VERDICT)  # type: ignore[attr-defined]
    assert base._decode_info(raw, "").detail == link.SockmapInfo(9, AttachType.SK_MSG_VERDICT)
    raw = _raw(LinkType.NETFILTER)
    nf = raw.netfilter  # type: ignore[attr-defined]
    nf.pf, nf.hooknum, nf.priority, nf.flags = 2, 3, -10, 1
    detail = base._decode_info(raw, "").detail
    assert detail == link.NetfilterInfo(link.NetfilterFamily.IPV4, link.NetfilterHook.LOCAL_OUT, -10, 1)
    assert detail.defrag
