# SPDX-License-Identifier: Apache-2.0
"""tc: sched_cls programs on an interface's ingress or egress path, after the skb is built.

    with link.tc("eth0", prog, "ingress") as lk: ...                 # tcx link, else cls_bpf
    lk = link.tc("eth0", prog, "egress", anchor=link.Anchor.head())  # first on the hook
    lk = link.tc("eth0", prog, "ingress", mode="netlink", priority=5) # cls_bpf filter
    link.tc_query("eth0", "ingress")                                  # TcQuery: what runs there

Two ways to attach:

* **tcx** (6.6, e420bed02507): BPF_LINK_CREATE with attach_type BPF_TCX_INGRESS/EGRESS. Each
  hook holds an ordered list of programs (the kernel's bpf_mprog): a new one goes at the tail
  unless an :class:`Anchor` puts it at the head or before/after a given program or link
  (BPF_F_BEFORE/BPF_F_AFTER with BPF_F_LINK or BPF_F_ID). Every change bumps the hook's
  revision; ``expected_revision`` makes an attach fail with ESTALE when the list changed since
  the caller looked (:func:`tc_query`). The link detaches on close, pins, updates and detaches
  like other bpf_links. A program returning TCX_NEXT (-1) lets the next one run.
* **cls_bpf** through netlink (pyroute2): a ``bpf`` filter in direct-action mode (the
  program's return value is the verdict) on the clsact qdisc's ingress or egress hook, ordered
  by ``priority`` (lower runs first). bpfkit adds the clsact qdisc when the interface has none
  and removes it again when its last filter there goes, if nothing else was added to it; a
  clsact that existed before is left alone. Closing removes the filter only while it still
  runs bpfkit's program. cls_bpf filters run after the tcx programs of the same hook.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..probespec import ProbeSpec

from .._kernel import bpf as _bpf
from .._kernel import netlink as _nl
from .._kernel.consts import AttachType, LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from ._netdev import (
    NetAttachMode,
    NetlinkAttachment,
    NetLinkUpdate,
    Target,
    by_attach_type,
    device_hint,
    gone,
    have_tcx,
    opened_target,
    probe_reason,
    resolve_target,
)
from ._prog_arg import check_program, dup_prog_fd, explained, prog_id_of, prog_name
from .anchor import Anchor, mprog_link_args
from .base import Link, RawLink, _prog_fd, choice_of
from .kind import AttachOptions, LinkKind
from .xdp import refuse_xdp_mode

__all__ = ["TcDirection", "Anchor", "TcxInfo", "TcxLink", "ClsBpfLink", "TcxProgram", "TcQuery", "TcFilter",
           "tc", "tcx", "tc_query"]

TcFilter = _nl.TcFilter


class TcDirection(enum.Enum):
    """Which way packets flow through the hook."""

    INGRESS = "ingress"
    EGRESS = "egress"

    @property
    def attach_type(self) -> AttachType:
        return AttachType.TCX_INGRESS if self is TcDirection.INGRESS else AttachType.TCX_EGRESS

    @property
    def parent(self) -> int:
        """The clsact hook (tc's ``parent ffff:fff2`` / ``ffff:fff3``)."""
        return _nl.TC_H_INGRESS_PARENT if self is TcDirection.INGRESS else _nl.TC_H_EGRESS_PARENT

    @classmethod
    def of(cls, value: TcDirection | str) -> TcDirection:
        return choice_of(cls, value, "tc direction")


def _direction(direction: Any, prog: ProgramArg) -> TcDirection:
    if direction is not None:
        return TcDirection.of(direction)
    # A program from a tcx/ingress or tc/egress section knows its direction.
    at = getattr(prog, "attach_type", None)
    if at == AttachType.TCX_INGRESS:
        return TcDirection.INGRESS
    if at == AttachType.TCX_EGRESS:
        return TcDirection.EGRESS
    raise UsageError(f"program {prog_name(prog)!r} does not name a direction: pass 'ingress' or 'egress'")


# ------------------------------------------------------------------------------ queries
@dataclasses.dataclass(frozen=True)
class TcxProgram:
    """One program of a tcx hook: its id, and the id of the link holding it (0 when it was
    attached with BPF_PROG_ATTACH)."""

    prog_id: int
    link_id: int


@dataclasses.dataclass(frozen=True)
class TcQuery:
    """What runs at one tc hook of an interface: tcx programs in run order with the hook's
    revision (0 where the kernel has no tcx), whether a clsact qdisc exists, and the filters
    on its hook (cls_bpf and others) by priority."""

    iface: str
    ifindex: int
    direction: TcDirection
    tcx: list[TcxProgram]
    revision: int
    clsact: bool
    filters: list[TcFilter]

    @property
    def prog_ids(self) -> list[int]:
        """Every program id, in the order they run (tcx first, then cls_bpf filters)."""
        return [p.prog_id for p in self.tcx] + [f.prog_id for f in self.filters if f.prog_id]


def _tcx_query(target: Target, direction: TcDirection) -> tuple[list[TcxProgram], int]:
    try:
        progs, links, revision = target.netns.run(_bpf.prog_query_mprog, target.ifindex, int(direction.attach_type))
    except KernelError as exc:
        if exc.errno == errno.EINVAL and not have_tcx():
            return [], 0
        raise
    return [TcxProgram(p, lk) for p, lk in zip(progs, links)], revision


def _has_clsact(target: Target) -> bool:
    return "clsact" in target.netns.run(_nl.qdisc_kinds, target.ifindex).values()


def tc_query(iface: str | int, direction: TcDirection | str, *, netns: Any = None, tcx_only: bool = False) -> TcQuery:
    """The programs at ``iface``'s ``direction`` hook: tcx (BPF_PROG_QUERY) and the clsact
    filters (netlink). ``tcx_only`` skips netlink (no pyroute2 import, clsact reported False)."""
    dirn = TcDirection.of(direction)
    with opened_target(iface, netns) as target:
        try:
            progs, revision = _tcx_query(target, dirn)
            clsact, filters = False, []
            if not tcx_only:
                clsact = _has_clsact(target)
                filters = target.netns.run(_nl.tc_filters, target.ifindex, dirn.parent) if clsact else []
            return TcQuery(target.name, target.ifindex, dirn, progs, revision, clsact, filters)
        except BPFKitError as exc:
            raise exc.wrap(f"query tc {dirn.value} programs of {target}")


# ----------------------------------------------------------------------- error meanings
def _hint(err: int, path: str, anchor: Anchor | None = None, expected_revision: int = 0,
          priority: int = 0, handle: int = 0) -> str:
    if err == errno.ESTALE:
        return f"the hook's revision is not {expected_revision}: its programs changed (query it again)"
    if err == errno.ENOENT and anchor is not None:
        return f"the anchor ({anchor}) is not attached to this hook"
    if err == errno.EEXIST:
        if path == "tcx":
            return "this program is already attached to this hook"
        return f"a filter with priority {priority} handle {handle} exists on this hook (choose another priority=)"
    if err == errno.ERANGE:
        return "the hook holds as many programs as the kernel allows"
    if err == errno.EINVAL:
        if path == "tcx":
            return "the kernel refused the request (not a sched_cls program, or a bad anchor)"
        return "the kernel refused the request"
    return device_hint(err)


def _fail(exc: BPFKitError, prog: ProgramArg | str, target: Target, direction: TcDirection, path: str, what: str = "attach",
          **hint: Any) -> BPFKitError:
    if isinstance(exc, KernelError):
        exc = explained(exc, _hint(exc.errno, path, **hint))
    return exc.wrap(f"{what} tc program {prog_name(prog)!r} {'to' if what == 'attach' else 'on'} {target} "
                    f"{direction.value} via {path}")


# ------------------------------------------------------------------------------ tcx links
@dataclasses.dataclass(frozen=True)
class TcxInfo:
    """A tcx link's details: the interface index (in its namespace) and the direction."""

    ifindex: int
    direction: TcDirection | int


def _decode_tcx(raw: Any) -> TcxInfo:
    return TcxInfo(int(raw.tcx.ifindex), by_attach_type(TcDirection, int(raw.tcx.attach_type)))


class TcxLink(NetLinkUpdate, RawLink):
    """A program attached to a tc hook through a tcx link (BPF_LINK_TYPE_TCX)."""

    kind = "tcx"
    _prog_types = (ProgType.SCHED_CLS,)

    def __init__(self, fd: FD, pinned_path: str | None = None, *, iface: str = "", ifindex: int = 0,
                 direction: TcDirection | None = None) -> None:
        super().__init__(fd, pinned_path, iface=iface, ifindex=ifindex)
        self.direction = direction

    def _place(self) -> str:
        return self.direction.value if self.direction else ""


def _attach_tcx(target: Target, prog: ProgramArg, prog_fd: int, direction: TcDirection, anchor: Anchor | None,
                expected_revision: int) -> TcxLink:
    flags, fill = mprog_link_args(anchor, expected_revision)
    try:
        fd = target.netns.run(_bpf.link_create, prog_fd, target.ifindex, int(direction.attach_type), flags, fill)
    except BPFKitError as exc:
        raise _fail(exc, prog, target, direction, "tcx", anchor=anchor, expected_revision=expected_revision)
    return TcxLink(fd, iface=target.name, ifindex=target.ifindex, direction=direction)


# --------------------------------------------------------------------------- cls_bpf
class _ClsactUse:
    """bpfkit's filters on one interface's clsact qdisc, in this process."""

    def __init__(self, created: bool) -> None:
        self.created = created  # bpfkit added the qdisc (and so removes it when done)
        self.users = 0


_clsact_lock = threading.Lock()
_clsact_uses: dict[tuple[int, int, int], _ClsactUse] = {}


def _clsact_key(target: Target) -> tuple[int, int, int]:
    import os

    st = os.fstat(target.netns.fd.raw)
    return (st.st_dev, st.st_ino, target.ifindex)


def _acquire_clsact(target: Target) -> tuple[int, int, int]:
    """Count one more bpfkit filter on ``target``'s clsact, adding the qdisc when missing."""
    key = _clsact_key(target)
    with _clsact_lock:
        kinds = target.netns.run(_nl.qdisc_kinds, target.ifindex)
        use = _clsact_uses.get(key)
        if "clsact" not in kinds.values():
            other = kinds.get(0xFFFF0000)
            created = True
            try:
                target.netns.run(_nl.clsact_add, target.ifindex)
            except KernelError as exc:
                if exc.errno == errno.EEXIST and not other and _has_clsact(target):
                    created = False  # another process added it just now: theirs
                else:
                    if other:
                        exc = explained(exc, f"a {other!r} qdisc holds handle ffff: "
                                             f"(tc qdisc del dev {target.name} {other})")
                    raise exc.wrap(f"add clsact qdisc to {target}")
            if use is None:
                use = _ClsactUse(created=created)
            use.created = use.created or created
        elif use is None:
            use = _ClsactUse(created=False)
        _clsact_uses[key] = use
        use.users += 1
    return key


def _release_clsact(target: Target, key: tuple[int, int, int]) -> None:
    """One bpfkit filter fewer; the last one removes the qdisc if bpfkit added it and no
    filter (of anyone's) is left on either hook."""
    with _clsact_lock:
        use = _clsact_uses.get(key)
        if use is None:
            return
        use.users -= 1
        if use.users > 0:
            return
        del _clsact_uses[key]
        if not use.created:
            return
        try:
            if not _has_clsact(target):
                return
            for parent in (_nl.TC_H_INGRESS_PARENT, _nl.TC_H_EGRESS_PARENT):
                if target.netns.run(_nl.tc_filters, target.ifindex, parent):
                    return  # someone else's filters use it now: leave it
            target.netns.run(_nl.clsact_del, target.ifindex)
        except BPFKitError as exc:
            if gone(exc):
                return
            raise exc.wrap(f"remove the clsact qdisc bpfkit added to {target}")


class ClsBpfLink(NetlinkAttachment):
    """A cls_bpf filter (direct-action mode) on a clsact hook, attached through netlink.

    No kernel link object: close() and detach() delete the filter while it still runs the
    program bpfkit put there (then the clsact qdisc, if bpfkit added it and nothing else uses
    it); update() swaps the program in place (RTM_NEWTFILTER replace). pin, unpin and info raise
    NotSupportedError (:func:`tc_query` says what is attached).
    """

    kind = "cls_bpf"

    def __init__(self, target: Target, direction: TcDirection, priority: int, handle: int, prog_fd: FD,
                 prog_id: int, program: str, clsact_key: tuple[int, int, int]) -> None:
        super().__init__(target, prog_fd, program)
        self.direction = direction
        self.priority = priority
        self.handle = handle
        self._prog_id = prog_id
        self._clsact_key = clsact_key

    @property
    def prog_id(self) -> int:
        return self._prog_id

    def _where(self) -> str:
        return f"{self.iface} {self.direction.value}"

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(f"{what} of a cls_bpf filter",
                                 "there is no bpf_link; attach with mode='link' (tcx needs Linux 6.6+)")

    def _current(self) -> TcFilter | None:
        for f in self.target.netns.run(_nl.tc_filters, self.ifindex, self.direction.parent):
            if f.kind == "bpf" and f.priority == self.priority and f.handle == self.handle:
                return f
        return None

    def query(self) -> TcQuery:
        """What the hook holds now."""
        self._check_open("query")
        progs, revision = _tcx_query(self.target, self.direction)
        filters = self.target.netns.run(_nl.tc_filters, self.ifindex, self.direction.parent)
        return TcQuery(self.iface, self.ifindex, self.direction, progs, revision, _has_clsact(self.target), filters)

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        """Swap in ``prog``, only while the filter runs our program (or ``old``)."""
        self._check_open("update")
        assert self._prog_fd is not None
        if not self._attached:
            raise UsageError(f"update of a detached cls_bpf filter on {self.iface}")
        new_fd = check_program(prog, (ProgType.SCHED_CLS,), "a tc hook")
        expected = prog_id_of(_prog_fd(old)) if old is not None else self._prog_id
        try:
            current = self._current()
            if current is None or current.prog_id != expected:
                raise UsageError(f"the filter (priority {self.priority} handle {self.handle}) no longer runs the "
                                 f"expected program (id {expected})")
            self.target.netns.run(_nl.bpf_filter_add, self.ifindex, self.direction.parent, new_fd,
                                  _filter_name(prog), self.priority, self.handle, True)
        except BPFKitError as exc:
            raise _fail(exc, prog, self.target, self.direction, "cls_bpf", "update",
                        priority=self.priority, handle=self.handle)
        mine = dup_prog_fd(prog)
        self._prog_fd.close()
        self._prog_fd = mine
        self._prog_id = prog_id_of(mine)
        self.program = prog_name(prog)

    def _remove(self) -> None:
        try:
            try:
                current = self._current()
                if current is not None and current.prog_id == self._prog_id:
                    self.target.netns.run(_nl.filter_del, self.ifindex, self.direction.parent,
                                          self.priority, self.handle)
            except BPFKitError as exc:
                if not gone(exc) and getattr(exc, "errno", None) != errno.ENOENT:
                    raise _fail(exc, self.program, self.target, self.direction, "cls_bpf", "detach")
        finally:
            _release_clsact(self.target, self._clsact_key)

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("attached" if self._attached else "detached")
        return (f"ClsBpfLink({self.target} {self.direction.value}, priority {self.priority} handle {self.handle}, "
                f"{self.program!r}, {state})")


def _filter_name(prog: ProgramArg) -> str:
    # TCA_BPF_NAME is free text shown by `tc filter show`; it says who put the filter there.
    return f"bpfkit:{prog_name(prog)}"


def _attach_cls_bpf(target: Target, prog: ProgramArg, prog_fd: int, direction: TcDirection, priority: int | None,
                    handle: int) -> ClsBpfLink:
    if priority is not None and not 1 <= priority <= 0xFFFF:
        raise UsageError(f"tc priority must be 1..65535, not {priority}")
    if not 1 <= handle <= 0xFFFFFFFF:
        raise UsageError(f"tc filter handle must be 1..0xffffffff, not {handle}")
    key = _acquire_clsact(target)
    mine: FD | None = None
    prio = priority or 0
    try:
        if priority is None:
            # After every filter already on the hook, so existing ones keep running first.
            existing = target.netns.run(_nl.tc_filters, target.ifindex, direction.parent)
            prio = min(0xFFFF, max((f.priority for f in existing), default=0) + 1)
        mine = dup_prog_fd(prog)
        target.netns.run(_nl.bpf_filter_add, target.ifindex, direction.parent, prog_fd, _filter_name(prog),
                         prio, handle)
        return ClsBpfLink(target, direction, prio, handle, mine, prog_id_of(mine), prog_name(prog), key)
    except BPFKitError as exc:
        if mine is not None:
            mine.close()
        _release_clsact(target, key)
        raise _fail(exc, prog, target, direction, "cls_bpf", priority=prio, handle=handle)
    except BaseException:
        if mine is not None:
            mine.close()
        _release_clsact(target, key)
        raise


# ------------------------------------------------------------------------------ attaching
def tc(
    iface: str | int,
    prog: ProgramArg,
    direction: TcDirection | str | None = None,
    *,
    mode: NetAttachMode | str = NetAttachMode.AUTO,
    anchor: Anchor | None = None,
    expected_revision: int = 0,
    priority: int | None = None,
    handle: int = 1,
    netns: Any = None,
) -> TcxLink | ClsBpfLink:
    """Attach sched_cls program ``prog`` to the ``direction`` (ingress/egress; default: from the
    program's tcx/ingress or tcx/egress section) hook of ``iface`` (name or ifindex).

    ``mode``: AUTO (a tcx link when the kernel has tcx, 6.6+, and no cls_bpf ``priority`` is
    given; else cls_bpf), ``link`` (tcx) or ``netlink`` (cls_bpf). tcx only: ``anchor`` places
    the program (default: the tail), ``expected_revision`` (non-zero) makes the attach fail with
    ESTALE if the hook changed. cls_bpf only: ``priority`` (default: after every filter there)
    and ``handle``. ``netns``: the network namespace of ``iface`` (see :func:`bpfkit.link.xdp`).
    """
    path_mode = NetAttachMode.of(mode)
    dirn = _direction(direction, prog)
    prog_fd = check_program(prog, (ProgType.SCHED_CLS,), "a tc hook")
    tcx_only = anchor is not None or expected_revision
    if path_mode == NetAttachMode.NETLINK and tcx_only:
        raise UsageError("anchor= and expected_revision= order tcx links; cls_bpf filters are ordered by priority=")
    if path_mode == NetAttachMode.LINK and priority is not None:
        raise UsageError("priority= orders cls_bpf filters (mode='netlink'); tcx links are ordered by anchor=")
    use_tcx = path_mode == NetAttachMode.LINK or (path_mode == NetAttachMode.AUTO and priority is None and
                                                   (have_tcx() or tcx_only))
    if use_tcx and not have_tcx():
        raise NotSupportedError("tcx links (BPF_LINK_CREATE with BPF_TCX_INGRESS/EGRESS)",
                                f"{probe_reason('tcx')}; use mode='netlink' for cls_bpf"
                                + (" (without anchor=/expected_revision=)" if tcx_only else ""), "6.6")
    target = resolve_target(iface, netns)
    if use_tcx:
        try:
            return _attach_tcx(target, prog, prog_fd, dirn, anchor, expected_revision)
        finally:
            target.netns.close()  # the link works from any namespace
    try:
        return _attach_cls_bpf(target, prog, prog_fd, dirn, priority, handle)
    except BaseException:
        target.netns.close()
        raise


def tcx(
    iface: str | int,
    prog: ProgramArg,
    direction: TcDirection | str | None = None,
    *,
    anchor: Anchor | None = None,
    expected_revision: int = 0,
    netns: Any = None,
) -> TcxLink:
    """:func:`tc` with ``mode='link'``: always a tcx link (NotSupportedError before 6.6)."""
    lk = tc(iface, prog, direction, mode=NetAttachMode.LINK, anchor=anchor, expected_revision=expected_revision,
            netns=netns)
    assert isinstance(lk, TcxLink)
    return lk


# ----------------------------------------------------------------------- the kind's record
def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    refuse_xdp_mode(spec, o)
    return tc(spec.iface, prog, spec.direction, mode=o.net_mode, netns=o.netns)


KIND = LinkKind(
    "tc",
    probes={"tc": _attach_probe},
    network=True,
    link_classes={LinkType.TCX: TcxLink},
    info_decoders={LinkType.TCX: _decode_tcx},
    features=("prog_type_sched_cls",),
)
