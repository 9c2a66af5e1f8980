# SPDX-License-Identifier: Apache-2.0
"""bpfkit.profile's formats: folded stacks, pprof (read back through the same descriptors, and
checked against profile.proto's field numbers by decoding the wire format by hand), speedscope
JSON, and the SVG flame graph (well-formed XML, one frame per node, its script inline)."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bpfkit.errors import UsageError
from bpfkit.profile import Profile, format_for, from_folded, to_folded, to_speedscope, write_profile

CHAIN = ["workload", "main", "a", "b", "c", "spin"]


def sample_profile() -> Profile:
    p = Profile(name="test", period=10_101_010)
    p.add(CHAIN, 90)
    p.add(["workload", "main", "a", "getppid_[k]"], 7)
    p.add(["python", "<odd & \"name\">;x"], 3)
    return p


def test_folded_round_trip() -> None:
    p = sample_profile()
    text = to_folded(p)
    assert "workload;main;a;b;c;spin 90\n" in text
    assert "python;<odd & \"name\">:x 3\n" in text  # ';' inside a name would split it
    back = from_folded(text)
    assert back.total == 100 and back.stacks[tuple(CHAIN)] == 90
    assert back.top(1) == [("spin", 90)]
    with pytest.raises(UsageError, match="folded stacks, line 1: 'a;b' does not end in a count"):
        from_folded("a;b\n")


def test_pprof_round_trip_and_wire_format() -> None:
    pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    from bpfkit.profile.pprof import from_pprof, to_pprof

    p = sample_profile()
    data = to_pprof(p)
    back = from_pprof(data)
    assert back.stacks == p.stacks and back.period == p.period
    assert (back.sample_type, back.unit, back.period_type, back.period_unit) == ("samples", "count", "cpu", "nanoseconds")
    raw = gzip.decompress(data)
    # Field 6 (string_table), wire type 2: the first string is "" (profile.proto requires it).
    assert b"\x32\x00" in raw
    fields = _top_level_fields(raw)
    assert {1, 2, 4, 5, 6, 9, 11, 12} <= fields, fields


def _top_level_fields(raw: bytes) -> set[int]:
    """Field numbers of a protobuf message, read from the wire format by hand."""
    out, i = set(), 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = raw[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(raw):
        key = varint()
        out.add(key >> 3)
        if key & 7 == 0:
            varint()
        elif key & 7 == 2:
            size = varint()  # (not ``i += varint()``: that reads i before varint moves it)
            i += size
        else:
            raise AssertionError(f"unexpected wire type {key & 7}")
    return out


def test_speedscope() -> None:
    doc = json.loads(to_speedscope(sample_profile()))
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [f["name"] for f in doc["shared"]["frames"]]
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and prof["endValue"] == 100 == sum(prof["weights"])
    stacks = {tuple(frames[i] for i in s): w for s, w in zip(prof["samples"], prof["weights"])}
    assert stacks[tuple(CHAIN)] == 90


def test_svg_flame_graph(tmp_path: Path) -> None:
    path = tmp_path / "p.svg"
    assert write_profile(sample_profile(), str(path), title="t <1>") == "svg"
    root = ET.parse(path).getroot()  # well-formed XML
    ns = {"s": "http://www.w3.org/2000/svg"}
    frames = root.findall(".//s:g[@id='frames']/s:g", ns)
    names = [g.get("data-n") for g in frames]
    # all + workload, main, a, b, c, spin, getppid_[k] + python, the odd name
    assert sorted(names) == sorted(["all", *CHAIN, "getppid_[k]", "python", "<odd & \"name\">;x"])
    spin = frames[names.index("spin")]
    assert spin.find("s:title", ns).text == "spin (90 samples, 90.00%)"  # type: ignore[union-attr]
    assert float(spin.get("data-v")) == 90  # type: ignore[arg-type]
    scripts = root.findall("s:script", ns)
    assert len(scripts) == 1 and "function zoom" in scripts[0].text and "function search" in scripts[0].text  # type: ignore[operator]
    assert "href" not in path.read_text().replace("xmlns:xlink", "")  # nothing external


def test_format_by_suffix() -> None:
    assert [format_for(f"p{s}") for s in (".svg", ".pprof", ".pb.gz", ".folded", ".speedscope.json")] == [
        "svg", "pprof", "pprof", "folded", "speedscope"]
    with pytest.raises(UsageError) as info:
        format_for("p.png")
    assert str(info.value) == ("--output p.png: unknown format; name the file *.svg (flame graph), *.pprof or "
                               "*.pb.gz (pprof), *.folded (folded stacks) or *.speedscope.json (speedscope)")
