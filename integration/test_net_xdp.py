# SPDX-License-Identifier: Apache-2.0
"""XDP attach through links and netlink, on a veth pair between two namespaces the tests make.

The program (bpf/net_xdp.bpf.c) counts and drops UDP packets to one port; packets to another
port must still arrive. Counts are exact: IPv6 is off and the program ignores ARP.
After every test the interfaces hold nothing (checked), and the namespaces go at the end.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from types import SimpleNamespace
from typing import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel.bpffs import ensure_bpffs
from bpfkit.errors import BusyError, KernelError, NotFoundError, NotSupportedError, UsageError

from .test_net_support import BPF_OUT, NetPair, counter, drain, interface_state, wait_for

PORT = 4790  # counted and dropped by xdp_drop_udp
OTHER = 4791  # passes
N = 20
SLOT_DROP, SLOT_COUNT = 0, 1


@pytest.fixture(scope="module")
def pair() -> Iterator[NetPair]:
    net = NetPair("x")
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(autouse=True)
def clean_after(pair: NetPair) -> Iterator[None]:
    yield
    for iface, ns in (("va", pair.a), ("vb", pair.b)):
        state = interface_state(iface, ns)
        assert state.clean, f"{iface} in {ns} still holds {state}"


@pytest.fixture
def coll(bpf_obj) -> Iterator[bpfkit.Collection]:
    spec = bpfkit.load_spec(bpf_obj("net_xdp"))
    spec.variables["port"].value = PORT
    with bpfkit.Collection(spec) as c:
        yield c


def _blocked_then_open(pair: NetPair, coll: bpfkit.Collection, close) -> None:
    """With the drop program on vb: N packets to PORT are counted and dropped, packets to
    OTHER pass; after ``close()`` PORT's packets arrive and the count stays."""
    with pair.receiver(PORT) as rx, pair.receiver(OTHER) as other:
        pair.send(PORT, N)
        pair.send(OTHER, 5)
        assert wait_for(lambda: counter(coll, SLOT_DROP) >= N)
        assert len(drain(other, 5)) == 5
        assert drain(rx) == []
        assert counter(coll, SLOT_DROP) == N
        close()
        pair.send(PORT, 7)
        assert len(drain(rx, 7)) == 7
        assert counter(coll, SLOT_DROP) == N


@pytest.mark.parametrize("xdp_mode", ["generic", "driver"])
@pytest.mark.parametrize("mode", ["link", "netlink"])
def test_xdp_counts_and_drops(pair: NetPair, coll, mode: str, xdp_mode: str) -> None:
    prog = coll.programs["xdp_drop_udp"]
    lk = link.xdp("vb", prog, mode=mode, xdp_mode=xdp_mode, netns=pair.b)
    assert isinstance(lk, link.XdpLink if mode == "link" else link.XdpNetlinkLink)
    assert isinstance(lk, link.Link)  # the one Link protocol
    query = link.xdp_query("vb", netns=pair.b)
    assert query.programs == {link.XdpMode(xdp_mode): prog.id}
    assert link.xdp_query("va", netns=pair.a).programs == {}
    _blocked_then_open(pair, coll, lk.close)
    assert link.xdp_query("vb", netns=pair.b).programs == {}
    lk.close()  # idempotent


def test_auto_mode_takes_a_link_by_ifindex(pair: NetPair, coll) -> None:
    ifindex = pair.ns[pair.b].run(socket.if_nametoindex, "vb")
    with link.xdp(ifindex, coll.programs["xdp_drop_udp"], netns=pair.b) as lk:
        assert isinstance(lk, link.XdpLink)
        info = lk.info()
        assert info.type == bpfkit.LinkType.XDP
        assert info.detail == link.XdpInfo(ifindex)
        assert info.program_id == coll.programs["xdp_drop_udp"].id
        assert lk.iface == "vb" and lk.ifindex == ifindex
        # veth has native XDP: with no mode asked, the kernel runs it in the driver.
        assert link.xdp_query("vb", netns=pair.b).mode == link.XdpMode.DRIVER
        _blocked_then_open(pair, coll, lk.close)


def test_attach_from_a_thread_inside_the_namespace(pair: NetPair, coll) -> None:
    """netns=None means the caller's namespace: attach and detach from a thread in b."""
    result: dict = {}

    def inside() -> None:
        lk = link.xdp("vb", coll.programs["xdp_drop_udp"], mode="netlink")
        result["query"] = link.xdp_query("vb")
        lk.close()
        result["after"] = link.xdp_query("vb")

    pair.ns[pair.b].run(inside)
    assert result["query"].prog_id == coll.programs["xdp_drop_udp"].id
    assert not result["after"]


def test_link_update_detach_and_pin(pair: NetPair, coll) -> None:
    drop, count = coll.programs["xdp_drop_udp"], coll.programs["xdp_count_udp"]
    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit_test_net_xdp_{os.getpid()}"
    lk = link.xdp("vb", drop, mode="link", netns=pair.b)
    try:
        lk.update(count)
        assert link.xdp_query("vb", netns=pair.b).prog_id == count.id
        with pytest.raises(KernelError) as exc:
            lk.update(drop, old=drop)  # drop is no longer attached
        assert exc.value.errno == errno.EPERM and "not the expected old one" in str(exc.value)
        with pytest.raises(UsageError):
            lk.update(SimpleNamespace(name="not_xdp", type=bpfkit.ProgType.SCHED_CLS))
        with pair.receiver(PORT) as rx:
            pair.send(PORT, N)
            assert len(drain(rx, N)) == N
            assert counter(coll, SLOT_COUNT) == N
        lk.update(drop, old=count)
        assert link.xdp_query("vb", netns=pair.b).prog_id == drop.id
        # Pinned, the link survives this object's close; the pinned copy detaches.
        lk.pin(path)
        lk.close()
        assert link.xdp_query("vb", netns=pair.b).prog_id == drop.id
        again = link.load_pinned_link(path)
        try:
            assert isinstance(again, link.XdpLink)
            assert again.info().detail.ifindex == link.xdp_query("vb", netns=pair.b).ifindex
            again.detach()  # BPF_LINK_DETACH: the program goes, the (defunct) link stays
            assert not link.xdp_query("vb", netns=pair.b)
            again.unpin()
        finally:
            again.close()
    finally:
        lk.close()
        if os.path.exists(path):
            os.unlink(path)


def test_netlink_replace_and_update(pair: NetPair, coll) -> None:
    drop, count = coll.programs["xdp_drop_udp"], coll.programs["xdp_count_udp"]
    first = link.xdp("vb", drop, mode="netlink", xdp_mode="generic", netns=pair.b)
    try:
        with pytest.raises(BusyError) as exc:
            link.xdp("vb", count, mode="netlink", xdp_mode="generic", netns=pair.b)
        assert "another XDP program is attached" in str(exc.value) and "vb" in str(exc.value)
        with pytest.raises(BusyError) as exc:  # EEXIST: not the expected program
            link.xdp("vb", count, xdp_mode="generic", replace=count, netns=pair.b)
        assert "not the expected one" in str(exc.value)
        second = link.xdp("vb", count, xdp_mode="generic", replace=drop, netns=pair.b)
        try:
            assert link.xdp_query("vb", netns=pair.b).prog_id == count.id
            first.close()  # its program is gone already: leaves the new one alone
            assert link.xdp_query("vb", netns=pair.b).prog_id == count.id
            second.update(drop)
            assert link.xdp_query("vb", netns=pair.b).programs == {link.XdpMode.GENERIC: drop.id}
            assert second.prog_id == drop.id
            with pytest.raises(NotSupportedError):
                second.pin("/sys/fs/bpf/nope")
            with pytest.raises(NotSupportedError):
                second.info()
            second.detach()
            assert not link.xdp_query("vb", netns=pair.b)
        finally:
            second.close()
    finally:
        first.close()


def test_xdp_detach_removes_a_netlink_program_only(pair: NetPair, coll) -> None:
    drop = coll.programs["xdp_drop_udp"]
    assert link.xdp_detach("vb", netns=pair.b) is False
    lk = link.xdp("vb", drop, mode="link", netns=pair.b)
    try:
        with pytest.raises(BusyError) as exc:
            link.xdp_detach("vb", netns=pair.b)
        assert "held by an XDP link" in str(exc.value)
    finally:
        lk.close()
    nl_lk = link.xdp("vb", drop, mode="netlink", netns=pair.b)
    try:
        assert link.xdp_detach("vb", expected=drop, netns=pair.b) is True
        assert not link.xdp_query("vb", netns=pair.b)
    finally:
        nl_lk.close()  # nothing of ours left: quiet


def test_errors_name_interface_mode_and_meaning(pair: NetPair, coll) -> None:
    drop = coll.programs["xdp_drop_udp"]
    # Loopback has no native XDP: EOPNOTSUPP in driver mode, both ways.
    for mode in ("link", "netlink"):
        with pytest.raises(KernelError) as exc:
            link.xdp("lo", drop, mode=mode, xdp_mode="driver", netns=pair.a)
        text = str(exc.value)
        assert exc.value.errno == errno.EOPNOTSUPP, text
        assert "lo (ifindex 1" in text and pair.a in text and "driver XDP mode" in text and "EOPNOTSUPP" in text
        assert "driver mode is unsupported by this device" in text
    assert not link.xdp_query("lo", netns=pair.a)
    with pytest.raises(KernelError) as exc:
        link.xdp("vb", drop, xdp_mode="offload", netns=pair.b)
    assert "offload" in str(exc.value)
    # A link, then a generic-mode link: the kernel refuses mixing modes.
    with link.xdp("vb", drop, xdp_mode="driver", netns=pair.b):
        with pytest.raises(BusyError) as exc:
            link.xdp("vb", coll.programs["xdp_count_udp"], xdp_mode="generic", netns=pair.b)
        assert "driver and generic XDP cannot be active at once" in str(exc.value)
        with pytest.raises(BusyError) as exc:
            link.xdp("vb", coll.programs["xdp_count_udp"], netns=pair.b)
        assert "EBUSY" in str(exc.value)
    with pytest.raises(NotFoundError) as exc:
        link.xdp("nosuch0", drop, netns=pair.b)
    assert "nosuch0" in str(exc.value) and pair.b in str(exc.value)
    with pytest.raises(NotFoundError):
        link.xdp("vb", drop, netns="bpfkit_no_such_netns")
    with pytest.raises(UsageError):
        link.xdp("vb", drop, mode="link", replace=drop, netns=pair.b)
    with bpfkit.Collection(bpfkit.load_spec(BPF_OUT / "net_tc.bpf.o")) as tc_coll:
        with pytest.raises(UsageError) as exc:
            link.xdp("vb", tc_coll.programs["tc_count"], netns=pair.b)
        assert "sched_cls" in str(exc.value)


def test_attach_network_from_probe_spec(pair: NetPair, coll) -> None:
    lk = link.attach_network(coll.programs["xdp_drop_udp"], "xdp:vb", netns=pair.b, mode="netlink")
    try:
        assert isinstance(lk, link.XdpNetlinkLink)
        assert link.xdp_query("vb", netns=pair.b).prog_id == coll.programs["xdp_drop_udp"].id
    finally:
        lk.close()
    from bpfkit.probespec import parse_probe

    with link.attach_network(coll.programs["xdp_drop_udp"], parse_probe("xdp:vb"), netns=pair.b) as lk2:
        assert isinstance(lk2, link.XdpLink)
    with pytest.raises(UsageError):
        link.attach_network(coll.programs["xdp_drop_udp"], "tracepoint:syscalls:sys_enter_getppid")


def test_concurrent_attach_from_threads(pair: NetPair, coll) -> None:
    """Namespace switching is per thread: attaching in b from several threads at once while
    the main thread stays in its own namespace."""
    errors: list[BaseException] = []
    links: list = []

    def attach(iface: str, ns: str) -> None:
        try:
            links.append(link.xdp(iface, coll.programs["xdp_count_udp"], mode="link", netns=ns))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=attach, args=a) for a in (("va", pair.a), ("vb", pair.b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert link.xdp_query("va", netns=pair.a).prog_id == coll.programs["xdp_count_udp"].id
        assert link.xdp_query("vb", netns=pair.b).prog_id == coll.programs["xdp_count_udp"].id
    finally:
        for lk in links:
            lk.close()
