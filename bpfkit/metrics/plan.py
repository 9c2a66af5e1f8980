# SPDX-License-Identifier: Apache-2.0
"""What a map becomes as Prometheus metrics, decided once from its BTF key and value types.

A :class:`MapMetrics` names the metric families of one map and how each sample is read from a
decoded (key, value) pair: the labels (one per key field, or ``key`` for a scalar key), the
value fields (one family per numeric leaf of the value, or the value itself when it is an
integer) and, for histogram-shaped maps, a :class:`HistPlan`. :func:`plan_map` makes the
automatic plan; a metrics config (:mod:`bpfkit.metrics.config`) edits it.

Histogram shapes (the ones bpfkit.hist recognises from data, here from types):

* a value struct with a ``slots`` array of integers (libbpf-tools' ``struct hist``): one
  histogram per key;
* a key struct with an integer ``slot`` or ``bucket`` field and an integer value (bcc's
  secondary-key histograms): one histogram per the key's other fields;
* an integer key and an integer value in a map named ``*hist``, ``*dist``, ``*slots``, ...
  (bcc's ``BPF_HISTOGRAM``, an array indexed by slot): one histogram.

Log2 unless the map's name says ``lin``, as bpfkit.hist decides.

Families are gauges unless named as counters are (:func:`auto_kind`: ``*_total``, ``*_count``,
``*_sum``, ``*_bucket``, and every field of a map named ``*_total``), since promtool refuses a
gauge so named. :func:`plan_collection` leaves out :func:`internal` maps: a program's working
state (start times keyed by kernel pointers, scratch space), not metrics.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Literal

from ..btf import layout
from ..btf.spec import BTF
from ..btf.types import Array, Enum, Float, Int, IntEncoding, Pointer, Struct, Type, Union
from ..errors import UsageError
from ..hist import _HIST_NAME  # the map names bpfkit.hist takes for slot-keyed histograms
from ..maps import PERCPU_TYPES, Map
from ..spec.consts import MapType

__all__ = ["Label", "Field", "HistPlan", "MapMetrics", "plan_map", "plan_collection", "object_name", "metric_name", "SERVED_TYPES",
           "name_clash", "label_problem", "RENDER_ERRORS", "internal", "internal_maps", "auto_kind", "scaled", "CUMULATIVE",
           "MAX_SLOT"]

# Maps whose elements are counters or gauges: hashes and arrays, per-CPU or not.
SERVED_TYPES = frozenset({MapType.HASH, MapType.ARRAY, MapType.PERCPU_HASH, MapType.PERCPU_ARRAY,
                          MapType.LRU_HASH, MapType.LRU_PERCPU_HASH})
SLOT_FIELDS = ("slot", "bucket")
MAX_SLOT = 4096  # the highest slot index a histogram's key is read as (past it: not a slot)
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")
_METRIC_NAME_OK = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z").match
_LABEL_NAME_OK = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z").match
# The collector's own counter of maps it could not render (bpfkit.metrics.collector).
RENDER_ERRORS = "bpfkit_metrics_render_errors"

Getter = Callable[[object], object]
Kind = Literal["gauge", "counter"]


def metric_name(*parts: str) -> str:
    """Parts joined with ``_``, each reduced to [a-zA-Z0-9_] (Prometheus' metric name syntax)."""
    name = "_".join(_NOT_NAME.sub("_", p) for p in parts if p)
    return "_" + name if name[:1].isdigit() else name


def label_text(value: object) -> str:
    """A label value as text: enum members by name, bools true/false, bytes as hex, lists
    comma-joined, everything else str()."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, list):
        return ",".join(label_text(v) for v in value)
    return str(value)


@dataclasses.dataclass
class Label:
    """One label: its name, how to read it from the decoded key, how to write it as text."""

    name: str
    get: Getter
    text: Callable[[object], str] = label_text
    path: str = ""  # the key field ("" for a scalar key)
    offset: int = -1  # where the field lies in the raw key, and its struct format ("": none)
    fmt: str = ""
    raw: bool = False  # text takes a char array's bytes as they are (decoders), not as text


@dataclasses.dataclass
class Field:
    """One metric family read from the decoded value."""

    name: str        # the full metric name
    get: Getter
    help: str
    kind: Kind = "gauge"
    path: str = ""   # the value field ("" for a scalar value)
    offset: int = -1  # where the field lies in the raw value, and its struct format ("": none)
    fmt: str = ""


@dataclasses.dataclass
class HistPlan:
    """A histogram family: where the slot counts come from and how slots map to bounds.

    ``source``: "value_slots" (``get`` reads the slots list from the value), "key_slot"
    (``slot`` reads the slot index from the key; the value is the count), "slot_key" (the
    key is the slot index, the value the count). Slots count integers (a BPF program takes the
    log2 of an integer): slot ``i`` of a log2 histogram holds ``[2**j, 2**(j+1) - 1]`` with
    ``j = i - first_slot`` (slot ``first_slot`` holds 0 and 1; libbpf-tools' and bpftrace's
    log2 has ``first_slot`` 0, bcc's ``bpf_log2l`` 1), so its ``le`` is ``2**(j+1) - 1``; slot
    ``i`` of a linear one holds ``[base + i*step, base + (i+1)*step - 1]``. Every bound is
    scaled by ``multiplier``. ``sum_slot`` (bucket_max + 1, -1: none) holds the exact sum of
    the values counted, as ebpf_exporter's programs keep it: it is ``_sum``, never a bucket,
    and the buckets are the slots below it."""

    name: str
    help: str
    source: Literal["value_slots", "key_slot", "slot_key"]
    get: Getter | None = None
    slot: Getter | None = None
    kind: Literal["log2", "linear"] = "log2"
    slots: int = 0            # buckets known from the type (a slots array, an array map); 0: as seen
    first_slot: int = 0
    base: int = 0
    step: int = 1
    multiplier: float = 1.0   # scales every bound (usecs counted, seconds served)
    slot_path: str = ""       # key_slot: the key field holding the slot
    sum_slot: int = -1        # the slot holding the exact sum (a config's bucket_max + 1); -1: none

    def slot_range(self, i: int) -> tuple[int, int]:
        """The integers slot ``i`` counts, inclusive, before ``multiplier``."""
        if self.kind == "linear":
            low = self.base + i * self.step
            return low, low + self.step - 1
        j = i - self.first_slot
        return (0, 1) if j <= 0 else (1 << j, (2 << j) - 1)

    def upper(self, i: int) -> float:
        """The inclusive upper bound (Prometheus' ``le``) of slot ``i`` (see :func:`scaled`);
        ``inf`` past the range of a float (a log2 slot 1,023 and up: 2**1024 is not one)."""
        return scaled(self.slot_range(i)[1], self.multiplier)

    def lower(self, i: int) -> float:
        return scaled(self.slot_range(i)[0], self.multiplier)


def scaled(n: int, multiplier: float) -> float:
    """``n`` x ``multiplier`` as the float nearest the exact product of ``n`` and the decimal
    ``multiplier`` reads as (its shortest text: what a config said), so a bound prints in its
    shortest exact form: 15 x 1e-06 is ``1.5e-05``, where float arithmetic gives
    ``1.4999999999999999e-05``; and 2**53 + 1 stays exact until the last rounding. ``inf``
    past float's range."""
    try:
        if multiplier == 1.0:
            return float(n)
        if not math.isfinite(multiplier):
            return n * multiplier
        num, den = _decimal(multiplier)
        return n * num / den  # int / int: correctly rounded
    except OverflowError:  # past float's range (2**1024 and up)
        return math.inf if n > 0 else -math.inf


@functools.lru_cache(maxsize=64)
def _decimal(multiplier: float) -> tuple[int, int]:
    return Fraction(repr(multiplier)).as_integer_ratio()


@dataclasses.dataclass
class MapMetrics:
    """The metric families of one map."""

    map: Map
    base: str                       # bpfkit_<object>_<map>
    labels: list[Label]
    fields: list[Field]
    hist: HistPlan | None = None
    percpu: bool = False
    skipped: list[str] = dataclasses.field(default_factory=list)  # value fields not served, and why
    summed: bool = False  # labels from some key fields only: entries with the same labels are added up


@dataclasses.dataclass
class _Leaf:
    path: str        # dotted, as attrgetter takes it
    kind: str        # int, enum, bool, float, text, slots, array, pointer, other
    type_id: int
    offset: int = -1  # bytes from the start of the key/value; -1: not at a whole byte (a bitfield)
    fmt: str = ""     # its struct format ("" where it has none: bitfields, unions, odd sizes)


def _leaves(btf: BTF, type_id: int) -> list[_Leaf]:
    """The named leaves of a key or value type, nested structs flattened (anonymous members
    under their parent, as bpfkit.btf.values decodes them), as bpfkit.btf.layout lays them out."""
    out: list[_Leaf] = []
    for leaf in layout.leaves(btf, type_id, _opens):
        t, members = leaf.type, leaf.path
        if members and not members[-1].name and not isinstance(t, Struct):
            continue  # an anonymous bitfield (padding) or scalar: nothing C can name
        path = ".".join([m.name for m in members if m.name]) if len(members) > 1 else members[0].name if members else ""
        if leaf.bitfield:
            out.append(_Leaf(path, "enum" if isinstance(t, Enum) else "int", leaf.type_id))
        elif isinstance(t, Int):
            kind = "bool" if t.encoding & IntEncoding.BOOL else "int"
            out.append(_Leaf(path, kind, leaf.type_id, leaf.offset, layout.scalar_format(t)))
        elif isinstance(t, (Enum, Float)):
            out.append(_Leaf(path, "enum" if isinstance(t, Enum) else "float", leaf.type_id, leaf.offset,
                             layout.scalar_format(t)))
        else:
            out.append(_array_leaf(btf, t, path, leaf.type_id, leaf.offset))
    return out


def _opens(t: Type, depth: int) -> bool:
    """Structs (not unions) are flattened, eight levels deep at most."""
    return isinstance(t, Struct) and not isinstance(t, Union) and depth < 8


def _array_leaf(btf: BTF, t: Type, path: str, type_id: int, offset: int) -> _Leaf:
    """A char array is text, an array of integers or enums slots (named ``slots``) or an
    array, a pointer a pointer; anything else (unions, structs past the depth...) is other."""
    if isinstance(t, Pointer):
        return _Leaf(path, "pointer", type_id, offset)
    if isinstance(t, Array):
        elem = btf.resolve(t.type)
        if isinstance(elem, Int) and elem.size == 1 and (elem.encoding & IntEncoding.CHAR or "char" in elem.name):
            return _Leaf(path, "text", type_id, offset, f"{t.nelems}s")
        if isinstance(elem, (Int, Enum)):
            return _Leaf(path, "slots" if path.rsplit(".", 1)[-1] == "slots" else "array", type_id, offset)
    return _Leaf(path, "other", type_id, offset)


def _default_text(btf: BTF, leaf: _Leaf) -> Callable[[object], str]:
    """Enums by member name (an unnamed value as its number), the rest as :func:`label_text`."""
    t = btf.resolve(leaf.type_id)
    if leaf.kind == "enum" and isinstance(t, Enum):
        names = {v.value: v.name for v in t.values}

        def enum_text(value: object) -> str:
            return names.get(value, str(int(value))) if isinstance(value, int) else label_text(value)
        return enum_text
    return label_text


def _getter(path: str) -> Getter:
    return operator.attrgetter(path) if path else _identity


def _identity(value: object) -> object:
    return value


def plan_map(m: Map, object_name: str, *, prefix: str = "bpfkit") -> MapMetrics | None:
    """The automatic plan for ``m`` (None: not a BTF-typed hash or array, or nothing numeric).

    Labels: each key leaf (``a.b`` -> label ``a_b``) or ``key`` for a scalar key. Families:
    ``<prefix>_<object>_<map>_<field>`` per numeric value leaf (ints, enums as their number,
    bools as 0/1, floats), ``<prefix>_<object>_<map>`` for an integer value."""
    if m.type not in SERVED_TYPES:
        return None
    kc, vc = m.key_codec, m.value_codec
    if kc is None or vc is None:
        return None  # no BTF for the key or value (or a data section: .rodata, .bss)
    btf = vc.btf
    base = metric_name(prefix, object_name, m.name)
    keys = _leaves(btf, kc.type_id)
    values = _leaves(btf, vc.type_id)
    percpu = m.type in PERCPU_TYPES
    hist = _hist_plan(m, base, keys, values, btf)
    slot_path = hist and hist.source == "key_slot" and next(k.path for k in keys if k.path.rsplit(".", 1)[-1] in SLOT_FIELDS)
    labels = [Label(metric_name(k.path.replace(".", "_")) if k.path else "key", _getter(k.path),
                    _default_text(btf, k), path=k.path, offset=k.offset, fmt=k.fmt)
              for k in keys if k.path != slot_path]
    if hist is not None and hist.source == "slot_key":
        labels = []
    fields: list[Field] = []
    skipped: list[str] = []
    if hist is None or hist.source == "value_slots":
        for leaf in values:
            shown = leaf.path or "value"
            if leaf.kind in ("int", "enum", "bool", "float"):
                name = metric_name(base, leaf.path.replace(".", "_")) if leaf.path else base
                fields.append(Field(name, _getter(leaf.path), f"map {m.name} ({m.type.kernel_name}) {shown}",
                                    auto_kind(name, base), path=leaf.path, offset=leaf.offset, fmt=leaf.fmt))
            elif leaf.kind != "slots" or hist is None:
                skipped.append(f"{shown} ({btf.type_name(leaf.type_id)}: not a number)")
    if not fields and hist is None:
        return None
    _unique_labels(labels, hist)
    return MapMetrics(m, base, labels, fields, hist, percpu, skipped)


# The suffixes of the samples of counters, histograms and summaries. promtool check metrics
# refuses a gauge named with one ('non-counter metrics should not have "_total" suffix', and
# '... "_count"', '"_sum"', '"_bucket"' for non-histograms), and a value so named adds up what
# it counts (ebpf_exporter names its counter maps *_total).
CUMULATIVE = ("_total", "_count", "_sum", "_bucket")


def auto_kind(name: str, base: str) -> Kind:
    """A family's kind when no config says: a counter when its name ends in a
    :data:`CUMULATIVE` suffix or its map's family (``base``) ends in ``_total`` (a map of
    totals: every field adds up), else a gauge."""
    return "counter" if name.endswith(CUMULATIVE) or base.endswith("_total") else "gauge"


# Internal maps: a program's working state, not a metric (see :func:`internal`). Words of a map's
# name (split at _) that say it holds start times or scratch space: biolatency's start,
# libbpf-tools' funclatency starts, softirqslower entry_ts, ebpf_exporter's start_wait and
# softirq_entry_timestamp ...
_STATE_NAME = frozenset({"start", "starts", "ts", "tstamp", "timestamp", "timestamps", "tmp", "scratch"})
# Words of a value field's name that say it holds a time stamp or an identifier (a trace's
# span_id, a tgid): a map whose every number is one is state kept between events.
_STATE_FIELD = frozenset({"start", "ts", "tstamp", "timestamp", "id", "ids", "pid", "tid", "tgid"})


def internal(plan: MapMetrics) -> str | None:
    """Why the planned map is a program's working state rather than a metric, as its BTF and
    names tell (None: nothing says so). Maps without a config are served only when this is None
    (a config that names a map serves it whatever this says):

    * a name beginning with ``__`` (C's reserved names: libbpf's own ``__bpf_usdt_specs`` and
      ``__bpf_usdt_ip_to_spec_id``, which usdt.bpf.h adds to every USDT object);
    * a key that is or holds a pointer (``struct request *``): entries live while the object
      does (an I/O in flight, a socket), keyed by kernel addresses, one series each;
    * a name whose words (split at ``_``) include start(s), ts, tstamp, timestamp(s), tmp or
      scratch, unless the name ends in a :data:`CUMULATIVE` suffix (``timer_starts_total`` is
      a counter) or the map is histogram-shaped;
    * a struct value whose every number is named as a time stamp or an identifier (words ts,
      tstamp, timestamp, start, id, ids, pid, tid, tgid: ``start_ns``, ``trace_id_hi``,
      ``span_id``).
    """
    m = plan.map
    kc, vc = m.key_codec, m.value_codec
    if kc is None or vc is None:
        return None
    if m.name.startswith("__"):
        return "its name begins with __, as the maps libbpf adds for itself do (__bpf_usdt_specs)"
    pointer = next((k for k in _leaves(kc.btf, kc.type_id) if k.kind == "pointer"), None)
    if pointer is not None:
        field = f" field {pointer.path}" if pointer.path else ""
        return f"its key{field} is a pointer ({kc.btf.type_name(pointer.type_id)}): an object in flight, not a label"
    words = set(m.name.lower().split("_"))
    if words & _STATE_NAME and plan.hist is None and not m.name.endswith(CUMULATIVE):
        return f"its name says it holds {' and '.join(sorted(words & _STATE_NAME))} (start times or scratch space)"
    numbers = [f.path for f in plan.fields]
    if plan.hist is None and numbers and all(p and set(p.rsplit(".", 1)[-1].lower().split("_")) & _STATE_FIELD
                                             for p in numbers):
        return f"its value fields ({', '.join(numbers)}) are time stamps or identifiers, not quantities"
    return None


def internal_maps(maps: Mapping[str, Map], obj: str) -> dict[str, str]:
    """The maps whose automatic plan is :func:`internal`, and why (what a note tells the user
    who wonders where a map went)."""
    out: dict[str, str] = {}
    for name, m in sorted(maps.items()):
        plan = plan_map(m, obj)
        why = internal(plan) if plan is not None else None
        if why is not None:
            out[name] = why
    return out


def _unique_labels(labels: list[Label], hist: HistPlan | None) -> None:
    """Prometheus reserves ``le`` in histograms and ``__*`` names; rename, keeping them unique."""
    seen: set[str] = set()
    for label in labels:
        name = label.name.lstrip("_") or "key"
        if name[0].isdigit():  # a BTF member name need not be a C identifier
            name = "_" + name
        if hist is not None and name == "le":
            name = "le_"
        while name in seen:
            name += "_"
        seen.add(name)
        label.name = name


def _hist_plan(m: Map, base: str, keys: list[_Leaf], values: list[_Leaf], btf: BTF) -> HistPlan | None:
    kind: Literal["log2", "linear"] = "linear" if "lin" in m.name.lower() else "log2"
    help_text = f"map {m.name} ({m.type.kernel_name}) as a {kind} histogram"
    slots = [v for v in values if v.kind == "slots"]
    if slots:
        arr = btf.resolve(slots[0].type_id)
        n = arr.nelems if isinstance(arr, Array) else 0
        return HistPlan(metric_name(base, slots[0].path.replace(".", "_")) if len(values) > 1 else base, help_text,
                        "value_slots", get=_getter(slots[0].path), kind=kind, slots=n)
    int_value = len(values) == 1 and not values[0].path and values[0].kind == "int"
    if not int_value:
        return None
    slot_keys = [k for k in keys if k.path and k.path.rsplit(".", 1)[-1] in SLOT_FIELDS and k.kind == "int"]
    if slot_keys:
        return HistPlan(base, help_text, "key_slot", slot=_getter(slot_keys[0].path), kind=kind, slot_path=slot_keys[0].path)
    if len(keys) == 1 and not keys[0].path and keys[0].kind == "int" and _HIST_NAME.search(m.name):
        n = m.max_entries if m.type in (MapType.ARRAY, MapType.PERCPU_ARRAY) else 0
        return HistPlan(base, help_text, "slot_key", kind=kind, slots=n)
    return None


def label_problem(name: str, histogram: bool) -> str | None:
    """Why Prometheus would refuse or misread a label of this name (None: it would not)."""
    if not _LABEL_NAME_OK(name):
        return f"{name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
    if name.startswith("__"):
        return f"label {name!r}: names beginning with __ are reserved for Prometheus' own labels"
    if histogram and name == "le":
        return "label 'le' is the one a histogram's buckets are told apart by: give it another name (name:)"
    return None


def _claims(plan: MapMetrics) -> Iterator[tuple[str, str]]:
    """(metric name, what it comes from) for every name the plan's families use in an
    exposition: a counter's family and its ``_total`` samples, a histogram's family and its
    ``_bucket``, ``_sum`` and ``_count`` samples."""
    for f in plan.fields:
        what = f"map {plan.map.name} field {f.path or 'value'} ({f.name})"
        if f.kind == "counter":
            base = f.name.removesuffix("_total")
            yield base + "_total", what  # the samples' name first: a clash is told by it
            yield base, what
        else:
            yield f.name, what
    if plan.hist is not None:
        what = f"map {plan.map.name} histogram ({plan.hist.name})"
        for suffix in ("", "_bucket", "_sum", "_count"):
            yield plan.hist.name + suffix, what


def name_clash(plans: Iterable[MapMetrics]) -> tuple[MapMetrics, str] | None:
    """The first plan whose families or labels Prometheus would refuse or misread, and why:
    a name two families use (``a.b`` and ``a_b`` are both ``_a_b``; a counter ``x`` and a gauge
    ``x_total``; a gauge ``h_count`` beside a histogram ``h``; the collector's own
    :data:`RENDER_ERRORS`), a name that is not Prometheus', a label given twice, ``le`` on a
    histogram, a ``__`` label."""
    owners = {name: "bpfkit's own count of render errors" for name in (RENDER_ERRORS, RENDER_ERRORS + "_total")}
    for plan in plans:
        for name, what in _claims(plan):
            if not _METRIC_NAME_OK(name):
                return plan, f"{what}: {name!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
            other = owners.setdefault(name, what)
            if other != what:
                return plan, f"{other} and {what} are both served as {name}"
        seen: set[str] = set()
        for label in plan.labels:
            problem = label_problem(label.name, plan.hist is not None)
            if problem is None and label.name in seen:
                problem = f"label {label.name!r} given twice"
            if problem is not None:
                return plan, f"map {plan.map.name}: {problem}"
            seen.add(label.name)
    return None


def object_name(path: str) -> str:
    """The object's name in metric names: its file name without ``.bpf.o`` / ``.o``."""
    name = path.rsplit("/", 1)[-1]
    for suffix in (".bpf.o", ".o"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def plan_collection(maps: Mapping[str, Map], obj: str, *, prefix: str = "bpfkit") -> list[MapMetrics]:
    """The automatic plans of every map that has one (see :func:`plan_map`) and is not
    :func:`internal`, in name order; UsageError if Prometheus would refuse or misread them
    (:func:`name_clash`)."""
    plans = [p for p in (plan_map(m, obj, prefix=prefix) for _, m in sorted(maps.items()))
             if p is not None and internal(p) is None]
    clash = name_clash(plans)
    if clash is not None:
        raise UsageError(f"metrics for {obj or 'the object'}: {clash[1]}: serve one of them under another name "
                         "with --metrics-config (name:)")
    return plans
