# SPDX-License-Identifier: Apache-2.0
"""netkit links on a netkit pair the test makes (bpf/link_netkit.bpf.c). Needs Linux 6.7 with
CONFIG_NETKIT: the host kernel lacks it, the 7.2 VM has it
(``integration/vm.py --kernel 7.2 -- integration/test_link_netkit.py``).

Two namespaces, ``..a`` holding the primary ``nkp`` (10.202.0.1) and ``..b`` holding its peer
``nkq`` (10.202.0.2), in L3 mode (no ARP) with IPv6 off, so the only IPv4 packets are the test's
UDP datagrams. A device's programs run when it transmits: the primary's for a -> b, the
peer's for b -> a.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel import netlink as nl
from bpfkit._kernel.consts import LinkType
from bpfkit.errors import KernelError, NotSupportedError, UsageError

from .cgroup_support import bpffs_dir
from .test_net_support import counter, no_ipv6, run

A_ADDR, B_ADDR = "10.202.0.1", "10.202.0.2"
PORT = 7311
NEEDS = "netkit links need Linux 6.7 with CONFIG_NETKIT"


class NetkitPair:
    """Namespaces ``a`` (primary nkp) and ``b`` (peer nkq); close() deletes both."""

    def __init__(self, tag: str, peer_policy: nl.NetkitPolicy = nl.NetkitPolicy.FORWARD) -> None:
        base = f"bpfkit_t_{os.getpid()}_nk{tag}"
        self.a, self.b = base + "a", base + "b"
        self.ns: dict[str, nl.Netns] = {}
        try:
            for name in (self.a, self.b):
                run("ip", "netns", "add", name)
                self.ns[name] = nl.Netns.open(name)
                self.ns[name].run(no_ipv6)
            self.ns[self.a].run(nl.netkit_add, "nkp", "nkq", peer_policy=peer_policy, peer_netns=self.ns[self.b])
            for name, dev, addr in ((self.a, "nkp", A_ADDR), (self.b, "nkq", B_ADDR)):
                run("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", dev)
                run("ip", "-n", name, "link", "set", "lo", "up")
                run("ip", "-n", name, "link", "set", dev, "up")
        except BaseException:
            self.close()
            raise

    def send(self, src: str, count: int) -> int:
        """``count`` datagrams from ``src`` ('a' or 'b') to the other side: how many arrived."""
        frm, to = (self.a, self.b) if src == "a" else (self.b, self.a)
        to_addr = B_ADDR if src == "a" else A_ADDR
        rx = self.ns[to].run(socket.socket, socket.AF_INET, socket.SOCK_DGRAM)
        tx = self.ns[frm].run(socket.socket, socket.AF_INET, socket.SOCK_DGRAM)
        with rx, tx:
            rx.bind((to_addr, PORT))
            rx.settimeout(0.05)
            for i in range(count):
                try:
                    tx.sendto(b"nk%d" % i, (to_addr, PORT))
                except OSError:
                    pass  # a dropped packet may show as ENOBUFS; what arrives is what counts
            got = 0
            deadline = time.monotonic() + (2.0 if count else 0.2)
            while time.monotonic() < deadline:
                try:
                    rx.recv(64)
                    got += 1
                    if got == count:
                        deadline = min(deadline, time.monotonic() + 0.1)  # settle: any extra one
                except TimeoutError:
                    if got >= count:
                        break
            return got

    def close(self) -> None:
        for name in (self.a, self.b):
            ns = self.ns.pop(name, None)
            if ns is not None:
                ns.close()
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.fixture
def pair() -> Iterator[NetkitPair]:
    if not link.have_netkit_link():
        pytest.skip(NEEDS)
    p = NetkitPair("x")
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_netkit"))) as c:
        yield c


def test_unsupported_names_the_kernel(coll) -> None:
    if link.have_netkit_link():
        pytest.skip("the kernel has netkit (this checks the error where it does not)")
    with pytest.raises(NotSupportedError) as exc:
        link.attach_netkit(coll.programs["count_primary"], "lo")
    assert "6.7" in str(exc.value) and "CONFIG_NETKIT" in str(exc.value)


def test_primary_counts_its_own_transmits(pair: NetkitPair, coll) -> None:
    assert pair.send("a", 2) == 2 and pair.send("b", 2) == 2
    with link.attach_netkit(coll.programs["count_primary"], "nkp", netns=pair.a) as lk:
        assert isinstance(lk, link.NetkitLink) and isinstance(lk, link.Link)
        assert lk.role == link.NetkitRole.PRIMARY  # from the section
        info = lk.info()
        assert info.type == LinkType.NETKIT
        assert info.detail == link.NetkitInfo(lk.ifindex, link.NetkitRole.PRIMARY)
        q = link.netkit_query("nkp", netns=pair.a)
        assert q.prog_ids == [coll.programs["count_primary"].id] and q.programs[0].link_id == info.id
        assert pair.send("a", 3) == 3 and counter(coll, 0) == 3
        # `bpfkit link show` run inside a (where the ifindex is nkp) names it as bpftool does.
        shown = subprocess.run(["nsenter", f"--net=/run/netns/{pair.a}", sys.executable, "-m", "bpfkit.cli", "link",
                                "show", str(info.id), "--json"], capture_output=True, text=True, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        row = json.loads(shown.stdout)
        assert row["type"] == "netkit" and row["target"] == f"nkp({lk.ifindex}) primary"
        assert row["detail"]["ifindex"] == lk.ifindex
        assert pair.send("b", 2) == 2 and counter(coll, 0) == 3  # the peer's transmits: not the primary's
    assert link.netkit_query("nkp", netns=pair.a).prog_ids == []
    assert pair.send("a", 1) == 1 and counter(coll, 0) == 3


def test_peer_drop_anchor_revision_update(pair: NetkitPair, coll) -> None:
    drop = link.attach_netkit(coll.programs["drop_peer"], "nkp", netns=pair.a)
    try:
        assert drop.role == link.NetkitRole.PEER and drop.info().detail.role == link.NetkitRole.PEER
        assert pair.send("b", 4) == 0 and counter(coll, 2) == 4  # dropped by the peer's program
        assert pair.send("a", 2) == 2 and counter(coll, 2) == 4  # a -> b runs the primary's: none
        rev = link.netkit_query("nkp", peer=True, netns=pair.a).revision
        with pytest.raises(KernelError) as exc:
            link.attach_netkit(coll.programs["count_peer"], "nkp", anchor=link.Anchor.before(drop),
                               expected_revision=rev + 5, netns=pair.a)
        assert exc.value.errno == errno.ESTALE and f"revision is not {rev + 5}" in str(exc.value)
        with link.attach_netkit(coll.programs["count_peer"], "nkp", anchor=link.Anchor.before(drop),
                                expected_revision=rev, netns=pair.a) as first:
            q = link.netkit_query("nkp", peer=True, netns=pair.a)
            assert q.prog_ids == [coll.programs["count_peer"].id, coll.programs["drop_peer"].id]
            assert q.revision == rev + 1
            assert pair.send("b", 2) == 0 and (counter(coll, 1), counter(coll, 2)) == (2, 6)
            assert first.info().detail.role == link.NetkitRole.PEER
        drop.update(coll.programs["pass_count"])  # BPF_LINK_UPDATE: now passes
        assert pair.send("b", 3) == 3 and counter(coll, 3) == 3 and counter(coll, 2) == 6
        with pytest.raises(UsageError):
            link.attach_netkit(coll.programs["count_peer"], "nkp", peer="yes", netns=pair.a)  # type: ignore[arg-type]
    finally:
        drop.close()
    assert pair.send("b", 1) == 1 and counter(coll, 3) == 3


def test_pin_detach_and_errors(pair: NetkitPair, coll) -> None:
    pins = bpffs_dir("netkit")
    try:
        lk = link.attach_netkit(coll.programs["count_primary"], "nkp", False, netns=pair.a)
        lk.pin(f"{pins}/lk")
        lk.close()  # the pin keeps it attached
        assert pair.send("a", 2) == 2 and counter(coll, 0) == 2
        again = link.load_pinned_link(f"{pins}/lk")
        assert isinstance(again, link.NetkitLink)
        assert again.info().detail.role == link.NetkitRole.PRIMARY
        again.unpin()
        again.detach()  # BPF_LINK_DETACH: off the device though the fd is open
        assert pair.send("a", 2) == 2 and counter(coll, 0) == 2
        again.close()
    finally:
        os.rmdir(pins)
    # The peer device's own ifindex, in its namespace: the kernel wants the primary's.
    with pytest.raises(KernelError) as exc:
        link.attach_netkit(coll.programs["count_peer"], "nkq", netns=pair.b)
    assert exc.value.errno == errno.EACCES and "attach through the primary" in str(exc.value)
    with pytest.raises(KernelError) as exc:
        link.attach_netkit(coll.programs["count_primary"], "lo", netns=pair.a)
    assert exc.value.errno == errno.ENXIO and "not a netkit device" in str(exc.value)
    assert link.netkit_query("nkp", netns=pair.a).prog_ids == []


def test_blackhole_peer_policy(bpf_obj) -> None:
    """Peer policy blackhole: the peer drops what it sends while it has no program; once one is
    attached its verdict decides (NETKIT_NEXT from the last program forwards, like PASS:
    netkit_xmit switches on the programs' result, which replaces the policy)."""
    if not link.have_netkit_link():
        pytest.skip(NEEDS)
    p = NetkitPair("bh", peer_policy=nl.NetkitPolicy.BLACKHOLE)
    try:
        with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_netkit"))) as coll:
            assert p.send("b", 2) == 0 and p.send("a", 2) == 2
            with link.attach_netkit(coll.programs["count_peer"], "nkp", netns=p.a):
                assert p.send("b", 2) == 2 and counter(coll, 1) == 2
            with link.attach_netkit(coll.programs["drop_peer"], "nkp", netns=p.a):
                assert p.send("b", 2) == 0 and counter(coll, 2) == 2
            assert p.send("b", 2) == 0 and counter(coll, 1) == 2  # no program: the policy again
    finally:
        p.close()


def test_sections_and_cli(pair: NetkitPair, coll, bpf_obj) -> None:
    ns_a = pair.ns[pair.a]
    skipped = coll.attach_all(programs=["count_primary"])
    assert not skipped.links and "netkit=" in skipped.skipped["count_primary"]
    made = ns_a.run(coll.attach_all, netkit="nkp", programs=["count_primary", "count_peer"])
    try:
        assert {n: lk.role for n, lk in made.links.items()} == {"count_primary": link.NetkitRole.PRIMARY,
                                                              "count_peer": link.NetkitRole.PEER}
        assert pair.send("a", 2) == 2 and pair.send("b", 1) == 1
        assert (counter(coll, 0), counter(coll, 1)) == (2, 1)
    finally:
        made.close()
    pins = bpffs_dir("netkit_cli")
    try:
        cmd = ["nsenter", f"--net=/run/netns/{pair.a}", sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("link_netkit")),
               "netkit:nkp:peer", "--program", "pass_count", "--pin", pins]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "attached pass_count: netkit nkp peer (link)" in proc.stdout
        lk = link.load_pinned_link(f"{pins}/pass_count")
        with lk:
            assert lk.info().detail.role == link.NetkitRole.PEER
            assert link.netkit_query("nkp", peer=True, netns=pair.a).prog_ids == [lk.info().program_id]
            lk.unpin()
        for name in os.listdir(pins):
            os.unlink(f"{pins}/{name}")
    finally:
        os.rmdir(pins)
    assert link.netkit_query("nkp", peer=True, netns=pair.a).prog_ids == []
