# SPDX-License-Identifier: Apache-2.0
"""One record per link kind: what the attach path, ``link_from_fd`` and the CLI know of it.

libbpf keeps one ``bpf_sec_def`` row per section kind (``section_defs`` in libbpf.c: the
section name, program type, attach type, flags and the ``prog_attach_fn`` that attaches it);
cilium/ebpf keeps one file per link kind. bpfkit does both: every link-kind module
(``bpfkit/link/kprobe.py``, ``tc.py``, ..., ``bpfkit/link/usdt.py``) ends with one
:class:`LinkKind` named ``KIND`` that declares

* the section prefixes it attaches (``kprobe`` of ``SEC("kprobe/do_sys_openat2")``), each with
  the :class:`SectionTarget` kind it reads and its attach function (:class:`Section`), or with
  a parser for ``SYMBOL[+OFFSET]``-style targets as well (:class:`NamedSection`);
* the section prefixes it never auto-attaches, with the reason ``attach_all`` reports;
* the probe-spec kinds it attaches (``kprobe``, ``kretprobe``: bpfkit.probespec's grammar);
* its link classes and ``LinkInfo`` decoders, by BPF_LINK_TYPE_* (registered with
  :mod:`bpfkit.link.base` when the record is made, i.e. when its module is imported);
* the feature probes (``bpfkit features`` names) it needs.

The names of the sections (what program type, attach type and flags a ``SEC()`` means) stay
libbpf's one table, :data:`bpfkit.sections.SECTION_DEFS`: a record only claims prefixes of it
(tests/test_link_records.py checks each one). :mod:`bpfkit.link.attach` reads the records
through :mod:`bpfkit.link._kinds`, an index generated from them (scripts/gen_link_kinds.py), so
attaching one tracepoint imports the tracepoint kind, not all of them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._kernel.consts import LinkType
from .._protocols import ProgramArg
from ..errors import NotSupportedError, ParseError, UsageError
from .base import register_info_decoder, register_link_class, register_named_info_decoder

if TYPE_CHECKING:
    from ..probespec import ProbeSpec
    from ._netdev import NetAttachMode
    from .base import Link, RawLink
    from .multi import Progress
    from .perf_event import AttachMode
    from .xdp import XdpMode

__all__ = ["LinkKind", "Section", "NamedSection", "SectionTarget", "AttachOptions", "ProbeAttacher",
           "SectionAttacher", "NamedAttacher"]


@dataclasses.dataclass(frozen=True)
class SectionTarget:
    """What a section asks to attach to."""

    kind: str  # kprobe, kretprobe, ksyscall, kretsyscall, tracepoint, uprobe, uretprobe, uprobe_multi, ...
    target: str = ""  # empty: the section names no target
    symbol: str = ""  # kernel symbol, syscall name, tracepoint name or binary function
    offset: int = 0
    group: str = ""  # tracepoint group
    binary: str = ""  # uprobe binary (path or library name)
    file_offset: int | None = None  # uprobe BINARY:0xOFFSET


@dataclasses.dataclass(frozen=True)
class AttachOptions:
    """What the caller of attach_probe / attach_section / attach_all asked for."""

    # The modes' defaults are their AUTO's values (AttachMode.of("auto") is AttachMode.AUTO):
    # the enums' modules are link kinds themselves, which import this module.
    mode: AttachMode | str = "auto"  # perf-event attach: auto, link or ioctl
    pid: int | None = None  # uprobes, USDT and sampling: this process only
    cookie: int = 0  # bpf_get_attach_cookie(); every target of a multi link gets it
    progress: Progress | None = None  # wildcards and USDT: progress(done, total)
    max_perf_targets: int | None = None  # a wildcard's perf-event fallback: at most this many
    net_mode: NetAttachMode | str = "auto"  # xdp/tc: auto, link or netlink
    xdp_mode: XdpMode | str | None = "auto"  # xdp only: auto, generic, driver, offload
    netns: object = None  # xdp/tc: the network namespace (name, path or fd) of the interface
    cgroup: str | int | None = None  # cgroup programs: the cgroup v2 directory (a path or an fd)
    netkit: str | int | None = None  # netkit/primary|peer programs: the netkit pair's primary device


ProbeAttacher = Callable[["ProbeSpec", ProgramArg, AttachOptions], "Link"]
SectionAttacher = Callable[[ProgramArg, SectionTarget, AttachOptions], "Link"]
# A NamedSection's attacher also gets the section as written (for its messages).
NamedAttacher = Callable[[ProgramArg, SectionTarget, AttachOptions, str], "Link"]
# (the NamedSection, the section as written, its target: not empty) -> SectionTarget;
# ParseError when the target is malformed.
SectionParser = Callable[["NamedSection", str, str], SectionTarget]
LinkClass = Callable[[Any, "str | None"], "RawLink"]  # (FD, pinned path) -> link


class Section:
    """A section prefix whose attach function reads the target text itself and decides what an
    empty one means (``uprobe.multi/BINARY:PATTERN``, ``fentry``: fixed at load)."""

    __slots__ = ("prefix", "kind", "attach")

    def __init__(self, prefix: str, kind: str, attach: SectionAttacher) -> None:
        self.prefix, self.kind, self.attach = prefix, kind, attach


class NamedSection:
    """A section prefix whose target is parsed up front (``kprobe/SYMBOL[+OFFSET]``,
    ``tracepoint/GROUP/NAME``): a section without one is passed over ("names no target")."""

    __slots__ = ("prefix", "kind", "parse", "attach")

    def __init__(self, prefix: str, kind: str, parse: SectionParser, attach: NamedAttacher) -> None:
        self.prefix, self.kind, self.parse, self.attach = prefix, kind, parse, attach


class LinkKind:
    """One link kind's declarations (see the module docstring). ``needs``: an AttachOptions
    field without which ``attach_all`` passes over this kind's programs, and the note it gives
    (a section names a cgroup's hook, never the cgroup). ``network``: its probe kinds are
    network attach points (``attach_network``)."""

    __slots__ = ("name", "sections", "never_auto", "probes", "link_classes", "info_decoders",
                 "named_info_decoders", "features", "needs", "network")

    def __init__(
        self,
        name: str,
        *,
        sections: tuple[Section | NamedSection, ...] = (),
        never_auto: Mapping[str, str] | None = None,
        probes: Mapping[str, ProbeAttacher] | None = None,
        link_classes: Mapping[LinkType, LinkClass] | None = None,
        info_decoders: Mapping[LinkType, Callable[[Any], Any]] | None = None,
        named_info_decoders: Mapping[LinkType, Callable[[Any, str], Any]] | None = None,
        features: tuple[str, ...] = (),
        needs: tuple[str, str] | None = None,
        network: bool = False,
    ) -> None:
        self.name = name
        self.sections = sections
        self.never_auto = dict(never_auto or {})
        self.probes = dict(probes or {})
        self.link_classes = dict(link_classes or {})
        self.info_decoders = dict(info_decoders or {})
        self.named_info_decoders = dict(named_info_decoders or {})
        self.features = features
        self.needs = needs
        self.network = network
        # link_from_fd and Link.info() know this kind's links from now on.
        for link_type, factory in self.link_classes.items():
            register_link_class(link_type, factory)
        for link_type, decode in self.info_decoders.items():
            register_info_decoder(link_type, decode)
        for link_type, named in self.named_info_decoders.items():
            register_named_info_decoder(link_type, named)

    def __repr__(self) -> str:
        return f"LinkKind({self.name!r})"


# ----------------------------------------------------- pieces several kinds' attachers share
FUNC_OFF = re.compile(r"^(?P<func>[^+]+?)(?:\+(?P<off>(?:0x[0-9a-fA-F]+|\d+)))?$")


class SameCookie(dict[str, int]):
    """A name -> cookie mapping giving every target the same cookie (a wildcard's targets are
    known only once it is resolved, inside bpfkit.link.multi)."""

    def __init__(self, cookie: int) -> None:
        super().__init__()
        self.cookie = cookie

    def get(self, key: str, default: object = None) -> int:
        return self.cookie


def same_cookie(cookie: int) -> SameCookie | None:
    return SameCookie(cookie) if cookie else None


def no_wildcard_offset(spec: ProbeSpec) -> None:
    if spec.offset:
        raise UsageError(f"{spec}: a wildcard probe takes no offset")


def require_pattern(target: SectionTarget, api: str) -> str:
    """The pattern of a kprobe.multi/kprobe.session section."""
    if not target.target:
        raise NotSupportedError(f"auto-attach of a {target.kind} section without a pattern",
                                f"the section names no functions; attach with bpfkit.link.{api}")
    return target.target


def binary_pattern(target: SectionTarget, api: str) -> tuple[str, str]:
    """``BINARY:PATTERN`` of a uprobe.multi/uprobe.session section."""
    if not target.target:
        raise NotSupportedError(f"auto-attach of a {target.kind} section without a target",
                                f"the section names no binary; attach with bpfkit.link.{api}")
    binary, colon, pattern = target.target.rpartition(":")
    if not colon or not binary or not pattern:
        raise ParseError(f"section target {target.target!r}: expected BINARY:PATTERN")
    return binary, pattern
