# SPDX-License-Identifier: Apache-2.0
"""bpfkit.hist without a kernel: building histograms from each kind of source, the text picture
(equal, string for string, to what bcc's table.py print_log2_hist / print_linear_hist prints for
the same counts: the expected strings below are bcc's output, captured), data and JSON, and
recognising histogram-shaped maps (a stand-in map object: only its items() are read)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bpfkit import hist
from bpfkit.errors import UsageError
from bpfkit.spec.consts import MapType

# bcc: _print_log2_hist([0, 0, 3, 10, 1, 0, 0, 7, 0, 0], "usecs", False) (bcc's slot 1 = 0 -> 1)
BCC_USECS = """\
     usecs               : count     distribution
         0 -> 1          : 0        |                                        |
         2 -> 3          : 3        |************                            |
         4 -> 7          : 10       |****************************************|
         8 -> 15         : 1        |****                                    |
        16 -> 31         : 0        |                                        |
        32 -> 63         : 0        |                                        |
        64 -> 127        : 7        |****************************            |"""
# bcc: _print_log2_hist([0, 0, 0, 4, 1], "nsecs", strip_leading_zero=True)
BCC_STRIPPED = """\
     nsecs               : count     distribution
         4 -> 7          : 4        |****************************************|
         8 -> 15         : 1        |**********                              |"""
# bcc: _print_linear_hist([2, 0, 5, 1, 0, 0], "msecs")
BCC_LINEAR = """\
     msecs         : count     distribution
        0          : 2        |****************                        |
        1          : 0        |                                        |
        2          : 5        |****************************************|
        3          : 1        |********                                |"""


def test_log2_text_equals_bcc() -> None:
    bcc_slots = [0, 0, 3, 10, 1, 0, 0, 7, 0, 0]
    assert hist.log2_hist(bcc_slots, "usecs", first_slot=1).render() == BCC_USECS
    # The same histogram in libbpf-tools' slots (slot 0 = 0 -> 1), as a struct hist value.
    assert str(hist.log2_hist({"slots": bcc_slots[1:]}, "usecs")) == BCC_USECS
    assert hist.log2_hist([0, 0, 4, 1], "nsecs").render(strip_leading_zero=True) == BCC_STRIPPED


def test_log2_text_wide_columns_past_32_bits() -> None:
    # bcc switches to 20-digit columns and 20 stars when values pass 2**32 - 1.
    slots = [0] * 40
    slots[0], slots[34], slots[35] = 2, 5, 1
    lines = hist.log2_hist(slots, "nsecs").render().splitlines()
    assert lines[0] == "               nsecs                         : count     distribution"
    assert lines[1] == "                   0 -> 1                    : 2        |********            |"
    assert lines[-2] == "         17179869184 -> 34359738367          : 5        |********************|"
    assert lines[-1] == "         34359738368 -> 68719476735          : 1        |****                |"
    assert len(lines) == 37  # the trailing empty slots are dropped


def test_linear_text_equals_bcc_and_steps() -> None:
    assert hist.linear_hist([2, 0, 5, 1, 0, 0], "msecs").render() == BCC_LINEAR
    h = hist.linear_hist([1, 3], "usecs", base=100, step=10)
    assert [(b.low, b.high, b.count) for b in h.buckets] == [(100, 109, 1), (110, 119, 3)]
    assert h.render().splitlines()[2].startswith("        110        : 3 ")
    with pytest.raises(UsageError, match="step must be 1 or more"):
        hist.linear_hist([1], step=0)


def test_empty_histogram_draws_nothing() -> None:
    for source in ([], [0, 0, 0], {}, {"slots": [0] * 26}):
        h = hist.log2_hist(source, "usecs")
        assert h.render() == "" and h.buckets == [] and h.total == 0 and h.percentile(50) is None


def test_sources_agree() -> None:
    want = [(0, 1, 4), (2, 3, 0), (4, 7, 9)]
    sources: list[object] = [
        [4, 0, 9, 0, 0],                       # slot counts
        {2: 9, 0: 4, 7: 0},                    # slot -> count (a map keyed by slot)
        {0: [1, 3], 2: [4, 5]},                # slot -> per-CPU counts: summed
        {"slots": [4, 0, 9]},                  # a struct hist as a dict
        _Rec(slots=[4, 0, 9]),                 # ... as a record
    ]
    for source in sources:
        h = hist.log2_hist(source, "usecs")
        assert [(b.low, b.high, b.count) for b in h.buckets] == want, source
        assert h.total == 13


def test_bad_sources_say_what() -> None:
    with pytest.raises(UsageError, match=r"cannot read slot counts from str 'x'"):
        hist.log2_hist("x")
    with pytest.raises(UsageError, match=r"key 5000 is not a slot index \(0..1024\)"):
        hist.log2_hist({5000: 1})
    with pytest.raises(UsageError, match=r"the value at slot 1, 'many', is not a count"):
        hist.log2_hist({1: "many"})
    with pytest.raises(UsageError, match=r"not in 0..100"):
        hist.log2_hist([1]).percentile(101)


def test_data_json_and_percentiles() -> None:
    h = hist.log2_hist([0, 10, 10], "usecs")
    assert h.to_dict() == {"kind": "log2", "unit": "usecs", "total": 20, "buckets": [
        {"low": 0, "high": 1, "count": 0}, {"low": 2, "high": 3, "count": 10}, {"low": 4, "high": 7, "count": 10}]}
    json.dumps(h.to_dict())
    assert h.percentile(50) == 4.0  # the first bucket's top: [2, 4) holds half
    assert h.percentile(75) == 6.0  # halfway through [4, 8)
    assert h.percentile(0) == 2.0


class _Rec:
    """A record as the typed-map codec gives them: fields by attribute, _fields, to_dict()."""

    def __init__(self, **fields: object) -> None:
        self._fields = tuple(fields)
        self.__dict__.update(fields)

    def to_dict(self) -> dict[str, object]:
        return {n: getattr(self, n) for n in self._fields}


def test_per_key_struct_hist_values() -> None:
    # runqlat -P: pid -> struct hist
    found = hist.per_key({300: _Rec(slots=[0, 2]), 100: {"slots": [1]}}, "usecs")
    assert [h.label for h in found] == [100, 300]
    assert [h.counts for h in found] == [[1], [0, 2]]
    text = hist.render(found, section_header="pid")
    assert text.startswith("\npid = 100\n     usecs               : count     distribution\n")
    assert "\npid = 300\n" in text


def test_per_key_struct_keys_with_slot() -> None:
    # bcc's secondary key: {disk, slot} -> count; the label drops the slot field.
    items = [({"disk": "sda", "slot": 2}, 5), ({"disk": "sda", "slot": 0}, 1), ({"disk": "nvme0", "slot": 1}, 3)]
    found = hist.per_key(items, "usecs")
    assert [(h.label, h.counts) for h in found] == [("nvme0", [0, 3]), ("sda", [1, 0, 5])]
    two = hist.per_key([(_Rec(pid=1, cpu=0, bucket=0), 4)])
    assert two[0].label == {"pid": 1, "cpu": 0} and two[0].to_dict()["label"] == {"pid": 1, "cpu": 0}
    with pytest.raises(UsageError, match="has no slot field"):
        hist.per_key([({"pid": 1}, 4)])


class FakeMap:
    """A stand-in for bpfkit.Map: find_histograms reads only name, type, key_size and items()."""

    def __init__(self, name: str, items: list[tuple[object, object]], type: MapType = MapType.HASH,
                 key_size: int = 4) -> None:
        self.name, self.type, self.key_size, self._items = name, type, key_size, items

    def items(self) -> Iterator[tuple[object, object]]:
        return iter(self._items)


def _u32(n: int) -> bytes:
    return n.to_bytes(4, "little")


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "little")


def test_find_histograms_by_shape() -> None:
    # A slot-keyed array of counts, untyped (bytes), recognised by its name.
    raw = FakeMap("lat_hist", [(_u32(i), _u64(c)) for i, c in enumerate([1, 0, 4, 0])], MapType.ARRAY)
    (h,) = hist.find_histograms(raw, "usecs")
    assert h.label is None and h.counts == [1, 0, 4]
    assert hist.render_map(raw, "usecs") == hist.log2_hist([1, 0, 4], "usecs").render()
    # The same counts in a map not named like a histogram: not recognised.
    assert hist.find_histograms(FakeMap("counts", raw._items)) == []
    # Per-CPU: summed.
    pcpu = FakeMap("dist", [(_u32(0), [_u64(1), _u64(2)]), (_u32(1), [_u64(0), _u64(5)])], MapType.PERCPU_ARRAY)
    assert hist.find_histograms(pcpu)[0].counts == [3, 5]
    assert hist.log2_hist(pcpu).counts == [3, 5]
    # Typed struct hist values (any name), per key; per-CPU records summed slot by slot.
    typed = FakeMap("whatever", [(7, _Rec(slots=[0, 1])), (3, _Rec(slots=[2]))])
    assert [(h.label, h.counts) for h in hist.find_histograms(typed)] == [(3, [2]), (7, [0, 1])]
    with pytest.raises(UsageError, match=r"map 'whatever': it holds 2 histograms, one per key: read them with "
                                         r"bpfkit.hist.per_key\(m\) or find_histograms\(m\)"):
        hist.log2_hist(typed)
    assert hist.log2_hist(FakeMap("one", [(0, _Rec(slots=[5]))])).counts == [5]  # one struct hist: itself
    typed_pcpu = FakeMap("x", [(1, [_Rec(slots=[1, 0]), _Rec(slots=[0, 2])])], MapType.PERCPU_HASH)
    assert hist.find_histograms(typed_pcpu)[0].counts == [1, 2]
    # Untyped struct hist values (bytes of __u32 slots) in a histogram-named map.
    raw_hist = FakeMap("hists", [(_u32(42), b"".join(_u32(c) for c in [0, 3, 1, 0]))])
    assert [(h.label, h.counts) for h in hist.find_histograms(raw_hist)] == [(42, [0, 3, 1])]
    # Struct keys with a slot field.
    keyed = FakeMap("k", [(_Rec(tid=5, slot=1), 2)], key_size=8)
    assert [(h.label, h.counts) for h in hist.find_histograms(keyed)] == [(5, [0, 2])]
    # Linear by name.
    assert hist.find_histograms(FakeMap("lin_hist", [(_u32(0), _u64(1))]))[0].kind == "linear"
    # Nothing there.
    assert "no histogram recognised" in hist.render_map(FakeMap("events", [(_u32(0), b"\0" * 3)]))
    assert hist.find_histograms(FakeMap("hist", [])) == []
