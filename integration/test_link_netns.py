# SPDX-License-Identifier: Apache-2.0
"""flow_dissector and sk_lookup programs on a network namespace the tests make.

The namespace holds lo (up) and a veth pair d0/d1 (d0 10.202.0.1/24 with four transmit queues,
so every packet it sends is hashed, which runs the flow dissector; a static neighbour entry for
10.202.0.2 means no ARP). bpf/link_netns.bpf.c: ``steer`` (sk_lookup) hands TCP connections to
local ports PORT_LO..PORT_HI to the socket in its SOCKMAP; ``dissect`` counts packets dissected.
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
from .test_net_support import no_ipv6

LISTEN_PORT, PORT_LO, PORT_HI = 7000, 7100, 7110
SLOT_STEERED, SLOT_LOOKUPS, SLOT_DISSECTED = range(3)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    name = f"bpfkit_t_{os.getpid()}_ns"
    _ip("netns", "add", name)
    try:
        with nl.Netns.open(name) as handle:
            handle.run(no_ipv6)  # the flow dissector counts every packet: none of IPv6's own
        for cmd in (("link", "set", "lo", "up"),
                    ("link", "add", "d0", "numtxqueues", "4", "type", "veth", "peer", "name", "d1"),
                    ("addr", "add", "10.202.0.1/24", "dev", "d0"), ("link", "set", "d0", "up"),
                    ("link", "set", "d1", "up"),
                    ("neigh", "replace", "10.202.0.2", "lladdr", "02:00:00:00:00:02", "dev", "d0", "nud", "permanent")):
            _ip("-n", name, *cmd)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture(autouse=True)
def nothing_left(ns: str) -> Iterator[None]:
    yield
    for hook in link.NETNS_HOOKS:
        assert link.netns_query(hook, ns).prog_ids == [], f"{hook} programs left in {ns}"


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    spec = bpfkit.load_spec(bpf_obj("link_netns"))
    spec.variables["port_lo"].value = PORT_LO
    spec.variables["port_hi"].value = PORT_HI
    with bpfkit.Collection(spec) as c:
        yield c




def sock_in(ns: str, kind: int = socket.SOCK_STREAM) -> socket.socket:
    with nl.Netns.open(ns) as handle:
        return handle.run(socket.socket, socket.AF_INET, kind)


def connect(ns: str, port: int) -> int | str:
    """Connect inside ``ns`` to 127.0.0.1:port: the local port the server side saw, or the errno."""
    with sock_in(ns) as s:
        try:
            s.connect(("127.0.0.1", port))
        except OSError as exc:
            return errno.errorcode[exc.errno or 0]
        return int(s.getpeername()[1])


@pytest.fixture
def server(ns: str) -> Iterator[socket.socket]:
    s = sock_in(ns)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", LISTEN_PORT))
    s.listen(32)
    s.settimeout(2)
    yield s
    s.close()


def test_sk_lookup_steers_a_port_range(ns: str, coll, server: socket.socket) -> None:
    coll.maps["socks"].update(0, server.fileno().to_bytes(8, "little"))
    prog = coll.programs["steer"]
    with link.attach_netns(prog, netns=ns) as lk:
        assert isinstance(lk, link.NetnsLink) and isinstance(lk, link.Link)
        info = lk.info()
        with nl.Netns.open(ns) as handle:
            assert info.detail == link.NetnsInfo(handle.inode, bpfkit.AttachType.SK_LOOKUP)
        assert info.detail.hook == "sk_lookup"
        assert link.netns_query("sk_lookup", ns).prog_ids == [prog.id]
        for port in (PORT_LO, PORT_LO + 5, PORT_HI):
            assert connect(ns, port) == port  # nothing listens there: the one server accepts
            conn, _ = server.accept()
            assert conn.getsockname() == ("127.0.0.1", port)
            conn.close()
        assert connect(ns, PORT_HI + 1) == "ECONNREFUSED"
        assert count(coll, SLOT_STEERED) == 3
        # The host's namespace is not steered.
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", PORT_LO)) == errno.ECONNREFUSED
    assert connect(ns, PORT_LO) == "ECONNREFUSED"
    assert count(coll, SLOT_STEERED) == 3


def test_sk_lookup_link_pin_update(ns: str, coll, server: socket.socket) -> None:
    coll.maps["socks"].update(0, server.fileno().to_bytes(8, "little"))
    pins = bpffs_dir("netns")
    try:
        lk = link.attach_netns(coll.programs["pass_all"], netns=ns)
        lk.pin(os.path.join(pins, "lookup"))
        lk.close()
        assert connect(ns, PORT_LO) == "ECONNREFUSED"
        with link.load_pinned_link(os.path.join(pins, "lookup")) as again:
            assert isinstance(again, link.NetnsLink)
            again.update(coll.programs["steer"])
            assert connect(ns, PORT_LO) == PORT_LO
            server.accept()[0].close()
            again.unpin()
            again.detach()
            assert connect(ns, PORT_LO) == "ECONNREFUSED"
    finally:
        for name in os.listdir(pins):
            os.unlink(os.path.join(pins, name))
        os.rmdir(pins)


def test_sk_lookup_refuses_prog_attach(ns: str, coll) -> None:
    with pytest.raises(UsageError, match="sk_lookup programs attach only through links"):
        link.attach_netns(coll.programs["steer"], netns=ns, mode="prog_attach")


def _send(ns: str, n: int) -> None:
    with sock_in(ns, socket.SOCK_DGRAM) as s:
        for i in range(n):
            s.sendto(b"x", ("10.202.0.2", 9000 + i))


@pytest.mark.parametrize("mode", ["link", "prog_attach"])
def test_flow_dissector_runs_per_packet(ns: str, coll, mode: str) -> None:
    prog = coll.programs["dissect"]
    with link.attach_netns(prog, netns=ns, mode=mode) as lk:
        assert isinstance(lk, link.NetnsLink if mode == "link" else link.NetnsProgAttachment)
        assert link.netns_query("flow_dissector", ns).prog_ids == [prog.id]
        _send(ns, 5)
        assert count(coll, SLOT_DISSECTED) == 5
        with pytest.raises(KernelError) as exc:
            link.attach_netns(prog, netns=ns, mode=mode)
        want = ("the namespace already has a flow dissector (one per namespace)" if mode == "link"
                else "this program is already attached here")
        assert str(exc.value).endswith(want)
        assert str(exc.value).startswith(f"attach flow_dissector program 'dissect' to network namespace {ns} via {mode}")
    _send(ns, 3)
    assert count(coll, SLOT_DISSECTED) == 5


def test_flow_dissector_prog_attach_update(ns: str, coll) -> None:
    prog, other = coll.programs["dissect"], coll.programs["dissect_other"]
    with link.attach_netns(prog, netns=ns, mode="prog_attach") as lk:
        lk.update(other)  # the hook's one program replaced
        assert link.netns_query("flow_dissector", ns).prog_ids == [other.id]
        _send(ns, 4)
        assert (count(coll, SLOT_DISSECTED), count(coll, SLOT_DISSECTED + 1)) == (0, 4)
        with pytest.raises(bpfkit.errors.NotSupportedError, match="pin of a program attached with BPF_PROG_ATTACH"):
            lk.pin("/sys/fs/bpf/x")
