# SPDX-License-Identifier: Apache-2.0
"""``bpfkit link list`` / ``link show`` on real links of the kinds added for issue #23: cgroup,
netns (sk_lookup), netfilter and sockmap links, each made here and decoded as bpftool does
(and checked against bpftool's own JSON where the installed bpftool decodes the kind). netkit
links are in integration/test_link_netkit.py (the 7.2 VM).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel import cgroupfs

from .cgroup_support import Cgroup

ENV = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}


def bpfkit_json(*args: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", *args, "--json"], capture_output=True, text=True,
                          env=ENV, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return lines[0] if args[1] == "show" else lines


def bpftool_link(link_id: int) -> dict[str, Any] | None:
    tool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    if not os.path.exists(tool):
        return None
    proc = subprocess.run([tool, "-j", "link", "show", "id", str(link_id)], capture_output=True, text=True,
                          timeout=30, check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"bpfkit_t_{os.getpid()}_lk"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _check(lk: Any, target: str) -> dict[str, Any]:
    """``link show ID`` and the row of ``link list`` agree and say ``target``."""
    info = lk.info()
    shown = bpfkit_json("link", "show", str(info.id))
    assert shown["target"] == target and shown["id"] == info.id and shown["prog_id"] == info.program_id
    listed = [row for row in bpfkit_json("link", "list") if row["id"] == info.id]
    assert listed == [{**shown, "pinned": None}] or listed == [shown]
    return shown


def test_cgroup_and_netns_links_as_bpftool(bpf_obj, netns: str) -> None:
    if not (link.have_cgroup_link() and bpfkit.features.probe("sk_lookup_link")):
        pytest.skip("needs cgroup links (5.7) and sk_lookup links (5.9)")
    cg = Cgroup("lk")
    try:
        with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_cgroup"))) as coll, \
                link.attach_cgroup(cg.path, coll.programs["cg_connect4"]) as lk:
            shown = _check(lk, f"cgroup {cg.path} connect4")
            assert shown["detail"]["cgroup_id"] == cgroupfs.cgroup_id(cg.path)
            theirs = bpftool_link(shown["id"])
            if theirs is not None and "cgroup_id" in theirs:
                assert theirs["cgroup_id"] == shown["detail"]["cgroup_id"]
    finally:
        cg.close()
    ino = os.stat(f"/run/netns/{netns}").st_ino
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_netns"))) as coll, \
            link.attach_netns(coll.programs["pass_all"], netns=netns) as lk:
        shown = _check(lk, f"netns {ino} sk_lookup")
        assert shown["detail"]["netns_ino"] == ino
        theirs = bpftool_link(shown["id"])
        if theirs is not None and "netns_ino" in theirs:
            assert theirs["netns_ino"] == ino


def test_netfilter_and_sockmap_links(bpf_obj, netns: str) -> None:
    if not (link.have_netfilter_link() and link.have_sockmap_link()):
        pytest.skip("needs netfilter links (6.4) and sockmap links (6.10)")
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_netfilter"))) as coll, \
            link.attach_netfilter(coll.programs["accept_all"], "ipv4", "local_out", 123, netns=netns) as lk:
        shown = _check(lk, "ipv4 local_out priority 123")
        assert shown["type"] == "netfilter"
        assert (shown["detail"]["priority"], shown["detail"]["flags"]) == (123, 0)
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_socket"))) as coll, \
            link.attach_sockmap(coll.maps["socks"], coll.programs["count_msg"]) as lk:
        shown = _check(lk, f"map {coll.maps['socks'].id} msg_verdict")
        assert shown["type"] == "sockmap" and shown["detail"]["map_id"] == coll.maps["socks"].id
