# SPDX-License-Identifier: Apache-2.0
"""Writes of values that do not fit, on real maps (issue #35, item 9): ``m[k] = v`` on a map
typed through BTF raises BTFValueError naming the field, the type and why (struct.error,
OverflowError, UnicodeEncodeError and ValueError before), and the map is left as it was; the
same for per-CPU values, batches, untyped maps (UsageError), a loaded skeleton's variables, and
`bpfkit load --set` with a byte that is not UTF-8, which reaches the program as that byte.
Objects: bpf/values_hostile.bpf.c, bpf/maps_typed.bpf.c."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

import bpfkit
from bpfkit import Collection, load_spec
from bpfkit._kernel.consts import MapType
from bpfkit._kernel.cpus import num_possible_cpus
from bpfkit.errors import BTFValueError, UsageError
from bpfkit.maps import Map, MapSpec
from conftest import bpf_object


def nested(depth: int) -> list[object]:
    value: list[object] = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


def contents(m: Map) -> list[tuple[bytes, bytes]]:
    """Every entry as the kernel holds it (bytes, so NaN and Records compare plainly)."""
    return sorted((k, m._lookup_raw(k) or b"") for k in m._raw_keys())


@pytest.fixture
def coll() -> Iterator[Collection]:
    with Collection(load_spec(bpf_object("values_hostile"))) as c:
        yield c


HOSTILE = [  # (key, value, what the message says)
    (1, {"ratio": 1e39}, "value.ratio: expected float (a number), got 1e+39 (out of range: a float of 4 bytes"),
    (1, {"scale": 10 ** 400}, "value.scale: expected double (a number), got an integer of 1,329 bits (out of range"),
    (1, {"label": "\udcff"}, "value.label: expected char[8] (a string of up to 7 bytes, or bytes of up to 8), "
                             "got '\\udcff' (not UTF-8 text: a lone surrogate U+DCFF at index 0)"),
    (1, {"pairs": [{}, {"name": "\ud800"}]}, "value.pairs[1].name: expected char[6]"),
    (1, {"big": 1 << 20000}, "value.big: expected __s64 (an integer in [-9223372036854775808, 9223372036854775807]), "
                             "got an integer of 20,001 bits (out of range)"),
    (1, {"grid": [[0, 0, 0], [0, nested(100_000)]]}, "value.grid[1][1]: expected __u32 (an integer in [0, 4294967295]), "
                                                     "got [[[...]]]"),
    (1, {10 ** 5000: 1}, "(a field name is not a string: an integer of 16,610 bits)"),
    (10 ** 5000, {}, "key: expected __u32 (an integer in [0, 4294967295]), got an integer of 16,610 bits (out of range)"),
    ("\udcff", {}, "key: expected __u32 (an integer in [0, 4294967295]), got '\\udcff'"),
]


@pytest.mark.parametrize("key, value, message", HOSTILE, ids=[
    "float", "double", "surrogate", "nested-surrogate", "huge-int", "deep-list", "int-field-name", "huge-key", "str-key"])
def test_a_typed_write_that_does_not_fit_changes_nothing(coll: Collection, key: object, value: object,
                                                         message: str) -> None:
    h = coll.maps["vh_hash"]
    h[1] = {"small": 7, "ratio": 0.5, "label": "kept"}
    h[2] = {"small": 8}
    before = contents(h)
    with pytest.raises(BTFValueError) as err:
        h[key] = value  # type: ignore[index]
    assert str(err.value).startswith("map 'vh_hash': ") and message in str(err.value), str(err.value)
    assert len(str(err.value)) < 400
    assert contents(h) == before
    assert h[1].small == 7 and h[1].label == "kept"


def test_a_batch_with_one_bad_value_writes_none(coll: Collection) -> None:
    h = coll.maps["vh_hash"]
    with pytest.raises(BTFValueError, match=r"value.ratio: .* got 1e\+39"):
        h.update_batch([(3, {"small": 1}), (4, {"ratio": 1e39})])
    assert 3 not in h and 4 not in h


def test_per_cpu_values_with_one_bad_slot_write_none() -> None:
    ncpu = num_possible_cpus()
    with Collection(load_spec(bpf_object("maps_typed"))) as c:
        m = c.maps["typed_pcpu_hash"]
        values: list[object] = [{"port": 1}] * ncpu
        m[5] = values
        before = contents(m)
        bad = [*values[:-1], {"port": 1 << 20000}]
        with pytest.raises(BTFValueError, match=r"value.port: expected __u16 .* got an integer of 20,001 bits"):
            m[5] = bad
        assert contents(m) == before


def test_an_untyped_write_that_does_not_fit_is_a_usage_error() -> None:
    spec = MapSpec(name="vh_untyped", type=MapType.HASH, key_size=4, value_size=8, max_entries=4)
    with Map(spec) as m:
        m[1] = 5
        for key, value, message in [
            (1, 1 << 20000, "map 'vh_untyped': cannot encode value an integer of 20,001 bits as '<Q' ("),
            (1, -1, "map 'vh_untyped': cannot encode value -1 as '<Q' ("),  # (struct's words follow)
            (1 << 40, 1, "map 'vh_untyped': cannot encode key 1099511627776 as '<I' ("),
            (1, "x" * 10_000, "map 'vh_untyped': cannot encode value '" + "x" * 50 + "'... as 8 bytes"),
        ]:
            with pytest.raises(UsageError) as err:  # struct.error before
                m[key] = value
            assert str(err.value).startswith(message) and len(str(err.value)) < 200
        assert m[1] == (5).to_bytes(8, sys.byteorder)
    formatted = MapSpec(name="vh_fmt", type=MapType.HASH, key_size=4, value_size=8, max_entries=4, key_format="=I",
                        value_format="=d")
    with Map(formatted) as m:
        with pytest.raises(UsageError, match=r"cannot encode value 'x' as '=d' \(required argument is not a float\)"):
            m[1] = "x"
        assert 1 not in m


def test_a_loaded_skeleton_keeps_its_variables_on_a_bad_write() -> None:
    with bpfkit.open(bpf_object("values_hostile")) as skel:
        skel.load()
        skel.live_f = 0.5
        skel.live_s = "ok"
        for name, value, why in [("live_f", 1e39, "out of range: a float of 4 bytes"),
                                 ("live_u16", 1 << 20000, "got an integer of 20,001 bits (out of range)"),
                                 ("live_s", "\udcff", "lone surrogate U+DCFF")]:
            with pytest.raises(BTFValueError) as err:
                setattr(skel, name, value)
            assert str(err.value).startswith(f"set variable {name!r}: {name}: ") and why in str(err.value)
        assert (skel.live_f, skel.live_u16, skel.live_s) == (0.5, 0, "ok")


@pytest.fixture
def pin_dir() -> Iterator[str]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    path = f"/sys/fs/bpf/bpfkit-values-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_cli_set_writes_non_utf8_bytes_and_refuses_the_rest(pin_dir: str) -> None:
    obj = str(bpf_object("values_hostile"))
    base = [sys.executable, "-m", "bpfkit", "load", obj, pin_dir]
    bad = subprocess.run([*base, "--set", "knob_f=1e39"], capture_output=True, timeout=120, check=False)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr and not os.path.exists(pin_dir)
    assert b"--set 'knob_f=1e39': knob_f: expected const volatile float (a number), got 1e+39" in bad.stderr
    # A byte that is not UTF-8 (a UnicodeEncodeError traceback before) is written as given.
    good = subprocess.run([*base, "--set", b"knob_s=\xff\xfe", "--set", "knob_f=-0.75"], capture_output=True,
                          timeout=120, check=False)
    assert good.returncode == 0, good.stderr.decode(errors="replace")
    spec = load_spec(obj)
    knob_s, knob_f = spec.variables["knob_s"], spec.variables["knob_f"]
    rodata = next(n for n in os.listdir(pin_dir) if n.endswith("rodata"))
    with Map.load_pinned(os.path.join(pin_dir, rodata)) as m:
        raw = m[0]
    assert raw[knob_s.offset:knob_s.offset + 8] == b"\xff\xfe" + bytes(6)
    assert knob_f.codec is not None and knob_f.codec.decode(raw, knob_f.offset) == -0.75
