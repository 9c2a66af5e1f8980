# SPDX-License-Identifier: Apache-2.0
"""Attaching a program to a USDT probe: one uprobe per probe site, semaphore counted.

A USDT probe is a ``nop`` the compiler left in the code, so attaching is attaching a uprobe at
each site's file offset (a probe name can have several sites: inlined or repeated
``STAP_PROBE`` calls). When the probe has a semaphore the uprobe is made with
``ref_ctr_offset`` = the semaphore's file offset: the kernel then increments that u16 in every
process mapping the binary while the uprobe exists and decrements it when it goes
(1cc33161a83d, 4.20), which switches on ``if (PROVIDER_NAME_ENABLED())`` guards.

Arguments. A program built with libbpf's ``<bpf/usdt.bpf.h>`` (``BPF_USDT(...)``,
``bpf_usdt_arg()``) reads each argument through a *spec*: an entry of its
``__bpf_usdt_specs`` ARRAY map saying where every argument is (constant, register, or memory
at register + offset; its size and sign). bpfkit fills one spec per distinct argument layout
and gives the spec's index to the program as the uprobe's BPF cookie (5.15, 7adfc6c9b315).
Where the kernel lacks cookies usdt.bpf.h looks the spec up by instruction pointer in
``__bpf_usdt_ip_to_spec_id`` instead, which bpfkit fills with each site's address in the
process (so a shared object or PIE binary then needs ``pid``). ``cookie`` becomes the spec's
``usdt_cookie`` (what ``bpf_usdt_cookie()`` returns). A program without those maps gets
``cookie`` as its plain BPF cookie.

Spec ids are allocated per spec map (by its kernel id) for this process and freed on close.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .. import features
from .._kernel import bpf as _bpf
from .._protocols import ProgramArg
from ..errors import BPFKitError, NotFoundError, NotSupportedError, ParseError, UsageError
from ..usdt.args import MAX_ARGS, USDTArg
from ..usdt.notes import USDTProbe, find_probes, read_probes
from .base import Link, _prog_fd
from .group import LinkGroup, attach_many
from .kind import AttachOptions, LinkKind, Section, SectionTarget
from .perf_event import AttachMode
from .uprobe import UprobeTarget

if TYPE_CHECKING:
    from ..maps import Map
    from ..probespec import ProbeSpec

__all__ = ["attach_usdt", "USDTLink", "pack_spec", "SPECS_MAP", "IP_MAP", "SPEC_SIZE"]

SPECS_MAP = "__bpf_usdt_specs"
IP_MAP = "__bpf_usdt_ip_to_spec_id"
# struct __bpf_usdt_spec { struct __bpf_usdt_arg_spec args[12]; __u64 usdt_cookie; short arg_cnt; }
_TAIL = struct.Struct("<Qh")
SPEC_SIZE = (MAX_ARGS * USDTArg.SPEC.size + _TAIL.size + 7) & ~7  # 208
AUTO = "auto"


def pack_spec(args: Iterable[USDTArg], usdt_cookie: int = 0) -> bytes:
    """libbpf's ``struct __bpf_usdt_spec`` for ``args``, as the spec map's value."""
    args = list(args)
    if len(args) > MAX_ARGS:
        raise UsageError(f"{len(args)} USDT arguments: usdt.bpf.h takes at most {MAX_ARGS}")
    raw = b"".join(a.pack() for a in args).ljust(MAX_ARGS * USDTArg.SPEC.size, b"\0")
    raw += _TAIL.pack(usdt_cookie & 0xFFFFFFFFFFFFFFFF, len(args))
    return raw.ljust(SPEC_SIZE, b"\0")


class _SpecIds:
    """Spec ids in use, per spec map (kernel map id), in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[int, set[int]] = {}

    def take(self, map_id: int, count: int, capacity: int, what: str) -> list[int]:
        with self._lock:
            used = self._used.setdefault(map_id, set())
            free = [i for i in range(capacity) if i not in used][:count]
            if len(free) < count:
                raise NotSupportedError(
                    f"{what}: {count} more USDT specs", f"{SPECS_MAP} has {capacity} entries and {len(used)} are in use "
                    "(define BPF_USDT_MAX_SPEC_CNT larger before including usdt.bpf.h)")
            used.update(free)
            return free

    def give(self, map_id: int, ids: Iterable[int]) -> None:
        with self._lock:
            used = self._used.get(map_id, set())
            used.difference_update(ids)
            if not used:
                self._used.pop(map_id, None)

    def in_use(self, map_id: int) -> set[int]:
        with self._lock:
            return set(self._used.get(map_id, ()))


_SPEC_IDS = _SpecIds()


class _Maps:
    """The usdt.bpf.h maps a program uses, and whether we opened them (then we close them)."""

    def __init__(self, specs: Map | None = None, ip: Map | None = None, owned: Iterable[Map] = ()) -> None:
        self.specs, self.ip, self.owned = specs, ip, list(owned)

    def close(self) -> None:
        for m in self.owned:
            m.close()
        self.owned = []


def _find_maps(prog: ProgramArg, spec_map: Any, what: str) -> _Maps:
    if spec_map is None:
        return _Maps()
    if isinstance(spec_map, str) and spec_map == AUTO:
        return _maps_of_program(prog, what)
    if isinstance(spec_map, Mapping) or hasattr(spec_map, "maps"):
        maps = getattr(spec_map, "maps", spec_map)
        return _Maps(maps.get(SPECS_MAP), maps.get(IP_MAP))
    if hasattr(spec_map, "fd") and hasattr(spec_map, "spec"):
        return _Maps(spec_map)
    raise UsageError(f"{what}: spec_map must be 'auto', None, a Collection, a name -> Map mapping or a Map, "
                     f"not {spec_map!r}")


def _maps_of_program(prog: ProgramArg, what: str) -> _Maps:
    """The program's usdt.bpf.h maps, found through the kernel's list of the maps it uses
    (bpf_prog_info.map_ids); map names are cut to 15 characters there."""
    from ..maps import Map

    found = _Maps()
    try:
        ids = _bpf.prog_map_ids(_prog_fd(prog))
    except BPFKitError as exc:
        raise exc.wrap(f"{what}: list the maps of program {getattr(prog, 'name', prog)!r}")
    try:
        for map_id in ids:
            m = Map.from_id(map_id)
            name = m.spec.name
            if found.specs is None and SPECS_MAP.startswith(name) and len(name) >= 15:
                found.specs = m
            elif found.ip is None and IP_MAP.startswith(name) and len(name) >= 15:
                found.ip = m
            else:
                m.close()
                continue
            found.owned.append(m)
    except BaseException:
        found.close()
        raise
    return found


def _check_specs_map(m: Map, what: str) -> None:
    if m.spec.value_size != SPEC_SIZE or m.spec.key_size != 4:
        raise UsageError(f"{what}: map {m.spec.name!r} has {m.spec.key_size}-byte keys and {m.spec.value_size}-byte "
                         f"values, not libbpf's struct __bpf_usdt_spec ({SPEC_SIZE} bytes): a different usdt.bpf.h?")


def _abs_ips(probe_sites: list[USDTProbe], pid: int | None, what: str) -> list[int]:
    """Each site's address in the traced process, the key usdt.bpf.h looks up by IP when
    the kernel has no BPF cookies: the link-time address in a fixed-position executable
    (ET_EXEC); for a shared object or PIE binary, where ``pid`` mapped it (/proc/PID/maps)."""
    if not any(p.shared for p in probe_sites):
        return [p.address for p in probe_sites]
    if not pid or pid < 0:
        raise NotSupportedError(f"{what} without pid",
                                "the kernel has no BPF cookies (5.15) and the binary is position-independent, so "
                                "the probe's address is only known in one process: pass pid=", "5.15")
    import os

    path = os.path.realpath(probe_sites[0].path)
    maps = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].strip() == path and "x" in fields[1]:
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    maps.append((start, end, int(fields[2], 16)))
    except FileNotFoundError:
        raise NotFoundError(f"{what}: no process {pid}") from None
    out = []
    for p in probe_sites:
        hit = next((s - off + p.file_offset for s, e, off in maps if off <= p.file_offset < off + (e - s)), None)
        if hit is None:
            raise NotFoundError(f"{what}: process {pid} has {path} mapped without offset {p.file_offset:#x}")
        out.append(hit)
    return out


class USDTLink(LinkGroup):
    """The uprobes of one USDT attachment (one per probe site), a :class:`LinkGroup`.

    ``probes``: the sites (with their parsed ``args``); ``spec_ids``: each site's spec id in
    ``__bpf_usdt_specs`` (empty when the program uses no spec map). Closing detaches every
    uprobe (the semaphores drop), then frees the spec ids and IP entries.
    """

    kind = "usdt"

    def __init__(self, links: Iterable[Any], probes: list[USDTProbe], spec_ids: list[int], maps: _Maps,
                 ips: list[int], map_id: int) -> None:
        super().__init__(links)
        self.probes = probes
        self.spec_ids = spec_ids
        self._maps, self._ips, self._map_id = maps, ips, map_id
        self._released = False

    @property
    def path(self) -> str:
        return self.probes[0].path

    @property
    def name(self) -> str:
        return self.probes[0].full_name

    def close(self, workers: int | None = None) -> None:
        try:
            super().close(workers)
        finally:
            self._release()

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        try:
            if self._maps.ip is not None:
                for ip in self._ips:
                    self._maps.ip.delete(ip)
        finally:
            if self.spec_ids:
                _SPEC_IDS.give(self._map_id, self.spec_ids)
            self._maps.close()

    def pin(self, path: str) -> None:
        if self.spec_ids:
            raise NotSupportedError(f"pin USDT link {self.name}",
                                    "its argument specs live in __bpf_usdt_specs entries this process frees "
                                    "and reuses when the link is closed")
        super().pin(path)

    def __enter__(self) -> USDTLink:
        return self

    def __repr__(self) -> str:
        return f"USDTLink({self.name} in {self.path}, {len(self)} sites)" if self.probes else "USDTLink()"


def attach_usdt(
    prog: ProgramArg,
    binary: str,
    provider: str | None,
    name: str,
    *,
    pid: int | None = None,
    cookie: int = 0,
    spec_map: Any = AUTO,
    mode: AttachMode | str = AttachMode.AUTO,
    tracefs: bool = False,
    progress: Callable[[int, int], Any] | None = None,
) -> USDTLink:
    """Attach ``prog`` (a kprobe-type program, e.g. ``SEC("usdt")``) to USDT probe
    ``provider:name`` of ``binary`` (a path, a program on $PATH or a library name), in every
    process mapping it or only in ``pid``.

    ``spec_map``: where the usdt.bpf.h maps are: ``"auto"`` (the maps the program uses),
    a Collection or name -> Map mapping, a Map (the spec map alone), or None (no spec map:
    ``cookie`` is then the uprobes' plain BPF cookie). ``provider`` None or '' matches any
    provider (an error if several have that name).
    """
    exe = UprobeTarget(binary)
    what = f"attach usdt {exe.path}:{provider + ':' if provider else ''}{name}"
    sites = find_probes(read_probes(exe.path), provider, name, exe.path)
    try:
        for site in sites:
            site.check()  # a spec libbpf cannot read, a semaphore in .bss: fail before attaching
    except BPFKitError as exc:
        raise exc.wrap(what)
    maps = _find_maps(prog, spec_map, what)
    spec_ids: list[int] = []
    ips: list[int] = []
    map_id = 0
    has_cookie = True
    try:
        site_ids: list[int] = []
        if maps.specs is not None:
            _check_specs_map(maps.specs, what)
            map_id = maps.specs.id
            # One spec per distinct argument layout (sites often share one), as libbpf does.
            layouts: dict[str, int] = {}
            for site in sites:
                layouts.setdefault(site.args_text, len(layouts))
            spec_ids = _SPEC_IDS.take(map_id, len(layouts), maps.specs.spec.max_entries, what)
            texts = list(layouts)
            for i, text in enumerate(texts):
                site = next(s for s in sites if s.args_text == text)
                maps.specs.update(spec_ids[i], pack_spec(site.args, cookie))
            site_ids = [spec_ids[layouts[s.args_text]] for s in sites]
            has_cookie = features.probe("bpf_cookie").supported
            if not has_cookie:
                if maps.ip is None:
                    raise NotSupportedError(f"{what}: read USDT arguments",
                                            f"the kernel has no BPF cookies and the program has no {IP_MAP} map", "5.15")
                addrs = _abs_ips(sites, pid, what)
                for ip, sid in zip(addrs, site_ids):
                    have = maps.ip.lookup(ip)
                    if have is not None and have != sid:
                        raise UsageError(f"{what}: address {ip:#x} already has USDT spec {have} in {IP_MAP} "
                                         "(attached twice without cookies?)")
                    maps.ip.update(ip, sid)
                    ips.append(ip)
        if maps.specs is None:
            cookies = [cookie] * len(sites)
        elif has_cookie:
            cookies = site_ids  # usdt.bpf.h: bpf_get_attach_cookie() is the spec id
        else:
            cookies = [0] * len(sites)  # found by IP instead
        targets = list(zip(sites, cookies))

        def attach_one(target: tuple[USDTProbe, int]) -> Link:
            site, site_cookie = target
            return exe.uprobe(None, prog, file_offset=site.file_offset, pid=pid, ref_ctr_offset=site.semaphore_offset,
                              cookie=site_cookie, mode=mode, tracefs=tracefs)

        group = attach_many(targets, attach_one, progress=progress)
    except BaseException as exc:
        if maps.ip is not None:
            for ip in ips:
                maps.ip.delete(ip)
        if spec_ids:
            _SPEC_IDS.give(map_id, spec_ids)
        maps.close()
        if isinstance(exc, BPFKitError) and not str(exc).startswith("attach usdt"):
            raise exc.wrap(what)
        raise
    return USDTLink(group.links, sites, site_ids, maps, ips, map_id)


# ----------------------------------------------------------------------- the kind's record
def _attach_probe(spec: ProbeSpec, prog: ProgramArg, o: AttachOptions) -> Link:
    """``usdt:BINARY:[PROVIDER:]NAME`` (bpftrace's form)."""
    return attach_usdt(prog, spec.binary, spec.provider, spec.function, pid=o.pid, cookie=o.cookie,
                       mode=o.mode, progress=o.progress)


def _attach_section(prog: ProgramArg, target: SectionTarget, o: AttachOptions) -> Link:
    """``SEC("usdt/BINARY:PROVIDER:NAME")`` (libbpf's form; ``usdt/BINARY:NAME`` also)."""
    if not target.target:
        raise NotSupportedError("auto-attach of a usdt section without a target",
                                "SEC(\"usdt\") names no probe; attach with bpfkit.usdt.attach_usdt")
    parts = target.target.rsplit(":", 2)
    if len(parts) not in (2, 3) or not all(parts):
        raise ParseError(f"USDT target {target.target!r}: expected usdt/BINARY:PROVIDER:NAME")
    binary, provider, name = parts if len(parts) == 3 else (parts[0], "", parts[1])
    return attach_usdt(prog, binary, provider, name, pid=o.pid, cookie=o.cookie, mode=o.mode)


KIND = LinkKind(
    "usdt",
    sections=(Section("usdt", "usdt", _attach_section),),
    probes={"usdt": _attach_probe},
    features=("uprobe_pmu", "uprobe_ref_ctr_pmu"),
)
