# SPDX-License-Identifier: Apache-2.0
"""Twins: two programs of one object for one hook, a BTF-typed one and its fallback, of which a
tool runs one. libbpf-tools ship them for kernels without BPF trampolines or tp_btf:
runqlat.bpf.c has ``SEC("tp_btf/sched_switch") sched_switch`` and ``SEC("raw_tp/sched_switch")
handle_sched_switch`` (likewise sched_wakeup, sched_wakeup_new), and runqlat.c keeps one of each
pair (``bpf_program__set_autoload(..., false)`` on the others after ``probe_tp_btf()``). Loading
and attaching both would handle every event twice.

Twins, by their sections' kinds and targets (the same target, no offset):

    tp_btf/TP     raw_tp/TP, raw_tracepoint/TP      the same tracepoint
    fentry/FN     kprobe/FN                         the entry of the same kernel function
    fexit/FN      kretprobe/FN                      its return

The BTF one is preferred, the other is its fallback; a hook with more than one program of a
kind pairs nothing (which would run with which is not a guess to make). :func:`load_selection`
is what the skeleton and ``bpfkit attach`` load by default: each pair a group of alternatives
(``Collection(programs=[(preferred, fallback)])``: the first the kernel loads is kept).
Pure section logic: no kernel involved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .consts import ProgType

TYPE_CHECKING = False  # attach paths import this module: keep it to what it runs
if TYPE_CHECKING:
    from .collection import CollectionSpec

__all__ = ["Twin", "find_twins", "group_twins", "load_selection"]

# BTF kind -> (its fallbacks' kinds, what the target is); as libbpf names the sections.
_FALLBACKS: dict[str, tuple[tuple[str, ...], str]] = {
    "tp_btf": (("raw_tp", "raw_tracepoint"), "tracepoint"),
    "fentry": (("kprobe",), "kernel function"),
    "fexit": (("kretprobe",), "return of kernel function"),
}


@dataclasses.dataclass(frozen=True)
class Twin:
    """Programs ``preferred`` (tp_btf, fentry, fexit) and ``fallback`` (raw_tp, kprobe,
    kretprobe) on one hook, described by ``hook`` ("tracepoint sched_switch")."""

    preferred: str
    fallback: str
    hook: str

    @property
    def names(self) -> tuple[str, str]:
        return self.preferred, self.fallback

    def note(self, used: str) -> str:
        """Why the twin other than ``used`` was passed over."""
        other = self.fallback if used == self.preferred else self.preferred
        return (f"program {other!r} is the twin of {used!r} on {self.hook} ({used} runs instead: each event once); "
                f"name both in programs= to run both")


def _kind_target(section: str) -> tuple[str, str]:
    kind, _, target = section.removeprefix("?").partition("/")
    return kind, target


def find_twins(sections: Mapping[str, str]) -> list[Twin]:
    """The twins among programs given as {name: section}, in the order of the preferred ones."""
    by_hook: dict[tuple[str, str], list[str]] = {}
    for name, section in sections.items():
        kind, target = _kind_target(section)
        if target and "+" not in target:  # kprobe/FN+OFF is not FN's entry
            by_hook.setdefault((kind, target), []).append(name)
    found = []
    for (kind, target), names in by_hook.items():
        if kind not in _FALLBACKS or len(names) != 1:
            continue
        kinds, what = _FALLBACKS[kind]
        others = [n for k in kinds for n in by_hook.get((k, target), [])]
        if len(others) == 1:
            found.append(Twin(names[0], others[0], f"{what} {target} ({kind}/{_kind_target(sections[others[0]])[0]})"))
    return found


def group_twins(groups: Sequence[tuple[str, ...]], sections: Mapping[str, str]) -> list[tuple[str, ...]]:
    """``groups`` (each a program, or a group of alternatives) with the twins among its single
    programs made one group (preferred first), where the first of them stood."""
    singles = {g[0]: g for g in groups if len(g) == 1 and g[0] in sections}
    pairs = {n: t for t in find_twins({n: sections[n] for n in singles}) for n in t.names}
    out: list[tuple[str, ...]] = []
    for group in groups:
        twin = pairs.get(group[0]) if len(group) == 1 else None
        if twin is None:
            out.append(group)
        elif twin.names not in out:
            out.append(twin.names)
    return out


def load_selection(spec: CollectionSpec) -> list[tuple[str, ...]] | None:
    """What to load from ``spec`` by default with twins grouped (``Collection(programs=...)``);
    None when the object has no twins (then Collection's own default is the same)."""
    progs = spec.programs
    # Collection's default: programs to autoload; a struct_ops program only when a created
    # struct_ops map points to it (as libbpf) or its attach type is already fixed.
    used = {p for m in spec.maps.values() if m.struct_ops is not None and m.struct_ops.autocreate
            for p in m.struct_ops.programs.values()}
    names = [name for name, p in progs.items()
             if p.autoload and (p.type != ProgType.STRUCT_OPS or name in used or p.attach_btf_id)]
    groups = group_twins([(n,) for n in names], {n: progs[n].section for n in names})
    return groups if len(groups) < len(names) else None
