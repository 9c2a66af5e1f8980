# SPDX-License-Identifier: Apache-2.0
"""Listing probes, as ``bpftrace -l`` does: ``bpfkit list [PATTERN]``.

Each probe is spelled in bpftrace's grammar (what :mod:`bpfkit.probespec` parses and
``bpfkit attach`` takes), one a line:

  tracepoint:GROUP:NAME       tracefs available_events (or a walk of events/)
  kprobe:FN, kprobe:MOD:FN    tracefs available_filter_functions (what ftrace, hence kprobes, may probe)
  rawtracepoint:NAME          vmlinux BTF's btf_trace_NAME typedefs (modules: rawtracepoint:MOD:NAME)
  fentry:FN, fexit:FN         BTF FUNC entries of vmlinux (modules: fentry:MOD:FN)
  uprobe:/path:FUNC           the functions of a binary named in the pattern (its ELF symbol tables)
  usdt:/path:PROVIDER:NAME    the USDT notes of a binary named in the pattern

PATTERN is a glob (``*``, ``?``, ``[...]``). With a kind (``tracepoint:syscalls:*open*``,
``kprobe:vfs_*``, an alias such as ``t:`` or ``k:``; ``kretprobe``/``fexit``/``uretprobe`` list
what their entry kinds list) the rest is matched against the probe without its kind; without
one (``*open*``) every kernel kind is searched, matching the whole probe or its last part.
uprobe and usdt need the binary (``uprobe:/bin/bash:*``, ``uprobe:libc:mall*``,
``usdt:/usr/bin/python3:*``), which is resolved as ``bpfkit attach`` resolves it.

What could not be listed (no kprobes on this kernel, an unreadable file, no BTF) is said in
:attr:`Listing.notes`; the rest is still listed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterator

from ._kernel import tracefs
from .errors import BPFKitError, ParseError, errno_name
from .probespec import ALIASES

__all__ = ["ListedProbe", "Listing", "list_probes", "KERNEL_KINDS"]

# The kinds listed without a binary, in the order listed; and what each lists from.
KERNEL_KINDS = ("tracepoint", "rawtracepoint", "kprobe", "kretprobe", "fentry", "fexit")
_DEFAULT_KINDS = ("tracepoint", "rawtracepoint", "kprobe", "fentry", "fexit")  # no return twins unless asked
_BINARY_KINDS = ("uprobe", "uretprobe", "usdt")


@dataclasses.dataclass(frozen=True)
class ListedProbe:
    """One probe: ``kind`` (tracepoint, kprobe, ...), ``target`` (a tracepoint's group, a kernel
    module or "" for vmlinux, a binary's path), ``name``, and a USDT probe's ``provider``."""

    kind: str
    target: str
    name: str
    provider: str = ""

    def __str__(self) -> str:
        if self.kind == "usdt":
            return f"usdt:{self.target}:{self.provider}:{self.name}"
        if self.target or self.kind in ("tracepoint", "uprobe", "uretprobe"):
            return f"{self.kind}:{self.target}:{self.name}"
        return f"{self.kind}:{self.name}"

    def to_dict(self) -> dict[str, str]:
        out = {"probe": str(self), "kind": self.kind, "target": self.target, "name": self.name}
        if self.kind == "usdt":
            out["provider"] = self.provider
        return out


@dataclasses.dataclass
class Listing:
    """What :func:`list_probes` found, and why some kinds could not be listed (``notes``)."""

    probes: list[ListedProbe]
    notes: list[str]


def list_probes(pattern: str = "") -> Listing:
    """Probes matching ``pattern`` (bpftrace's glob; "" or ``*`` for every kernel probe)."""
    pattern = pattern.strip()
    probes: list[ListedProbe] = []
    notes: list[str] = []
    kind_part, sep, rest = pattern.partition(":")
    if not sep:  # "*open*": every kernel kind, matched on the whole probe or its last part
        whole = _glob(pattern or "*")
        for kind in _DEFAULT_KINDS:
            probes.extend(p for p in _kernel_probes(kind, notes) if whole(str(p)) or whole(p.name))
        return Listing(probes, notes)
    kind_glob = ALIASES.get(kind_part, kind_part)
    # A glob over kinds (``*:vfs_read``) searches the kernel's; a binary's kinds are named.
    kinds = [k for k in (*KERNEL_KINDS, *_BINARY_KINDS) if fnmatch.fnmatchcase(k, kind_glob)
             and (k in KERNEL_KINDS or k == kind_glob)]
    if not kinds:
        known = ", ".join((*KERNEL_KINDS, *_BINARY_KINDS))
        raise ParseError(f"list {pattern!r}: no probe kind matches {kind_part!r} (kinds: {known}; "
                         "aliases as in bpftrace: t, rt, k, kr, f, fr, u, ur, U)")
    for kind in kinds:
        if kind in _BINARY_KINDS:
            probes.extend(_binary_probes(kind, rest, pattern))
            continue
        match = _glob(rest or "*")
        probes.extend(p for p in _kernel_probes(kind, notes) if match(str(p)[len(kind) + 1:]))
    return Listing(probes, notes)


def _glob(pattern: str) -> Callable[[str], bool]:
    return re.compile(fnmatch.translate(pattern)).match  # type: ignore[return-value]


# ----------------------------------------------------------------------------- the kernel
def _kernel_probes(kind: str, notes: list[str]) -> Iterator[ListedProbe]:
    if kind == "tracepoint":
        try:
            events = tracefs.list_trace_events()
        except BPFKitError as exc:
            _note(notes, f"tracepoints: {exc}")
            return
        for group, name in sorted(events):
            yield ListedProbe("tracepoint", group, name)
    elif kind in ("kprobe", "kretprobe"):
        yield from (ListedProbe(kind, module, name) for module, name in _kprobe_functions(notes))
    elif kind == "rawtracepoint":
        yield from (ListedProbe(kind, module, name[len("btf_trace_"):])
                    for module, name in _btf_names("TYPEDEF", notes, "raw tracepoints") if name.startswith("btf_trace_"))
    else:  # fentry, fexit
        yield from (ListedProbe(kind, module, name) for module, name in _btf_names("FUNC", notes, "fentry/fexit"))


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


def _kprobe_functions(notes: list[str]) -> list[tuple[str, str]]:
    """(module or "", function) that kprobes may probe, sorted and without repeats (static
    functions of one name appear once per copy)."""
    missing = "" if tracefs.has_probe_events("kprobe") else (
        "kprobes are not available on this kernel (tracefs has no kprobe_events)")
    try:
        functions = tracefs.available_filter_functions()
    except (OSError, BPFKitError) as exc:
        why = (f"{errno_name(exc.errno)} ({exc.strerror})"
               if isinstance(exc, OSError) and not isinstance(exc, BPFKitError) and exc.errno else str(exc))
        _note(notes, f"{missing or 'kprobes'}: cannot read tracefs available_filter_functions: {why}; "
                     "no kprobe: lines")
        return []
    if missing:
        _note(notes, f"{missing}; the kprobe: lines list what a kernel with kprobes could probe "
                     "(available_filter_functions)")
    return sorted({(module, name) for name, module in functions})


def _btf_names(kind_name: str, notes: list[str], what: str) -> list[tuple[str, str]]:
    """(module or "", name) of the BTF types of one kind in vmlinux and every module."""
    from . import kernel_btf as kernel
    from .btf.types import Kind

    kind = Kind[kind_name]
    try:
        found = [("", n) for n in sorted(set(kernel.vmlinux().names_of_kind(kind)))]
    except BPFKitError as exc:
        _note(notes, f"{what}: no kernel BTF ({exc})")
        return []
    for module in kernel.module_names():
        try:
            found.extend((module, n) for n in sorted(set(kernel.module(module).names_of_kind(kind))))
        except BPFKitError:
            continue  # unloaded meanwhile
    return found


# ---------------------------------------------------------------------------- binaries
def _binary_probes(kind: str, rest: str, pattern: str) -> Iterator[ListedProbe]:
    """uprobe:BINARY:FUNC and usdt:BINARY[:PROVIDER]:NAME for the one binary ``rest`` names."""
    binary, _, what = rest.partition(":")
    if not binary or any(c in binary for c in "*?["):
        raise ParseError(f"list {pattern!r}: {kind} probes are listed for one binary: give its path or "
                         f"library name, e.g. {kind}:/bin/bash:* or {kind}:libc:*")
    from .link._binary import BinaryImage, resolve_binary

    path = resolve_binary(binary)
    if kind == "usdt":
        from .usdt.notes import read_probes

        match = _glob(what or "*")
        seen = set()
        for probe in sorted(read_probes(path), key=lambda p: (p.provider, p.name)):
            key = (probe.provider, probe.name)
            if key not in seen and (match(f"{probe.provider}:{probe.name}") or match(probe.name)):
                seen.add(key)
                yield ListedProbe("usdt", path, probe.name, probe.provider)
        return
    match = _glob(what or "*")
    for name in sorted(BinaryImage.cached(path).functions):
        if match(name):
            yield ListedProbe(kind, path, name)

