# SPDX-License-Identifier: Apache-2.0
"""The link modules' shared pieces live once (issue 36): _net.py split by job into _netdev.py
(network devices as attach targets) and _prog_arg.py (the program argument); the
interface-gone words of the xdp/tc hints and the is-it-attached-here query have one home."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import bpfkit.link

LINK = Path(bpfkit.link.__file__).parent


def test_net_split_by_job() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bpfkit.link._net")
    netdev = importlib.import_module("bpfkit.link._netdev")
    prog_arg = importlib.import_module("bpfkit.link._prog_arg")
    assert {"NetAttachMode", "Target", "resolve_target", "have_tcx"} <= set(dir(netdev))
    assert {"check_program", "prog_name", "dup_prog_fd", "attached_at", "explained"} <= set(prog_arg.__all__)


@pytest.mark.parametrize(("text", "home"), [
    ('"the interface no longer exists"', "_netdev.py"),
    ("def _attached_here", None),
    ("in _bpf.prog_query_flags(", "_prog_arg.py"),
    ("def _link_create_probe", "_netdev.py"),
])
def test_one_home(text: str, home: str | None) -> None:
    where = sorted(p.name for p in LINK.glob("*.py") if text in p.read_text())
    assert where == ([home] if home else [])


@pytest.mark.parametrize(("text", "home"), [
    ("def _enum(", "base.py"),  # netfilter's copy went
    ("_enum(AttachType, int(", "_prog_arg.py"),  # info_attach_type: the cgroup/netns/sockmap decoders
    ("return attach_type_name(self.attach_type", "_prog_arg.py"),  # HookInfo.hook
    ("return [p.prog_id for p in self.programs]", "anchor.py"),  # MprogQuery.prog_ids
    ('{self.iface} {self._place()}, "', "_netdev.py"),  # NetLinkUpdate._where (tcx, netkit)
])
def test_link_info_pieces_have_one_home(text: str, home: str) -> None:
    where = sorted(p.name for p in LINK.glob("*.py") if text in p.read_text())
    assert where == [home]


def test_hook_info_and_query_records_keep_their_fields() -> None:
    import dataclasses

    from bpfkit._kernel.consts import AttachType
    from bpfkit.link.cgroup import CgroupQuery
    from bpfkit.link.netkit import NetkitQuery
    from bpfkit.link.netns import NetnsInfo
    from bpfkit.link.socket import SockmapInfo

    assert [f.name for f in dataclasses.fields(NetnsInfo)] == ["netns_ino", "attach_type"]
    assert [f.name for f in dataclasses.fields(SockmapInfo)] == ["map_id", "attach_type"]
    assert [f.name for f in dataclasses.fields(NetkitQuery)] == ["iface", "ifindex", "role", "programs", "revision"]
    assert [f.name for f in dataclasses.fields(CgroupQuery)] == ["cgroup", "attach_type", "effective", "programs",
                                                                 "revision"]
    assert NetnsInfo(7, AttachType.SK_LOOKUP).hook == "sk_lookup"
    assert NetnsInfo(7, 999).hook == "attach type 999"
    assert SockmapInfo(1, AttachType.SK_MSG_VERDICT).hook == "msg_verdict"
