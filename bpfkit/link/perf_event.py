# SPDX-License-Identifier: Apache-2.0
"""Perf events, and attaching programs to them: the plumbing under tracepoints, k/uprobes.

Getting the terminology right (as cilium/ebpf's link/perf_event.go puts it):

* **trace event**: a hook the kernel exposes under tracefs ``events/<group>/<name>`` with an
  ``id``. Tracepoints are static trace events; kprobe/uprobe trace events are made at run time
  by writing to ``kprobe_events``/``uprobe_events``.
* **tracepoint**: a trace event compiled into the kernel (``syscalls/sys_enter_openat``).
* **k(ret)probe / u(ret)probe**: a probe on a kernel symbol / a user binary's offset. Either a
  tracefs trace event (system-wide, must be removed explicitly) or, since 4.17, a probe made
  by perf_event_open on the ``kprobe``/``uprobe`` PMU that lives exactly as long as its fd.
* **perf event**: what perf_event_open returns, instantiated from a trace event (type
  PERF_TYPE_TRACEPOINT, config = the event id) or a PMU. A BPF program attaches to it;
  closing the perf event (and any bpf_link holding it) stops the program.

Attaching, two ways:

* **link** (5.15, b89fbfbb854c): BPF_LINK_CREATE with attach_type BPF_PERF_EVENT makes a
  bpf_link holding the perf event: pinnable, inspectable, carries a bpf_cookie.
* **ioctl**: PERF_EVENT_IOC_SET_BPF then PERF_EVENT_IOC_ENABLE, the only way before 5.15. No
  link object: nothing to pin, no info, no cookie. A second SET_BPF of the same program on one
  trace event gives EEXIST.

:class:`AttachMode` AUTO picks the link when the kernel has it (a cached probe), LINK and
IOCTL force one path (for tests, or to mimic an old kernel).
"""

from __future__ import annotations

import enum
import errno

from .._kernel import bpf as _bpf
from .._kernel import perf as _perf
from .._kernel.consts import LinkType, ProgType
from .._kernel.fd import FD
from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotSupportedError, UsageError
from . import tracefs_probes
from .base import FdOnlyLink, RawLink, _prog_fd, choice_of
from .kind import LinkKind
from .tracefs_probes import TracefsProbe

__all__ = ["AttachMode", "PerfEvent", "PerfEventLink", "PerfEventIoctlLink", "attach_perf_event", "have_perf_link"]


class AttachMode(enum.Enum):
    """How a program is attached to a perf event (libbpf's PROBE_ATTACH_MODE_*)."""

    AUTO = "auto"  # a bpf_link when the kernel has perf links (5.15+), else the ioctl
    LINK = "link"  # BPF_LINK_CREATE(BPF_PERF_EVENT) or fail with NotSupportedError
    IOCTL = "ioctl"  # PERF_EVENT_IOC_SET_BPF + ENABLE, even where links exist

    @classmethod
    def of(cls, value: AttachMode | str) -> AttachMode:
        return choice_of(cls, value, "attach mode")


class PerfEvent:
    """A perf event fd, plus the tracefs probe behind it when one was made for it.

    Closing closes the fd first (the kernel refuses to remove a trace event in use), then
    removes the probe.
    """

    def __init__(self, fd: FD, description: str, probe: TracefsProbe | None = None) -> None:
        self.fd = fd
        self.description = description
        self.probe = probe
        if probe is not None:
            tracefs_probes.register_owner(self)

    @property
    def closed(self) -> bool:
        return self.fd.closed

    def close(self, keep_probe: bool = False) -> None:
        """Close the fd and remove the tracefs probe (kept with ``keep_probe``: a pinned link
        still uses it)."""
        self.fd.close()
        probe, self.probe = self.probe, None
        tracefs_probes.unregister_owner(self)
        if probe is None:
            return
        if keep_probe:
            probe.keep()
        else:
            try:
                probe.remove()
            except BPFKitError:
                probe.keep()  # still in use somewhere; `bpfkit gc` reports it

    def __repr__(self) -> str:
        return f"PerfEvent({self.description}, fd={self.fd!r}, probe={self.probe!r})"


# ---------------------------------------------------------------------------- feature probe
def have_perf_link() -> bool:
    """Whether BPF_LINK_CREATE knows BPF_PERF_EVENT (5.15): the cached ``perf_link`` probe of
    :mod:`bpfkit.features` (EBADF for an invalid perf fd = known, EINVAL = not)."""
    from .. import features

    return features.probe("perf_link").supported


# ------------------------------------------------------------------------------ the links
class _PerfEventOwner:
    """Shared parts of the two perf-event link kinds."""

    perf_event: PerfEvent | None

    def perf_event_fd(self) -> FD:
        """A duplicate of the perf event's fd (the caller closes it); changing the event
        through it has undefined effects on the attachment."""
        if self.perf_event is None or self.perf_event.closed:
            raise NotSupportedError("perf event fd of this link", "it was opened from a pin or id, or is closed")
        return self.perf_event.fd.dup()


class PerfEventLink(_PerfEventOwner, RawLink):
    """A program attached to a perf event through a bpf_link (BPF_LINK_TYPE_PERF_EVENT)."""

    kind = "perf_event"

    def __init__(self, fd: FD, pinned_path: str | None = None, perf_event: PerfEvent | None = None,
                 description: str = "") -> None:
        RawLink.__init__(self, fd, pinned_path)
        self.perf_event = perf_event
        self.description = description or (perf_event.description if perf_event else "")
        if perf_event is not None and perf_event.probe is not None:
            tracefs_probes.unregister_owner(perf_event)
            tracefs_probes.register_owner(self)

    def update(self, prog: ProgramArg, old: ProgramArg | None = None) -> None:
        raise NotSupportedError("update of a perf_event link",
                                "the kernel cannot swap the program of a perf event link; attach the new program and close this link")

    def close(self) -> None:
        """Close the link, then its perf event and tracefs probe. A pinned link lives on in
        bpffs, and keeps using the probe, which then stays (``bpfkit gc`` reports it)."""
        self.fd.close()
        tracefs_probes.unregister_owner(self)
        if self.perf_event is not None:
            self.perf_event.close(keep_probe=self._pinned_path is not None)

    def _where(self) -> str:
        return f"{self.description}, " if self.description else ""




class PerfEventIoctlLink(_PerfEventOwner, FdOnlyLink):
    """A program attached with PERF_EVENT_IOC_SET_BPF: it runs until the perf event closes.

    There is no kernel link object, so pin, unpin, update, detach and info raise
    NotSupportedError.
    """

    attached_by = "ioctl"  # how `bpfkit attach` says it was attached (a link: "link")

    kind = "perf_event (ioctl)"

    def __init__(self, perf_event: PerfEvent) -> None:
        self.perf_event = perf_event
        self.description = perf_event.description
        if perf_event.probe is not None:
            tracefs_probes.unregister_owner(perf_event)
            tracefs_probes.register_owner(self)

    @property
    def fd(self) -> FD:
        assert self.perf_event is not None
        return self.perf_event.fd

    @property
    def closed(self) -> bool:
        return self.perf_event is None or self.perf_event.closed

    def _unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(
            f"{what} of a perf event attached with PERF_EVENT_IOC_SET_BPF",
            "there is no bpf_link to operate on; attach with mode=AttachMode.LINK "
            "(bpf_link for perf events needs Linux 5.15+)",
        )

    def close(self) -> None:
        tracefs_probes.unregister_owner(self)
        if self.perf_event is not None:
            self.perf_event.close()

    def __repr__(self) -> str:
        return f"PerfEventIoctlLink({self.description}, fd={self.perf_event.fd if self.perf_event else None!r})"


# ------------------------------------------------------------------------------- attaching
_PROG_TYPES_FOR = {
    "tracepoint": (ProgType.TRACEPOINT,),
    "kprobe": (ProgType.KPROBE,),
    "uprobe": (ProgType.KPROBE,),
}


def check_program(prog: ProgramArg, event_kind: str, what: str) -> None:
    """Refuse a program whose type the kernel would reject for this perf event, up front."""
    ptype = getattr(prog, "type", None)
    allowed = _PROG_TYPES_FOR[event_kind]
    if ptype is not None and ptype not in allowed:
        name = getattr(prog, "name", "")
        want = " or ".join(t.kernel_name for t in allowed)
        have = ptype.kernel_name if hasattr(ptype, "kernel_name") else str(ptype)
        raise UsageError(f"program {name!r} is a {have} program; a {event_kind} needs a {want} program")
    _prog_fd(prog)


def attach_perf_event(
    event: PerfEvent,
    prog: ProgramArg,
    *,
    cookie: int = 0,
    mode: AttachMode | str = AttachMode.AUTO,
) -> PerfEventLink | PerfEventIoctlLink:
    """Attach ``prog`` to ``event``; the returned link owns the event. On failure the event
    (and its tracefs probe) is closed before the error propagates."""
    try:
        mode = AttachMode.of(mode)
        prog_fd = _prog_fd(prog)
        use_link = mode == AttachMode.LINK or (mode == AttachMode.AUTO and have_perf_link())
        if use_link:
            if mode == AttachMode.LINK and not have_perf_link():
                from .. import features

                result = features.probe("perf_link")
                raise NotSupportedError("bpf_link for perf events (BPF_LINK_CREATE with BPF_PERF_EVENT)",
                                        f"{result.reason}; use mode=AttachMode.IOCTL or AUTO", result.min_version)
            fd = _bpf.link_create_perf_event(prog_fd, event.fd, cookie)
            return PerfEventLink(fd, None, event)
        if cookie:
            raise NotSupportedError("bpf_cookie on a perf event attached with PERF_EVENT_IOC_SET_BPF",
                                    "cookies need a perf event bpf_link", "5.15")
        _perf.set_bpf(event.fd, prog_fd)
        _perf.enable(event.fd)
        return PerfEventIoctlLink(event)
    except BPFKitError as exc:
        event.close()
        if isinstance(exc, KernelError) and exc.errno == errno.EEXIST:
            # A trace event keeps one array of programs; the same program twice is EEXIST.
            exc.detail = "this program is already attached to this trace event"
            exc.message = f"{exc.message}: {exc.detail}"
        raise
    except BaseException:
        event.close()
        raise



# ----------------------------------------------------------------------- the kind's record
# The links of kprobes, uprobes, tracepoints and sampling events (their modules' records
# declare their sections and probe specs); LinkInfo's perf-event detail: base._decode_info.
KIND = LinkKind("perf_event", link_classes={LinkType.PERF_EVENT: PerfEventLink}, features=("perf_link",))
