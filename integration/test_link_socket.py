# SPDX-License-Identifier: Apache-2.0
"""Socket programs on loopback sockets the tests make (bpf/link_socket.bpf.c).

* a socket filter drops UDP datagrams whose payload starts with 'd';
* a reuseport program sends every datagram of a SO_REUSEPORT group to its second socket;
* sk_skb (stream parser + verdict) on a sockmap holding two accepted TCP sockets redirects what
  arrives at the first one out of the second, so one client's bytes reach the other client;
* sk_msg on a sockhash counts what its sockets send.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit.errors import KernelError, NotSupportedError, UsageError

from .cgroup_support import bpffs_dir, count

SLOT_FILTER, SLOT_DROPPED, SLOT_REUSEPORT, SLOT_PARSER, SLOT_VERDICT, SLOT_MSG = range(6)
MODES = ["link", "prog_attach"]


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("link_socket"))) as c:
        yield c




def _fd64(s: socket.socket) -> bytes:
    return s.fileno().to_bytes(8, "little")


def _udp(port: int = 0, reuse: bool = False) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if reuse:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.settimeout(0.2)
    return s


def _recv_all(s: socket.socket) -> list[bytes]:
    got = []
    while True:
        try:
            got.append(s.recv(100))
        except (TimeoutError, socket.timeout):
            return got


def test_socket_filter_drops_and_detaches(coll) -> None:
    with _udp() as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        addr = rx.getsockname()
        with link.attach_socket_filter(rx, coll.programs["drop_d"]) as lk:
            assert isinstance(lk, link.SocketFilter) and isinstance(lk, link.Link)
            for payload in (b"keep1", b"drop", b"keep2", b"dd"):
                tx.sendto(payload, addr)
            assert _recv_all(rx) == [b"keep1", b"keep2"]
            assert (count(coll, SLOT_FILTER), count(coll, SLOT_DROPPED)) == (4, 2)
            with pytest.raises(NotSupportedError, match="pin of a socket filter program"):
                lk.pin("/sys/fs/bpf/x")
        tx.sendto(b"dropped no more", addr)
        assert _recv_all(rx) == [b"dropped no more"]
        assert count(coll, SLOT_FILTER) == 4


def test_socket_filter_errors(coll) -> None:
    with socket.socket() as s, pytest.raises(UsageError, match="is a sk_reuseport program; a socket filter "
                                                               "needs a socket_filter program"):
        link.attach_socket_filter(s, coll.programs["pick_second"])
    r, w = os.pipe()
    try:
        with pytest.raises(KernelError) as exc:
            link.attach_socket_filter(r, coll.programs["drop_d"])
        assert str(exc.value) == (f"attach socket filter program 'drop_d' to socket fd {r}: SO_ATTACH_BPF: "
                                  "ENOTSOCK (Socket operation on non-socket): not a socket")
    finally:
        os.close(r)
        os.close(w)


def test_reuseport_picks_the_second_socket(coll) -> None:
    first = _udp(reuse=True)
    port = first.getsockname()[1]
    second = _udp(port, reuse=True)
    with first, second, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        coll.maps["group"].update(0, _fd64(first))
        coll.maps["group"].update(1, _fd64(second))
        with link.attach_reuseport(first, coll.programs["pick_second"]) as lk:
            assert isinstance(lk, link.ReuseportProgram)
            for i in range(6):
                tx.sendto(b"m%d" % i, ("127.0.0.1", port))
            assert len(_recv_all(second)) == 6 and _recv_all(first) == []
            assert count(coll, SLOT_REUSEPORT) == 6


@pytest.fixture
def tcp_pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    """Two (client, accepted server-side socket) TCP pairs on loopback."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    pairs = []
    try:
        for _ in range(2):
            c = socket.create_connection(srv.getsockname())
            a, _ = srv.accept()
            c.settimeout(2)
            a.settimeout(2)
            pairs.append((c, a))
        yield pairs
    finally:
        for c, a in pairs:
            c.close()
            a.close()
        srv.close()


@pytest.mark.parametrize("mode", MODES)
def test_sk_skb_redirects_between_tcp_sockets(coll, tcp_pairs, mode: str) -> None:
    if mode == "link" and not link.have_sockmap_link():
        pytest.skip("sockmap links need Linux 6.10")
    (c1, a1), (c2, a2) = tcp_pairs
    socks = coll.maps["socks"]
    with link.attach_sockmap(socks, coll.programs["parser"], mode=mode) as lp, \
            link.attach_sockmap(socks, coll.programs["verdict"], mode=mode) as lv:
        kind = link.SockmapLink if mode == "link" else link.SockmapProgAttachment
        assert isinstance(lp, kind) and isinstance(lv, kind)
        if mode == "link":
            assert lv.info().detail == link.SockmapInfo(socks.id, bpfkit.AttachType.SK_SKB_STREAM_VERDICT)
        socks.update(0, _fd64(a1))
        socks.update(1, _fd64(a2))
        c1.sendall(b"hello through the sockmap")
        got = b""
        while len(got) < 25:
            got += c2.recv(100)  # a1 received it; the verdict sent it out of a2, to c2
        assert got == b"hello through the sockmap"
        assert count(coll, SLOT_VERDICT) >= 1 and count(coll, SLOT_PARSER) >= 1
        if mode == "link":  # one link per hook; BPF_PROG_ATTACH would replace the program instead
            with pytest.raises(KernelError) as exc:
                link.attach_sockmap(socks, coll.programs["verdict"], mode=mode)
            assert str(exc.value) == ("attach stream_verdict program 'verdict' to sockmap socks via link: "
                                      "BPF_LINK_CREATE: EBUSY (Device or resource busy): the map already has a "
                                      "program at this hook (one per attach type per map)")
        socks.delete(0)
        socks.delete(1)


def test_sk_msg_counts_what_sockets_send(coll, tcp_pairs) -> None:
    (c1, a1), _ = tcp_pairs
    senders = coll.maps["senders"]
    with link.attach_sockmap(senders, coll.programs["count_msg"]) as lk:
        senders.update(0, _fd64(c1))
        for i in range(3):
            c1.sendall(b"msg%d" % i)
            assert a1.recv(10) == b"msg%d" % i
        assert count(coll, SLOT_MSG) == 3
        senders.delete(0)
        del lk


def test_sockmap_link_pin_and_errors(coll) -> None:
    if not link.have_sockmap_link():
        pytest.skip("sockmap links need Linux 6.10")
    with pytest.raises(UsageError, match="is a array map; sk_skb and sk_msg programs attach to a sockmap or sockhash"):
        link.attach_sockmap(coll.maps["counts"], coll.programs["verdict"])
    with pytest.raises(UsageError, match="is a sk_msg program; the sockmap stream_verdict hook needs a sk_skb"):
        link.attach_sockmap(coll.maps["socks"], coll.programs["count_msg"], "stream_verdict")
    pins = bpffs_dir("sockmap")
    try:
        lk = link.attach_sockmap(coll.maps["senders"], coll.programs["count_msg"])
        lk.pin(os.path.join(pins, "msg"))
        lk.close()
        with link.load_pinned_link(os.path.join(pins, "msg")) as again:
            assert isinstance(again, link.SockmapLink) and again.info().detail.hook == "msg_verdict"
            again.unpin()
    finally:
        for name in os.listdir(pins):
            os.unlink(os.path.join(pins, name))
        os.rmdir(pins)
    assert errno.EBUSY  # imported for the hint tests above
