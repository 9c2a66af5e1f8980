# SPDX-License-Identifier: Apache-2.0
"""tc attach through tcx links and cls_bpf filters, on a veth pair between two namespaces the
tests make.

bpf/net_tc.bpf.c: on va's egress tc_set_tos rewrites the TOS byte of UDP packets to one port
(fixing the IP checksum); on vb's ingress tc_count counts them and how many carry the new TOS;
the receiver in b reads the TOS of each datagram (IP_RECVTOS). After every test the interfaces
hold nothing (checked), and the namespaces go at the end.
"""

from __future__ import annotations

import errno
import os
from types import SimpleNamespace
from typing import Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel.bpffs import ensure_bpffs
from bpfkit._kernel import netlink as nl
from bpfkit.errors import BusyError, KernelError, NotFoundError, NotSupportedError, UsageError

from .test_net_support import (NetPair, counter, drain, host_interfaces_state, interface_state, netns_names,
                               network_link_count, run, wait_for)

PORT = 4792
OTHER = 4793
TOS = 0x28
N = 20
SLOT_COUNT, SLOT_COUNT_TOS, SLOT_SET_TOS, SLOT_TCX_INGRESS, SLOT_A, SLOT_B, SLOT_C = range(7)


@pytest.fixture(scope="module")
def pair() -> Iterator[NetPair]:
    net = NetPair("t")
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
    spec = bpfkit.load_spec(bpf_obj("net_tc"))
    spec.variables["port"].value = PORT
    spec.variables["tos"].value = TOS
    with bpfkit.Collection(spec) as c:
        yield c


def require_tcx() -> None:
    if not link.have_tcx():
        from bpfkit.link._netdev import probe_reason

        pytest.skip(f"kernel lacks tcx (Linux 6.6+): {probe_reason('tcx')}")


def auto_tc_class() -> type:
    return link.TcxLink if link.have_tcx() else link.ClsBpfLink


def _ids(query: link.TcQuery) -> list[int]:
    return [p.prog_id for p in query.tcx]


@pytest.mark.parametrize("mode", ["link", "netlink"])
def test_tc_rewrites_and_counts(pair: NetPair, coll, mode: str) -> None:
    if mode == "link":
        require_tcx()
    egress = link.tc("va", coll.programs["tc_set_tos"], "egress", mode=mode, netns=pair.a)
    ingress = link.tc("vb", coll.programs["tc_count"], "ingress", mode=mode, netns=pair.b)
    kind = link.TcxLink if mode == "link" else link.ClsBpfLink
    assert isinstance(egress, kind) and isinstance(ingress, kind)
    assert isinstance(egress, link.Link)  # the one Link protocol
    with egress, ingress, pair.receiver(PORT, tos=True) as rx, pair.receiver(OTHER, tos=True) as other:
        pair.send(PORT, N)
        pair.send(OTHER, 4)
        got = drain(rx, N)
        assert [tos for _, tos in got] == [TOS] * N  # rewritten on a's egress, seen in b
        assert [tos for _, tos in drain(other, 4)] == [0] * 4
        assert wait_for(lambda: counter(coll, SLOT_COUNT) >= N)
        assert counter(coll, SLOT_SET_TOS) == N
        assert counter(coll, SLOT_COUNT) == N
        assert counter(coll, SLOT_COUNT_TOS) == N  # ingress saw the new TOS
        q = link.tc_query("va", "egress", netns=pair.a)
        assert q.prog_ids == [coll.programs["tc_set_tos"].id]
        assert (len(q.tcx), len(q.filters)) == ((1, 0) if mode == "link" else (0, 1))
        if mode == "netlink":
            f = q.filters[0]
            assert f.kind == "bpf" and f.direct_action and f.name == "bpfkit:tc_set_tos" and q.clsact
        egress.close()
        ingress.close()
        pair.send(PORT, 5)
        assert [tos for _, tos in drain(rx, 5)] == [0] * 5
        assert counter(coll, SLOT_COUNT) == N and counter(coll, SLOT_SET_TOS) == N


def test_tcx_anchors_and_revision(pair: NetPair, coll) -> None:
    require_tcx()
    a, b, c = (coll.programs[n] for n in ("tc_order_a", "tc_order_b", "tc_order_c"))
    count = coll.programs["tc_count"]
    with link.tcx("vb", a, "ingress", netns=pair.b) as la:
        rev = link.tc_query("vb", "ingress", netns=pair.b).revision
        with pytest.raises(KernelError) as exc:
            link.tcx("vb", b, "ingress", expected_revision=rev + 5, netns=pair.b)
        assert exc.value.errno == errno.ESTALE and f"revision is not {rev + 5}" in str(exc.value)
        with link.tcx("vb", b, "ingress", anchor=link.Anchor.head(), expected_revision=rev, netns=pair.b) as lb, \
                link.tcx("vb", c, "ingress", anchor=link.Anchor.after(lb), netns=pair.b) as lc:
            assert _ids(link.tc_query("vb", "ingress", netns=pair.b)) == [b.id, c.id, a.id]
            # Before a program (by fd), before a link by id, at the tail.
            with link.tcx("vb", count, "ingress", anchor=link.Anchor.before(a), netns=pair.b) as l1:
                assert _ids(link.tc_query("vb", "ingress", netns=pair.b)) == [b.id, c.id, count.id, a.id]
                l1.close()
            with link.tcx("vb", count, "ingress", anchor=link.Anchor.before(link_id=lb.id), netns=pair.b):
                assert _ids(link.tc_query("vb", "ingress", netns=pair.b))[0] == count.id
            with link.tcx("vb", count, "ingress", anchor=link.Anchor.tail(), netns=pair.b):
                assert _ids(link.tc_query("vb", "ingress", netns=pair.b))[-1] == count.id
            with link.tcx("vb", count, "ingress", anchor=link.Anchor.after(prog_id=b.id), netns=pair.b) as l4:
                q = link.tc_query("vb", "ingress", netns=pair.b)
                assert _ids(q) == [b.id, count.id, c.id, a.id]
                assert [p.link_id for p in q.tcx] == [lb.id, l4.id, lc.id, la.id]
            with pytest.raises(KernelError) as exc:
                link.tcx("vb", count, "ingress", anchor=link.Anchor.before(prog_id=count.id), netns=pair.b)
            assert exc.value.errno == errno.ENOENT and "is not attached to this hook" in str(exc.value)
            with pytest.raises(BusyError) as exc:
                link.tcx("vb", a, "ingress", netns=pair.b)
            assert "already attached to this hook" in str(exc.value)
            # Every program of the chain runs (each returns TCX_NEXT).
            with pair.receiver(PORT) as rx:
                pair.send(PORT, N)
                assert len(drain(rx, N)) == N
            assert wait_for(lambda: counter(coll, SLOT_A) >= N)
            assert [counter(coll, s) for s in (SLOT_A, SLOT_B, SLOT_C)] == [N, N, N]


def test_tcx_and_cls_bpf_share_a_hook(pair: NetPair, coll) -> None:
    """A tcx program and a cls_bpf filter on one hook both run (tcx first)."""
    require_tcx()
    with link.tc("vb", coll.programs["tc_order_a"], "ingress", mode="link", netns=pair.b), \
            link.tc("vb", coll.programs["tc_order_b"], "ingress", mode="netlink", netns=pair.b), \
            pair.receiver(PORT) as rx:
        q = link.tc_query("vb", "ingress", netns=pair.b)
        assert q.prog_ids == [coll.programs["tc_order_a"].id, coll.programs["tc_order_b"].id]
        pair.send(PORT, N)
        assert len(drain(rx, N)) == N
        assert wait_for(lambda: counter(coll, SLOT_B) >= N)
        assert (counter(coll, SLOT_A), counter(coll, SLOT_B)) == (N, N)


def test_tcx_link_update_detach_pin(pair: NetPair, coll) -> None:
    require_tcx()
    a, b = coll.programs["tc_order_a"], coll.programs["tc_order_b"]
    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit_test_net_tcx_{os.getpid()}"
    lk = link.tcx("va", a, "egress", netns=pair.a)
    try:
        info = lk.info()
        assert info.type == bpfkit.LinkType.TCX and info.program_id == a.id
        assert info.detail == link.TcxInfo(lk.ifindex, link.TcDirection.EGRESS)
        lk.update(b)
        assert _ids(link.tc_query("va", "egress", netns=pair.a)) == [b.id]
        with pytest.raises(KernelError) as exc:
            lk.update(a, old=a)
        assert "not the expected old one" in str(exc.value)
        with pytest.raises(UsageError):
            lk.update(SimpleNamespace(name="xdp_prog", type=bpfkit.ProgType.XDP))
        lk.pin(path)
        lk.close()
        assert _ids(link.tc_query("va", "egress", netns=pair.a)) == [b.id]
        again = link.load_pinned_link(path)
        try:
            assert isinstance(again, link.TcxLink)
            again.unpin()
            again.detach()
            assert _ids(link.tc_query("va", "egress", netns=pair.a)) == []
        finally:
            again.close()
    finally:
        lk.close()
        if os.path.exists(path):
            os.unlink(path)


def test_cls_bpf_priority_handle_and_update(pair: NetPair, coll) -> None:
    a, b, c = (coll.programs[n] for n in ("tc_order_a", "tc_order_b", "tc_order_c"))
    with link.tc("va", a, "egress", mode="netlink", priority=10, netns=pair.a) as la, \
            link.tc("va", b, "egress", mode="netlink", netns=pair.a) as lb:
        assert (la.priority, la.handle, lb.priority) == (10, 1, 11)  # default: after the others
        with pytest.raises(BusyError) as exc:
            link.tc("va", c, "egress", mode="netlink", priority=10, netns=pair.a)
        assert "priority 10 handle 1 exists" in str(exc.value) and "va" in str(exc.value)
        with pytest.raises(NotSupportedError):
            la.pin("/sys/fs/bpf/nope")
        lb.update(c)
        q = link.tc_query("va", "egress", netns=pair.a)
        assert [(f.priority, f.prog_id) for f in q.filters] == [(10, a.id), (11, c.id)]
        with pytest.raises(UsageError):
            lb.update(a, old=b)  # b is not attached there any more
        la.detach()
        assert [f.prog_id for f in link.tc_query("va", "egress", netns=pair.a).filters] == [c.id]
    assert not link.tc_query("va", "egress", netns=pair.a).clsact


def test_cls_bpf_leaves_a_clsact_it_did_not_add(pair: NetPair, coll) -> None:
    run("tc", "-n", pair.a, "qdisc", "add", "dev", "va", "clsact")
    try:
        with link.tc("va", coll.programs["tc_count"], "ingress", mode="netlink", netns=pair.a):
            pass
        q = link.tc_query("va", "ingress", netns=pair.a)
        assert q.clsact and q.filters == []
    finally:
        run("tc", "-n", pair.a, "qdisc", "del", "dev", "va", "clsact")


def test_cls_bpf_leaves_a_clsact_someone_else_uses(pair: NetPair, coll) -> None:
    ours = link.tc("va", coll.programs["tc_count"], "ingress", mode="netlink", netns=pair.a)
    ns = nl.Netns.open(pair.a)
    try:
        # Another tool adds its own filter on the clsact bpfkit added.
        ns.run(nl.bpf_filter_add, ours.ifindex, nl.TC_H_EGRESS_PARENT, coll.programs["tc_order_c"].fd.raw,
               "other-tool", 7, 1)
        ours.close()
        q = link.tc_query("va", "egress", netns=pair.a)
        assert q.clsact and [f.name for f in q.filters] == ["other-tool"]
        assert link.tc_query("va", "ingress", netns=pair.a).filters == []
    finally:
        ours.close()
        ns.run(nl.clsact_del, ns.run(nl.ifindex_of, "va"))
        ns.close()


def test_cls_bpf_links_share_the_qdisc_they_added(pair: NetPair, coll) -> None:
    first = link.tc("va", coll.programs["tc_count"], "ingress", mode="netlink", netns=pair.a)
    second = link.tc("va", coll.programs["tc_set_tos"], "egress", mode="netlink", netns=pair.a)
    first.close()
    assert link.tc_query("va", "egress", netns=pair.a).clsact  # still used by second
    second.close()
    assert not link.tc_query("va", "egress", netns=pair.a).clsact


def test_cls_bpf_refuses_next_to_an_ingress_qdisc(pair: NetPair, coll) -> None:
    run("tc", "-n", pair.a, "qdisc", "add", "dev", "va", "ingress")
    try:
        with pytest.raises(KernelError) as exc:
            link.tc("va", coll.programs["tc_count"], "ingress", mode="netlink", netns=pair.a)
        assert "'ingress' qdisc holds handle ffff:" in str(exc.value)
    finally:
        run("tc", "-n", pair.a, "qdisc", "del", "dev", "va", "ingress")


def test_direction_and_option_checks(pair: NetPair, coll) -> None:
    with link.tc("vb", coll.programs["tcx_ingress_count"], netns=pair.b) as lk:  # SEC("tcx/ingress")
        assert isinstance(lk, auto_tc_class()) and lk.direction == link.TcDirection.INGRESS
    with pytest.raises(UsageError) as exc:
        link.tc("vb", coll.programs["tc_count"], netns=pair.b)  # SEC("tc") names no direction
    assert "ingress" in str(exc.value)
    with pytest.raises(UsageError):
        link.tc("vb", coll.programs["tc_count"], "sideways", netns=pair.b)
    with pytest.raises(UsageError):
        link.tc("vb", coll.programs["tc_count"], "ingress", mode="netlink", anchor=link.Anchor.head(), netns=pair.b)
    with pytest.raises(UsageError):
        link.tc("vb", coll.programs["tc_count"], "ingress", mode="link", priority=3, netns=pair.b)
    with pytest.raises(UsageError):
        link.tc("vb", SimpleNamespace(name="x", type=bpfkit.ProgType.XDP), "ingress", netns=pair.b)
    with pytest.raises(NotFoundError):
        link.tc("nosuch0", coll.programs["tc_count"], "ingress", netns=pair.b)
    # With a cls_bpf priority, AUTO takes the netlink path.
    with link.tc("vb", coll.programs["tc_count"], "ingress", priority=3, netns=pair.b) as lk2:
        assert isinstance(lk2, link.ClsBpfLink) and lk2.priority == 3


def test_without_tcx_auto_takes_cls_bpf(pair: NetPair, coll) -> None:
    """On kernels before 6.6 (the 6.1 VM): AUTO attaches cls_bpf, tcx is refused by name."""
    if link.have_tcx():
        pytest.skip("this kernel has tcx; runs on pre-6.6 kernels (integration/vm.py --kernel 6.1)")
    with link.tc("vb", coll.programs["tc_count"], "ingress", netns=pair.b) as lk, pair.receiver(PORT) as rx:
        assert isinstance(lk, link.ClsBpfLink)
        pair.send(PORT, N)
        assert len(drain(rx, N)) == N
        assert wait_for(lambda: counter(coll, SLOT_COUNT) >= N) and counter(coll, SLOT_COUNT) == N
    with pytest.raises(NotSupportedError) as exc:
        link.tcx("vb", coll.programs["tc_count"], "ingress", netns=pair.b)
    assert "6.6" in str(exc.value)
    with pytest.raises(NotSupportedError):
        link.tc("vb", coll.programs["tc_count"], "ingress", anchor=link.Anchor.head(), netns=pair.b)


def test_attach_network_tc_specs(pair: NetPair, coll) -> None:
    with link.attach_network(coll.programs["tc_count"], "tc:vb:ingress", netns=pair.b) as lk:
        assert isinstance(lk, auto_tc_class()) and lk.direction == link.TcDirection.INGRESS
    with link.attach_network(coll.programs["tc_count"], "tc:vb:egress", mode="netlink", netns=pair.b) as lk2:
        assert isinstance(lk2, link.ClsBpfLink) and lk2.direction == link.TcDirection.EGRESS
    with pytest.raises(UsageError):
        link.attach_network(coll.programs["tc_count"], "tc:vb:ingress", xdp_mode="generic", netns=pair.b)


def test_closing_after_the_interface_is_gone(pair: NetPair, coll, bpf_obj) -> None:
    """Links on an interface that was deleted close quietly."""
    run("ip", "-n", pair.a, "link", "add", "bpfkit_t0", "type", "veth", "peer", "name", "bpfkit_t1")
    xspec = bpfkit.load_spec(bpf_obj("net_xdp"))
    with bpfkit.Collection(xspec) as xcoll:
        links = [
            link.tc("bpfkit_t0", coll.programs["tc_count"], "ingress", mode="netlink", netns=pair.a),
            link.tc("bpfkit_t0", coll.programs["tc_set_tos"], "egress", netns=pair.a),
            link.xdp("bpfkit_t0", xcoll.programs["xdp_drop_udp"], mode="netlink", netns=pair.a),
            link.xdp("bpfkit_t1", xcoll.programs["xdp_drop_udp"], mode="link", netns=pair.a),
        ]
        run("ip", "-n", pair.a, "link", "del", "bpfkit_t0")
        for lk in links:
            lk.close()


def test_nothing_left_behind(coll, bpf_obj) -> None:
    """Every kind of attachment on a fresh pair, traffic through it, everything closed: the
    interfaces hold nothing, the namespaces are gone, and neither this namespace's interfaces
    nor the system's XDP/tcx links of its programs remain."""
    tc_link = "link" if link.have_tcx() else "netlink"  # tcx links where the kernel has them
    host_before = host_interfaces_state()
    net = NetPair("c")
    try:
        with bpfkit.Collection(bpfkit.load_spec(bpf_obj("net_xdp"))) as xcoll:
            xdp_count = xcoll.programs["xdp_count_udp"]
            ours = {p.id for p in [*coll.programs.values(), *xcoll.programs.values()]}
            with link.xdp("va", xdp_count, mode="link", netns=net.a), \
                    link.xdp("vb", xdp_count, mode="netlink", xdp_mode="generic", netns=net.b), \
                    link.tc("va", coll.programs["tc_set_tos"], "egress", mode=tc_link, netns=net.a), \
                    link.tc("va", coll.programs["tc_order_a"], "egress", mode="netlink", netns=net.a), \
                    link.tc("vb", coll.programs["tc_count"], "ingress", mode="netlink", netns=net.b), \
                    link.tc("vb", coll.programs["tc_order_b"], "ingress", mode=tc_link, netns=net.b), \
                    net.receiver(PORT, tos=True) as rx:
                assert network_link_count(ours) == (3 if tc_link == "link" else 1)
                net.send(PORT, N)
                assert [tos for _, tos in drain(rx, N)] == [TOS] * N
                assert wait_for(lambda: counter(coll, SLOT_COUNT) >= N)
                assert [counter(coll, s) for s in (SLOT_COUNT, SLOT_SET_TOS, SLOT_A, SLOT_B)] == [N] * 4
        for iface, ns in (("va", net.a), ("vb", net.b)):
            state = interface_state(iface, ns)
            assert state.clean, f"{iface} in {ns} still holds {state}"
            assert "clsact" not in state.qdiscs
    finally:
        net.close()
    assert not {net.a, net.b} & netns_names()
    assert not any(name.startswith(f"bpfkit_t_{os.getpid()}_c") for name in os.listdir("/run/netns"))
    assert network_link_count(ours) == 0
    assert host_interfaces_state() == host_before
