# SPDX-License-Identifier: Apache-2.0
"""Private networks for the network attach tests (test_net_*.py). No tests here.

:class:`NetPair` makes two network namespaces, ``bpfkit_t_<pid>_<tag>a`` and ``..b``, joined by
a veth pair (``va`` in a, 10.201.0.1 <-> ``vb`` in b, 10.201.0.2), with IPv6 off (no neighbour
discovery noise) and static neighbour entries (no ARP before the first packet). Traffic goes
only between the two: UDP from a Python socket made inside ``a`` to one made inside ``b``
(a socket keeps the namespace it was created in, so only its creation runs in there).

:func:`interface_state` describes everything attached to an interface (XDP programs, tcx
programs, qdiscs, tc filters) so tests can check that nothing of bpfkit's is left behind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bpfkit import link
from bpfkit._kernel import netlink as nl
from bpfkit._kernel.consts import LinkType

NET_A_ADDR = "10.201.0.1"
NET_B_ADDR = "10.201.0.2"
MAC_A = "02:b0:f0:00:00:0a"
MAC_B = "02:b0:f0:00:00:0b"
BPF_OUT = Path(__file__).resolve().parent.parent / "bpf" / ".output"


def run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout


def netns_names() -> set[str]:
    """Every namespace `ip netns` knows."""
    return {line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.strip()}


def no_ipv6() -> None:
    """Turn IPv6 off in the calling thread's network namespace (``Netns.run(no_ipv6)``), before its
    devices exist so that ``default`` applies to them: DAD, router solicitations and MLD reports
    would otherwise cross a veth pair at moments of their own and break exact packet counts.
    Written to /proc/sys directly: minbase Debian has no sysctl(8)."""
    for conf in ("all", "default"):
        with open(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6", "w") as f:
            f.write("1")


class NetPair:
    """Two namespaces joined by a veth pair; :meth:`close` deletes both (and so the veths)."""

    def __init__(self, tag: str) -> None:
        base = f"bpfkit_t_{os.getpid()}_{tag}"
        self.a, self.b = base + "a", base + "b"
        self.ns: dict[str, nl.Netns] = {}
        try:
            for name in (self.a, self.b):
                run("ip", "netns", "add", name)
                ns = self.ns[name] = nl.Netns.open(name)
                ns.run(no_ipv6)  # before the veths exist
            run("ip", "link", "add", "va", "netns", self.a, "address", MAC_A, "type", "veth",
                "peer", "name", "vb", "netns", self.b, "address", MAC_B)
            for name, dev, addr, peer_addr, peer_mac in ((self.a, "va", NET_A_ADDR, NET_B_ADDR, MAC_B),
                                                         (self.b, "vb", NET_B_ADDR, NET_A_ADDR, MAC_A)):
                run("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", dev)
                run("ip", "-n", name, "link", "set", "lo", "up")
                run("ip", "-n", name, "link", "set", dev, "up")
                run("ip", "-n", name, "neigh", "replace", peer_addr, "lladdr", peer_mac, "dev", dev, "nud", "permanent")
        except BaseException:
            self.close()
            raise

    def socket_in(self, netns: str, kind: int = socket.SOCK_DGRAM) -> socket.socket:
        """A socket of namespace ``netns`` (created there; usable from any thread)."""
        return self.ns[netns].run(socket.socket, socket.AF_INET, kind)

    def receiver(self, port: int, tos: bool = False) -> socket.socket:
        sock = self.socket_in(self.b)
        sock.bind((NET_B_ADDR, port))
        sock.settimeout(0.05)
        if tos:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        return sock

    def send(self, port: int, count: int, payload: bytes = b"bpfkit") -> None:
        """``count`` UDP datagrams from a to b's ``port``."""
        with self.socket_in(self.a) as sock:
            for i in range(count):
                sock.sendto(payload + i.to_bytes(4, "little"), (NET_B_ADDR, port))

    def close(self) -> None:
        for name in (self.a, self.b):
            ns = self.ns.pop(name, None)
            if ns is not None:
                ns.close()
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def drain(sock: socket.socket, expect: int = 0, timeout: float = 3.0, settle: float = 0.1) -> list[tuple[bytes, int | None]]:
    """What ``sock`` receives: (payload, TOS byte or None) of each datagram. Waits up to
    ``timeout`` for ``expect`` datagrams, then ``settle`` seconds more for any extra one."""
    got: list[tuple[bytes, int | None]] = []
    deadline = time.monotonic() + timeout
    settled = None
    while True:
        now = time.monotonic()
        if len(got) >= expect and settled is None:
            settled = now + settle
        if now >= (settled if settled is not None else deadline):
            return got
        try:
            data, anc, _, _ = sock.recvmsg(2048, socket.CMSG_SPACE(4))
        except socket.timeout:
            continue
        tos = None
        for level, kind, value in anc:
            if level == socket.IPPROTO_IP and kind == socket.IP_TOS:
                tos = value[0]
        got.append((data, tos))


def wait_for(check: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def counter(coll: Any, slot: int) -> int:
    return int(coll.maps["counts"][slot])  # __u64, typed through the map's BTF


@dataclass(frozen=True)
class InterfaceState:
    """Everything attached to one interface, for before/after comparisons."""

    xdp: dict
    tcx_ingress: tuple[int, ...]
    tcx_egress: tuple[int, ...]
    qdiscs: tuple[str, ...]
    filters: tuple[tuple[str, int, str], ...]  # (hook, priority, kind:name)

    @property
    def clean(self) -> bool:
        return not (self.xdp or self.tcx_ingress or self.tcx_egress or self.filters or "clsact" in self.qdiscs)


def interface_state(iface: str | int, netns: Any = None) -> InterfaceState:
    xdp = link.xdp_query(iface, netns=netns)
    ing = link.tc_query(iface, "ingress", netns=netns)
    eg = link.tc_query(iface, "egress", netns=netns)
    ns = nl.Netns.open(netns)
    try:
        kinds = ns.run(nl.qdisc_kinds, ing.ifindex)
    finally:
        ns.close()
    filters = tuple((q.direction.value, f.priority, f"{f.kind}:{f.name}") for q in (ing, eg) for f in q.filters)
    return InterfaceState({m.value: i for m, i in xdp.programs.items()}, tuple(p.prog_id for p in ing.tcx),
                          tuple(p.prog_id for p in eg.tcx), tuple(sorted(kinds.values())), filters)


def host_interfaces_state() -> dict[str, InterfaceState]:
    """The state of every interface of this (the test process's) namespace."""
    return {name: interface_state(name) for _, name in socket.if_nameindex()}


def network_link_count(progs: set[int]) -> int:
    """XDP, tcx and netkit bpf_links running one of ``progs`` (a test's own programs: other
    BPF users, and another copy of the suite, attach theirs meanwhile)."""
    return sum(1 for info in link.iter_links()
               if info.type in (LinkType.XDP, LinkType.TCX, LinkType.NETKIT) and info.program_id in progs)
