# SPDX-License-Identifier: Apache-2.0
"""Histograms: log2 and linear histograms from slot counts, maps and values, drawn as bcc draws
them (``print_log2_hist``, ``print_linear_hist``), byte for byte as libbpf-tools' trace_helpers.c
draws them (``style="libbpf-tools"``), or handed over as data.

Where the counts come from (any of these, plain Python values or a :class:`bpfkit.Map`):

* a sequence of slot counts: ``[3, 0, 12, 40]``;
* a mapping slot index -> count: a map keyed by slot, as bcc's ``BPF_HISTOGRAM`` and
  bpftrace's ``hist()``; a per-CPU count (a list, one per CPU) is summed;
* a value with a ``slots`` array: libbpf-tools' ``struct hist { __u32 slots[N]; }``, as a
  record (attribute ``slots``), a dict, or a plain list;
* per-key histograms (:func:`per_key`): key -> struct hist (runqlat's per-process mode), or a
  struct key ``{fields..., slot}`` -> count (bcc's secondary-key histograms);
* a :class:`bpfkit.Map`: its items are read once (typed when the map decodes through BTF);
  per-CPU values are summed. A map without typed values gives bytes: keys and values of 1, 2,
  4 or 8 bytes are read as little-endian integers, longer values as arrays of ``__u32`` slots.

Log2 slots: slot ``first_slot + i`` counts values in ``[2**i, 2**(i+1) - 1]``, except the first
bucket, drawn ``0 -> 1``. ``first_slot=0`` is libbpf-tools' and bpftrace's ``log2l()``
(slot 0 holds 0 and 1); bcc's ``bpf_log2l()`` puts 0 and 1 in slot 1 (its slot 0 is never
written, and bcc does not draw it): pass ``first_slot=1`` for a bcc map. Linear buckets:
slot ``i`` holds ``[base + i*step, base + (i+1)*step - 1]``.

This module reads maps only through their ``items()``; it imports no kernel module.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Literal, Protocol, TypeGuard

from .errors import UsageError
from .spec.maps import PERCPU_TYPES

__all__ = [
    "Bucket",
    "Histogram",
    "log2_hist",
    "linear_hist",
    "per_key",
    "find_histograms",
    "render",
    "render_map",
    "slot_counts",
    "Style",
]

Kind = Literal["log2", "linear"]
# Whose picture: bcc's Python (table.py) or libbpf-tools' C (trace_helpers.c). They differ in
# the log2 header ("count     distribution" against "count    distribution"), the bar's
# arithmetic (float against unsigned int) and which linear rows are drawn (libbpf-tools: only
# non-zero rows, from the first non-zero one).
Style = Literal["bcc", "libbpf-tools"]

STARS_MAX = 40  # bcc's stars_max: the bar's width in columns
LOG2_INDEX_MAX = 65  # bcc's log2_index_max: slots of a 64-bit log2 histogram
LINEAR_INDEX_MAX = 1025  # bcc's linear_index_max: the largest slot index taken as a slot
# Map names that say "histogram" (runqlat's hists, biolatency's hists, bcc's dist, ...).
_HIST_NAME = re.compile(r"(hist|hists|histogram|histograms|dist|slots)$", re.IGNORECASE)
_SLOT_FIELDS = ("slot", "bucket")


class MapWithItems(Protocol):
    """What this module needs of a map: a name, a type and its items (bpfkit.Map is one)."""

    name: str

    def items(self) -> Iterator[tuple[object, object]]: ...


@dataclasses.dataclass(frozen=True)
class Bucket:
    """One bucket: values in ``[low, high]`` (both inclusive) were seen ``count`` times."""

    low: int
    high: int
    count: int

    def to_dict(self) -> dict[str, int]:
        return {"low": self.low, "high": self.high, "count": self.count}


@dataclasses.dataclass
class Histogram:
    """A histogram as data: buckets up to the last non-empty one, a unit, and for per-key
    histograms the key (``label``) and the fields of the key's value other than its slots
    (``value_fields``: runqlat's ``comm`` in its ``struct hist``). ``str(h)`` draws it as bcc does."""

    kind: Kind
    buckets: list[Bucket]
    unit: str = "value"
    label: object = None
    value_fields: dict[str, object] = dataclasses.field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(b.count for b in self.buckets)

    @property
    def counts(self) -> list[int]:
        return [b.count for b in self.buckets]

    def percentile(self, p: float) -> float | None:
        """The value below which ``p`` percent of the counts lie, approximated by assuming the
        counts spread evenly inside their bucket; None for an empty histogram."""
        if not 0 <= p <= 100:
            raise UsageError(f"histogram percentile: {p} is not in 0..100")
        total = self.total
        if not total:
            return None
        want = total * p / 100
        seen = 0
        for b in self.buckets:
            if b.count and seen + b.count >= want:
                return b.low + (b.high + 1 - b.low) * (want - seen) / b.count
            seen += b.count
        return float(self.buckets[-1].high)  # pragma: no cover - the loop returns at p <= 100

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: kind, unit, label (records as dicts), total and the buckets."""
        out: dict[str, object] = {"kind": self.kind, "unit": self.unit}
        if self.label is not None:
            out["label"] = _plain(self.label)
        out["total"] = self.total
        out["buckets"] = [b.to_dict() for b in self.buckets]
        return out

    def render(self, *, strip_leading_zero: bool = False, style: Style = "bcc") -> str:
        """The picture bcc's ``print_log2_hist`` / ``print_linear_hist`` prints, line for line
        (without a trailing newline); "" for an empty histogram, as bcc prints nothing.
        ``style="libbpf-tools"``: what libbpf-tools' C functions of the same names print, byte
        for byte once ``print()`` adds the last newline (counts taken as their ``unsigned int``)."""
        if not any(self.counts):
            return ""
        if style == "libbpf-tools":
            return self._render_libbpf(strip_leading_zero)
        if style != "bcc":
            raise UsageError(f"histogram style {style!r}: use 'bcc' or 'libbpf-tools'")
        val_max = max(self.counts)
        lines = []
        if self.kind == "linear":
            lines.append(f"     {self.unit:<13} : count     distribution")
            for b in self.buckets:
                lines.append(f"        {b.low:<10d} : {b.count:<8d} |{_stars(b.count, val_max, STARS_MAX):<{STARS_MAX}}|")
            return "\n".join(lines)
        # bcc widens the columns when its last slot's values pass 32 bits (idx_max > 32).
        narrow = self.buckets[-1].high <= 0xFFFFFFFF
        pad, label, num, stars = (5, 19, 10, STARS_MAX) if narrow else (15, 29, 20, STARS_MAX // 2)
        lines.append(f"{'':{pad}}{self.unit:<{label}} : count     distribution")
        for b in self.buckets:
            if strip_leading_zero and not b.count:
                continue
            strip_leading_zero = False
            bar = _stars(b.count, val_max, stars)
            lines.append(f"{b.low:>{num}d} -> {b.high:<{num}d} : {b.count:<8d} |{bar:<{stars}}|")
        return "\n".join(lines)

    def _render_libbpf(self, strip_leading_zero: bool) -> str:
        """libbpf-tools' trace_helpers.c print_log2_hist / print_linear_hist, format string for
        format string (their printf formats are quoted beside each line)."""
        counts = [_c_uint(b.count) for b in self.buckets]
        val_max = max(counts)
        lines = []
        if self.kind == "linear":
            lines.append(f"     {self.unit:<13} : count     distribution")  # "     %-13s : count     distribution\n"
            for b, val in zip(self.buckets, counts, strict=True):
                if val:  # "if (!val) continue;"
                    lines.append(f"        {_c_int(b.low):<10d} : {_c_int(val):<8d} |{_c_stars(val, val_max, STARS_MAX)}|")
            return "\n".join(lines)
        idx_max = len(counts) - 1  # the last non-zero slot: buckets end there
        narrow = idx_max <= 32
        pad, label, width, stars = (5, 19, 10, STARS_MAX) if narrow else (15, 29, 20, STARS_MAX // 2)
        lines.append(f"{'':{pad}}{self.unit:<{label}} : count    distribution")  # "%*s%-*s : count    distribution\n"
        for b, val in zip(self.buckets, counts, strict=True):
            if strip_leading_zero and not val:
                continue
            strip_leading_zero = False
            # "%*lld -> %-*lld : %-8d |", then print_stars, then "|\n"
            lines.append(f"{b.low:>{width}d} -> {b.high:<{width}d} : {_c_int(val):<8d} |{_c_stars(val, val_max, stars)}|")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def _c_uint(count: int) -> int:
    """A count as libbpf-tools holds it: ``unsigned int vals[]`` (wrapped past 32 bits)."""
    return count & 0xFFFFFFFF


def _c_int(value: int) -> int:
    """An ``unsigned int`` printed with ``%d``: 2**31 and above print negative."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _c_stars(val: int, val_max: int, width: int) -> str:
    """libbpf-tools' print_stars: ``min(val, val_max) * width / val_max`` stars in unsigned int
    arithmetic (the product wraps at 2**32 as C's does), spaces to ``width``, "+" past val_max."""
    stars = ((min(val, val_max) * width) & 0xFFFFFFFF) // val_max
    return "*" * stars + " " * (width - stars) + ("+" if val > val_max else "")


def _stars(val: int, val_max: int, width: int) -> str:
    """bcc's _stars, float arithmetic and all, so bars match to the column."""
    i = 0
    text = ""
    while not (i > (width * val / val_max) - 1 or i > width - 1):
        text += "*"
        i += 1
    if val > val_max:
        text = text[:-1] + "+"
    return text


# --------------------------------------------------------------------------------- building
def log2_hist(source: object, unit: str = "value", *, first_slot: int = 0, label: object = None,
              value_fields: Mapping[str, object] | None = None) -> Histogram:
    """A log2 histogram from slot counts, a slot -> count mapping, a value with ``slots`` or a
    map (see the module's docstring). Counts of slots below ``first_slot`` are not drawn (bcc
    skips its slot 0 the same way)."""
    counts = slot_counts(source)[first_slot:]
    buckets = []
    for i, count in enumerate(counts[: _last_nonzero(counts) + 1]):
        low, high = (0, 1) if i == 0 else (1 << i, (1 << (i + 1)) - 1)
        buckets.append(Bucket(low, high, count))
    return Histogram("log2", buckets, unit, label, dict(value_fields or {}))


def linear_hist(source: object, unit: str = "value", *, base: int = 0, step: int = 1, label: object = None,
                value_fields: Mapping[str, object] | None = None) -> Histogram:
    """A linear histogram: slot ``i`` holds ``[base + i*step, base + (i+1)*step - 1]``."""
    if step < 1:
        raise UsageError(f"linear histogram: step must be 1 or more, not {step}")
    counts = slot_counts(source)
    buckets = [Bucket(base + i * step, base + (i + 1) * step - 1, count)
               for i, count in enumerate(counts[: _last_nonzero(counts) + 1])]
    return Histogram("linear", buckets, unit, label, dict(value_fields or {}))


def _last_nonzero(counts: Sequence[int]) -> int:
    for i in range(len(counts) - 1, -1, -1):
        if counts[i]:
            return i
    return -1


def _hist(kind: Kind, source: object, unit: str, first_slot: int, base: int, step: int, label: object,
          value_fields: Mapping[str, object] | None = None) -> Histogram:
    if kind == "log2":
        return log2_hist(source, unit, first_slot=first_slot, label=label, value_fields=value_fields)
    return linear_hist(source, unit, base=base, step=step, label=label, value_fields=value_fields)


def slot_counts(source: object) -> list[int]:
    """One histogram's counts, slot by slot, from any of the single-histogram sources."""
    if _is_map(source):
        pairs = list(map_items(source))
        if len(pairs) == 1 and _as_int(pairs[0][1]) is None and _slots_of(pairs[0][1]) is not None:
            return _slots_of(pairs[0][1]) or []  # one struct hist (libbpf-tools' global mode)
        if pairs and all(_as_int(v) is None and _slots_of(v) is not None for _, v in pairs):
            raise UsageError(f"histogram from map {source.name!r}: it holds {len(pairs)} histograms, one per key: "
                             "read them with bpfkit.hist.per_key(m) or find_histograms(m)")
        return _counts_from_pairs(pairs, f"map {source.name!r}")
    slots = _slots_of(source)
    if slots is not None:
        return slots
    if isinstance(source, Mapping):
        return _counts_from_pairs(source.items(), "mapping")
    raise UsageError(f"histogram: cannot read slot counts from {type(source).__name__} {_short(source)}: "
                     "give a list of counts, a mapping slot -> count, a value with 'slots' or a map")


def _counts_from_pairs(pairs: Iterable[tuple[object, object]], what: str) -> list[int]:
    counts: list[int] = []
    for key, value in pairs:
        slot = _as_int(key)
        if slot is None or not 0 <= slot < LINEAR_INDEX_MAX:
            raise UsageError(f"histogram from {what}: key {_short(key)} is not a slot index (0..{LINEAR_INDEX_MAX - 1})")
        count = _count(value)
        if count is None:
            raise UsageError(f"histogram from {what}: the value at slot {slot}, {_short(value)}, is not a count")
        if slot >= len(counts):
            counts.extend([0] * (slot + 1 - len(counts)))
        counts[slot] += count
    return counts


def _slots_of(value: object) -> list[int] | None:
    """The slot counts of one histogram value: a list of counts or a record/dict with a
    ``slots`` array; None if it is neither."""
    fields = _fields(value)
    if fields is not None:
        return _slots_of(fields["slots"]) if "slots" in fields else None
    if isinstance(value, (list, tuple)):
        counts = [_as_int(v) for v in value]
        if all(c is not None for c in counts):
            return [c or 0 for c in counts]
    return None


def _count(value: object) -> int | None:
    """A count: an int, or a per-CPU list of ints (summed)."""
    number = _as_int(value)
    if number is not None:
        return number
    if isinstance(value, (list, tuple)) and value:
        parts = [_as_int(v) for v in value]
        if all(p is not None for p in parts):
            return sum(p or 0 for p in parts)
    return None


def _sum_cpus(values: list[object]) -> object:
    """A per-CPU map's value list (one per possible CPU) summed: counts, or slots slot by slot."""
    count = _count(values)
    if count is not None:
        return count
    per_cpu = [_slots_of(v) for v in values]
    if not values or any(s is None for s in per_cpu):
        return values
    width = max(len(s or ()) for s in per_cpu)
    summed = [sum((s or [])[i] for s in per_cpu if s is not None and i < len(s)) for i in range(width)]
    return {"slots": summed} if _fields(values[0]) is not None else summed


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)  # an IntEnum member counts as its value
    return None


def _fields(value: object) -> dict[str, object] | None:
    """A record's or dict's fields by name (records: the typed-map Record, anything with
    ``_fields``/``to_dict``); None for anything else."""
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {str(k): v for k, v in value.items()}
        return None
    names = getattr(value, "_fields", None)
    if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
        return {n: getattr(value, n) for n in names}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        out = to_dict()
        if isinstance(out, dict):
            return {str(k): v for k, v in out.items()}
    return None


def _plain(value: object) -> object:
    """A label made JSON-ready: records become dicts, bytes hex."""
    fields = _fields(value)
    if fields is not None:
        return {k: _plain(v) for k, v in fields.items()}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ----------------------------------------------------------------------------- per-key
def per_key(source: object, unit: str = "value", *, kind: Kind = "log2", first_slot: int = 0,
            base: int = 0, step: int = 1, slot_field: str | None = None) -> list[Histogram]:
    """Histograms per key, each with its key as ``label``, sorted by key where keys sort:

    * key -> histogram value (a record/dict with ``slots``, or a list of counts): runqlat -P;
      the value's other fields (runqlat's ``comm``) become the histogram's ``value_fields``;
    * struct key with a slot field (``slot_field``, else a field named slot or bucket) ->
      count: the label is the key without its slot (the one other field's value, or a dict).
    """
    pairs = list(map_items(source) if _is_map(source) else _pairs(source))
    groups: dict[object, tuple[object, list[tuple[object, object]]]] = {}
    extras: dict[object, dict[str, object]] = {}
    for key, value in pairs:
        slots = _slots_of(value)
        if slots is not None:
            groups[_hashable(key)] = (key, [(i, c) for i, c in enumerate(slots)])
            extras[_hashable(key)] = {k: v for k, v in (_fields(value) or {}).items() if k != "slots"}
            continue
        fields = _fields(key)
        name = slot_field or next((f for f in _SLOT_FIELDS if fields and f in fields), None)
        if fields is None or name is None or name not in fields:
            raise UsageError(f"per-key histogram: key {_short(key)} has no slot field (slot or bucket; "
                             "or give slot_field=) and its value is not a histogram")
        rest = {k: v for k, v in fields.items() if k != name}
        label: object = next(iter(rest.values())) if len(rest) == 1 else rest
        groups.setdefault(_hashable(label), (label, []))[1].append((fields[name], value))
    ordered = list(groups.items())
    try:
        ordered.sort(key=lambda item: item[0])  # type: ignore[arg-type,return-value]
    except TypeError:
        pass  # keys that do not sort keep the map's order
    return [_hist(kind, _counts_from_pairs(slot_pairs, f"key {_short(label)}"), unit, first_slot, base, step, label,
                  extras.get(hashed))
            for hashed, (label, slot_pairs) in ordered]


def _pairs(source: object) -> Iterable[tuple[object, object]]:
    if isinstance(source, Mapping):
        return source.items()
    if isinstance(source, Iterable):
        return (tuple(p) for p in source)
    raise UsageError(f"per-key histogram: cannot read (key, value) pairs from {type(source).__name__}")


def _hashable(value: object) -> object:
    fields = _fields(value)
    if fields is not None:
        return tuple((k, _hashable(v)) for k, v in fields.items())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


# ---------------------------------------------------------------------------------- maps
def map_items(m: MapWithItems) -> Iterator[tuple[object, object]]:
    """A map's (key, value) pairs for histograms: typed values as they are; bytes (a map
    without typed values) as little-endian integers when 1, 2, 4 or 8 bytes long, longer values
    as arrays of __u32 slots; a per-CPU map's values summed over the CPUs."""
    percpu = _is_percpu(m)
    for key, raw in m.items():
        value = _raw_value(raw)
        yield _raw_int(key), _sum_cpus(value) if percpu and isinstance(value, list) else value


def _raw_int(value: object) -> object:
    if isinstance(value, (bytes, bytearray)) and len(value) in (1, 2, 4, 8):
        return int.from_bytes(value, "little")
    return value


def _raw_value(value: object) -> object:
    if isinstance(value, list):
        return [_raw_value(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        if len(value) in (1, 2, 4, 8):
            return int.from_bytes(value, "little")
        if len(value) % 4 == 0:
            return [int.from_bytes(value[i : i + 4], "little") for i in range(0, len(value), 4)]
    return value


def _is_map(source: object) -> TypeGuard[MapWithItems]:
    """A map object (bpfkit.Map or alike: a name, items() and a key size), not a mapping."""
    return not isinstance(source, Mapping) and callable(getattr(source, "items", None)) and hasattr(source, "key_size")


def _is_percpu(m: object) -> bool:
    return getattr(m, "type", None) in PERCPU_TYPES


def find_histograms(m: MapWithItems, unit: str = "value", *, kind: Kind | None = None, first_slot: int = 0) -> list[Histogram]:
    """The histograms a map holds, recognised by shape; [] when it holds none:

    * values with a ``slots`` array (``struct hist``): one histogram per key (label = key);
    * a struct key with a ``slot``/``bucket`` field and integer values: one per other fields;
    * integer keys (slot indexes, 0..1024) and integer values, in a map whose name ends in
      hist, hists, histogram, dist or slots: one histogram (label None).

    ``kind`` None: linear when the map's name says "lin", else log2.
    """
    name = str(getattr(m, "name", ""))
    chosen: Kind = kind or ("linear" if "lin" in name.lower() else "log2")
    pairs = list(map_items(m))
    if not pairs:
        return []
    values = [v for _, v in pairs]
    keys = [k for k, _ in pairs]
    if all(_fields(v) is not None and _slots_of(v) is not None for v in values):
        return per_key(pairs, unit, kind=chosen, first_slot=first_slot)
    if all(_as_int(v) is not None for v in values):
        key_fields = [_fields(k) for k in keys]
        if all(f is not None and any(s in f for s in _SLOT_FIELDS) for f in key_fields):
            return per_key(pairs, unit, kind=chosen, first_slot=first_slot)
        slots = [_as_int(k) for k in keys]
        if _HIST_NAME.search(name) and all(s is not None and 0 <= s < LINEAR_INDEX_MAX for s in slots):
            return [_hist(chosen, _counts_from_pairs(pairs, f"map {name!r}"), unit, first_slot, 0, 1, None)]
    # Untyped values of a histogram-named map, longer than a count: __u32 slots arrays.
    if _HIST_NAME.search(name) and all(isinstance(v, list) and _slots_of(v) is not None for v in values):
        return per_key(pairs, unit, kind=chosen, first_slot=first_slot)
    return []


def render(histograms: Sequence[Histogram], *, section_header: str = "key", strip_leading_zero: bool = False,
           style: Style = "bcc", section: str | Callable[[Histogram], str] | None = None) -> str:
    """Several histograms drawn one after another; each with a label gets bcc's section line
    (``\\n{section_header} = {label}``) above it, as bcc's print_log2_hist with a secondary key.

    ``section`` writes that line instead: a format string over ``label`` (the key as text),
    the key's fields when it is a record, and the value's other fields (``value_fields``):
    runqlat's ``"pid = {label} {comm}"`` (``printf("\\npid = %d %s\\n", ...)``); or a function
    of the histogram. ``style``: see :meth:`Histogram.render` (with "libbpf-tools" an empty
    histogram adds no line under its section, as the C tools print nothing for it)."""
    parts = []
    for h in histograms:
        if h.label is not None or section is not None:
            parts.append("\n" + (_section_text(section, h) if section is not None
                                 else f"{section_header} = {_label_text(h.label)}"))
        text = h.render(strip_leading_zero=strip_leading_zero, style=style)
        if text or style == "bcc":
            parts.append(text)
    return "\n".join(parts)


def _section_text(section: str | Callable[[Histogram], str], h: Histogram) -> str:
    if callable(section):
        return section(h)
    names: dict[str, object] = {k: _field_text(v) for k, v in (_fields(h.label) or {}).items()}
    names.update((k, _field_text(v)) for k, v in h.value_fields.items())
    names["label"] = _label_text(h.label) if h.label is not None else ""
    try:
        return section.format(**names)
    except (KeyError, IndexError, ValueError) as exc:
        raise UsageError(f"histogram section {section!r}: cannot fill it ({type(exc).__name__}: {exc}); "
                         f"it may name {', '.join('{' + n + '}' for n in names)}") from None


def _field_text(value: object) -> object:
    """A field for a section line: a char array's bytes as its text up to the first NUL (as
    printf's %s reads it), anything else as it is."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    return value


def _label_text(label: object) -> str:
    fields = _fields(label)
    if fields is not None:
        return " ".join(f"{k}={_label_text(v)}" for k, v in fields.items())
    return str(label) if isinstance(label, (int, str)) else repr(label)


def render_map(m: MapWithItems, unit: str = "value", *, kind: Kind | None = None, first_slot: int = 0) -> str:
    """Every histogram :func:`find_histograms` recognises in ``m``, drawn; a line saying none
    was found otherwise. ``bpfkit map dump --hist`` prints this."""
    found = find_histograms(m, unit, kind=kind, first_slot=first_slot)
    name = getattr(m, "name", "?")
    if not found:
        return (f"map {name!r}: no histogram recognised (a value with a 'slots' array, a key with a "
                "slot field, or integer slot keys in a map named *hist/*dist/*slots)")
    return render(found)
