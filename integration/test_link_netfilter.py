# SPDX-License-Identifier: Apache-2.0
"""netfilter links in a network namespace the test makes (bpf/link_netfilter.bpf.c).

The namespace has lo up and nothing else; only the test sends there. ``drop_all`` at IPv4
LOCAL_OUT counts and drops each datagram the test sends to 127.0.0.1 (sendto fails with EPERM,
as for any netfilter drop of a local packet); ``accept_all`` counts and lets them through.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel import netlink as nl
from bpfkit.errors import KernelError, UsageError

from .cgroup_support import bpffs_dir, count

PORT = 7301


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    if not link.have_netfilter_link():
        pytest.skip("netfilter links need Linux 6.4 (CONFIG_NETFILTER_BPF_LINK)")
    name = f"bpfkit_t_{os.getpid()}_nf"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_netfilter"))) as c:
        yield c




def send(ns: str, n: int) -> list[str]:
    """``n`` datagrams to 127.0.0.1:PORT from inside ``ns``: 'ok' or the errno name of each."""
    def body() -> list[str]:
        out = []
        # A receiver, so that no ICMP port-unreachable (another LOCAL_OUT packet) answers.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            rx.bind(("127.0.0.1", PORT))
            for _ in range(n):
                try:
                    s.sendto(b"x", ("127.0.0.1", PORT))
                    out.append("ok")
                except OSError as exc:
                    out.append(errno.errorcode[exc.errno or 0])
        return out

    with nl.Netns.open(ns) as handle:
        return handle.run(body)


def test_drop_and_count_at_local_out(ns: str, coll) -> None:
    assert send(ns, 2) == ["ok", "ok"]
    with link.attach_netfilter(coll.programs["drop_all"], "ipv4", "local_out", 100, netns=ns) as lk:
        assert isinstance(lk, link.NetfilterLink) and isinstance(lk, link.Link)
        info = lk.info()
        assert info.detail == link.NetfilterInfo(link.NetfilterFamily.IPV4, link.NetfilterHook.LOCAL_OUT, 100, 0)
        assert send(ns, 5) == ["EPERM"] * 5
        assert count(coll, 0) == 5
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # the host's namespace: untouched
            s.sendto(b"x", ("127.0.0.1", PORT))
        assert count(coll, 0) == 5
    assert send(ns, 2) == ["ok", "ok"]
    assert count(coll, 0) == 5


def test_priority_order_defrag_pin_detach(ns: str, coll) -> None:
    pins = bpffs_dir("netfilter")
    try:
        # accept_all first (lower priority), then drop_all: both see every packet.
        with link.attach_netfilter(coll.programs["accept_all"], "ipv4", "output", -10, defrag=True, netns=ns) as la:
            assert la.info().detail.defrag and la.info().detail.priority == -10
            ld = link.attach_netfilter(coll.programs["drop_all"], 2, 3, 50, netns=ns)
            ld.pin(os.path.join(pins, "drop"))
            ld.close()
            assert send(ns, 3) == ["EPERM"] * 3
            assert (count(coll, 1), count(coll, 0)) == (3, 3)
            with link.load_pinned_link(os.path.join(pins, "drop")) as again:
                assert isinstance(again, link.NetfilterLink)
                with pytest.raises(bpfkit.errors.NotSupportedError, match="update of a netfilter link"):
                    again.update(coll.programs["accept_all"])
                again.unpin()
                again.detach()
            assert send(ns, 2) == ["ok", "ok"]
            assert (count(coll, 1), count(coll, 0)) == (5, 3)
    finally:
        for name in os.listdir(pins):
            os.unlink(os.path.join(pins, name))
        os.rmdir(pins)


def test_errors(ns: str, coll) -> None:
    prog = coll.programs["drop_all"]
    with pytest.raises(KernelError) as exc:
        link.attach_netfilter(prog, "ipv4", "local_in", -500, defrag=True, netns=ns)
    assert str(exc.value) == (f"attach netfilter program 'drop_all' at ipv4 local_in priority -500 defrag in network "
                              f"namespace {ns}: BPF_LINK_CREATE: ERANGE (Numerical result out of range): with "
                              "defrag=True the priority must be after IP defragmentation (greater than -400)")
    with pytest.raises(UsageError, match="unknown netfilter hook 'ingress'"):
        link.attach_netfilter(prog, "ipv4", "ingress", 1, netns=ns)
    with pytest.raises(UsageError, match="unknown netfilter family 'arp'"):
        link.attach_netfilter(prog, "arp", "local_in", 1, netns=ns)
    with pytest.raises(UsageError, match="priority must be an int between INT_MIN and INT_MAX"):
        link.attach_netfilter(prog, "ipv4", "local_in", -(1 << 31), netns=ns)
