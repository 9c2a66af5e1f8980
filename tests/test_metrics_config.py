# SPDX-License-Identifier: Apache-2.0
"""Metrics configs (bpfkit.metrics.config): the YAML shape, and every mistake reported with the
file and the line it is on; the label decoders on known inputs (kallsyms and cgroup ids read
from this machine)."""

from __future__ import annotations

import os
import socket
import struct

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (the metrics extra)")

from bpfkit.errors import NotFoundError, UsageError  # noqa: E402
from bpfkit.metrics.config import load_config, parse_config  # noqa: E402
from bpfkit.metrics.decoders import make_decoder  # noqa: E402

GOOD = """\
prefix: myapp
only_listed: true
maps:
  calls:
    name: myapp_calls
    help: Syscalls by process
    type: counter
    labels:
      - field: kind
        name: call
        decoders:
          - name: static_map
            static_map: {1: getppid, 2: getpgid}
  totals:
    values:
      - field: events
        type: counter
  pgid_hist:
    histogram:
      bucket_type: exp2
      bucket_multiplier: 0.5
"""


def test_good_config_parses() -> None:
    c = parse_config(GOOD, "m.yaml")
    assert c.prefix == "myapp" and c.only_listed
    calls = c.maps["calls"]
    assert (calls.name, calls.type, calls.line) == ("myapp_calls", "counter", 4)
    assert calls.labels is not None and calls.labels[0].name == "call"
    assert calls.labels[0].decoders == [("static_map", {"1": "getppid", "2": "getpgid"})]
    assert c.maps["totals"].values is not None and c.maps["totals"].values[0].type == "counter"
    h = c.maps["pgid_hist"].histogram
    assert h is not None and (h.bucket_type, h.bucket_multiplier) == ("exp2", 0.5)
    assert parse_config("", "empty.yaml").maps == {}


@pytest.mark.parametrize(("text", "message"), [
    ("maps:\n  calls:\n    nmae: x\n",
     "m.yaml:3: maps.calls: unknown key 'nmae' (known: name, help, type, labels, values, histogram)"),
    ("maps:\n  calls:\n    type: count\n",
     "m.yaml:3: maps.calls.type: 'count' is not one of counter, gauge"),
    ("maps:\n  calls:\n    labels:\n      - field: kind\n        decoders:\n          - name: ksyms\n",
     "m.yaml:6: maps.calls.labels[0].decoders[0]: unknown decoder 'ksyms' (known: ksym, syscall, cgroup, ipv4, ipv6, errno, "
     "static_map, string)"),
    ("maps:\n  calls:\n    labels:\n      - name: x\n",
     "m.yaml:4: maps.calls.labels[0]: needs field: (the key field the label comes from)"),
    ("maps:\n  calls:\n    labels:\n      - field: kind\n        decoders:\n          - name: static_map\n",
     "m.yaml:6: maps.calls.labels[0].decoders[0]: static_map needs a table (static_map: {1: read, 2: write})"),
    ("maps:\n  calls:\n    name: 9bad\n", "m.yaml:3: maps.calls.name: '9bad' is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"),
    ("maps:\n  calls:\n    labels:\n      - field: kind\n        name: bad-name\n",
     "m.yaml:5: maps.calls.labels[0].name: 'bad-name' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
    ("maps:\n  calls:\n    labels: kind\n", "m.yaml:3: maps.calls.labels: expected a list (- item lines), got str 'kind'"),
    ("maps:\n  h:\n    histogram:\n      step: 0\n", "m.yaml:4: maps.h.histogram.step: must be 1 or more, not 0"),
    ("maps:\n  h:\n    histogram:\n      bucket_min: x\n",
     "m.yaml:4: maps.h.histogram.bucket_min: expected an integer, got str 'x'"),
    ("maps:\n  h:\n    histogram:\n      bucket_min: 2\n      bucket_max: 1\n",
     "m.yaml:5: maps.h.histogram.bucket_max: must be in bucket_min (2) .. 4095, not 1"),
    ("maps:\n  h:\n    histogram:\n      bucket_max: 4096\n", "m.yaml:4: maps.h.histogram.bucket_max: must be in bucket_min (0) .. 4095"),
    ("maps:\n  h:\n    histogram:\n      bucket_max: 2.5\n", "m.yaml:4: maps.h.histogram.bucket_max: expected an integer, got float"),
    ("maps:\n  calls: {}\n  calls: {}\n", "m.yaml:3: 'calls' given twice (first on line 2)"),
    ("maps:\n  calls:\n    help: [unclosed\n", "m.yaml:4: not valid YAML:"),
    ("prefix: ok\nonly_listed: maybe\n", "m.yaml:2: only_listed: expected true or false, got str 'maybe'"),
    ("- a\n- b\n", "m.yaml:1: expected a mapping (key: value lines), got a list"),
    ("mpas: {}\n", "m.yaml:1: unknown key 'mpas' (known: prefix, only_listed, maps)"),
])
def test_bad_configs_name_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_config(text, "m.yaml")
    assert str(err.value).startswith(message), str(err.value)


def test_load_config_file(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "m.yaml")
    with open(path, "w") as f:
        f.write(GOOD)
    assert load_config(path).maps["calls"].name == "myapp_calls"
    with pytest.raises(NotFoundError, match="metrics config .*nope.yaml: no such file"):
        load_config(os.path.join(tmp_path, "nope.yaml"))


def test_decoders() -> None:
    assert make_decoder("syscall")(110) == ("getppid" if os.uname().machine == "x86_64" else "110")
    assert make_decoder("errno")(-2) == "ENOENT" and make_decoder("errno")(13) == "EACCES"
    be = struct.unpack("=I", socket.inet_aton("10.1.2.3"))[0]  # a __be32 as the program stored it
    assert make_decoder("ipv4")(be) == "10.1.2.3"
    assert make_decoder("ipv4")(bytes([192, 168, 0, 1])) == "192.168.0.1"
    assert make_decoder("ipv6")(socket.inet_pton(socket.AF_INET6, "fe80::1")) == "fe80::1"
    assert make_decoder("string")(b"bash\0junk") == "bash"
    assert make_decoder("static_map", {"1": "read", "2": "write"})(2) == "write"
    assert make_decoder("static_map", {"1": "read"})(3) == 3  # unknown: the value as it is


def test_ksym_decoder() -> None:
    with open("/proc/kallsyms") as f:
        rows = [line.split() for line in f]
    text = [(int(a, 16), n) for a, t, n, *_ in rows if t in "tT"]
    if not text or text[0][0] == 0:
        pytest.skip("kptr_restrict hides kernel addresses from this process")
    addr, name = next((a, n) for a, n in text if n == "schedule")
    assert make_decoder("ksym")(addr) == "schedule"
    assert make_decoder("ksym")(addr + 1) == "schedule"  # inside the function


def test_cgroup_decoder() -> None:
    with open("/proc/mounts") as f:
        mount = next((p[1] for p in (line.split() for line in f) if p[2] == "cgroup2"), None)
    if mount is None:
        pytest.skip("no cgroup2 mount")
    with open("/proc/self/cgroup") as f:
        mine = next(line.strip().split(":", 2)[2] for line in f if line.startswith("0::"))
    cgid = os.stat(mount + mine).st_ino  # what bpf_get_current_cgroup_id() returns for this process
    assert make_decoder("cgroup")(cgid) == mine


# ------------------------------------------------------------------ hostile files (issue 35)
_TABLE = "maps:\n  calls:\n    labels:\n      - field: kind\n        decoders:\n          - name: static_map\n            static_map:\n"
# Nine anchors, each a list of nine aliases of the one before: 9**9 values once expanded, 703 bytes.
ALIAS_BOMB = _TABLE + "              0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"              {i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))


@pytest.mark.parametrize(("text", "message"), [
    (ALIAS_BOMB, "m.yaml:12: more than 20000 values once aliases are expanded (bpfkit's limit for a metrics config)"),
    ("maps:\n  [a, b]: {}\n", "m.yaml:2: a key must be text or a number, not a list"),
    ("maps:\n  calls:\n    {a: 1}: x\n", "m.yaml:3: a key must be text or a number, not a mapping"),
    ("maps:\n  calls:\n    help: " + "[" * 5000 + "]" * 5000 + "\n",
     "m.yaml:3: nested more than 64 levels deep (bpfkit's limit for a metrics config)"),
    ("maps:\n" + "".join(" " * i + f"k{i}:\n" for i in range(2, 4000)),
     "m.yaml:64: nested more than 64 levels deep"),
    ("maps:\n  calls:\n    help: a\0b\n",
     "m.yaml:3: not valid YAML: character U+0000 is not allowed (no control characters but tab and line breaks)"),
    ("maps:\n  a: &a {help: *a}\n", "m.yaml:2: alias *a is inside the node it names (a recursive structure"),
    ("maps:\n  h:\n    histogram:\n      base: " + "1" * 5000 + "\n", "m.yaml:4: a number of 5000 characters (bpfkit takes up to 100)"),
    ("maps:\n  h:\n    histogram:\n      base: !!float abc\n", "m.yaml:4: 'abc' is not a valid float"),
    ("maps:\n  calls:\n    help: !!timestamp 2001-13-45\n", "m.yaml:3: '2001-13-45' is not a valid timestamp"),
    (_TABLE + "              1: [a, b]\n",
     "m.yaml:8: maps.calls.labels[0].decoders[0].static_map[1]: expected the label's text, got a list"),
    (_TABLE + "              1: read\n              '1': write\n", "m.yaml:9: '1' given twice (first on line 8)"),
    ("maps:\n  b:\n    <<: 5\n", "m.yaml:3: << (a merge key) takes a mapping or a list of mappings, not a scalar"),
    ("maps:\n  calls:\n    type: " + "x" * 1000 + "\n", "m.yaml:3: maps.calls.type: 'xxxxxxxx"),
])
def test_hostile_yaml_is_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_config(text, "m.yaml")
    assert str(err.value).startswith(message), str(err.value)
    assert len(str(err.value)) < 300  # no value from the file echoed whole


def test_alias_bomb_never_expands() -> None:
    """Refused while composing, from the sizes of the nodes it is made of (nothing expanded)."""
    import tracemalloc

    assert len(ALIAS_BOMB) < 710
    tracemalloc.start()
    try:
        with pytest.raises(UsageError):
            parse_config(ALIAS_BOMB, "m.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak


def test_merge_keys() -> None:
    """YAML 1.1 merge keys, as PyYAML takes them: a mapping's own keys win, then the mappings
    merged in the order given."""
    c = parse_config("maps:\n  a: &counted {type: counter, help: shared}\n  g: &gauge {type: gauge, help: g}\n"
                     "  b:\n    <<: *counted\n    help: mine\n  c:\n    <<: [*counted, *gauge]\n", "m.yaml")
    assert (c.maps["b"].type, c.maps["b"].help) == ("counter", "mine")
    assert (c.maps["c"].type, c.maps["c"].help) == ("counter", "shared")
    assert c.maps["b"].line == 4


def test_histogram_bucket_max_and_exponent_multipliers() -> None:
    """bucket_max (ebpf_exporter's: slot bucket_max + 1 holds the sum), and a multiplier written
    with an exponent (a float in YAML 1.2 and Go's yaml; text in PyYAML's YAML 1.1 unless it has a
    point and a signed exponent)."""
    h = parse_config("maps:\n  h:\n    histogram:\n      bucket_min: 1\n      bucket_max: 26\n"
                     "      bucket_multiplier: 1e-6\n", "m.yaml").maps["h"].histogram
    assert h is not None and (h.bucket_min, h.bucket_max, h.bucket_max_line, h.bucket_multiplier) == (1, 26, 5, 1e-06)
    for text in ("2.5e3", "25E2", ".25e4", "+2_500e0"):
        h = parse_config(f"maps:\n  h:\n    histogram: {{bucket_multiplier: {text}}}\n", "m.yaml").maps["h"].histogram
        assert h is not None and h.bucket_max is None and h.bucket_multiplier == 2500.0, text


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "-1", "0", "1.0e+999"])
def test_bucket_multiplier_must_be_finite_and_positive(value: str) -> None:
    with pytest.raises(UsageError, match=r"m.yaml:4: maps.h.histogram.bucket_multiplier: must be a finite number above 0"):
        parse_config(f"maps:\n  h:\n    histogram:\n      bucket_multiplier: {value}\n", "m.yaml")


def test_config_file_size_limit(tmp_path: os.PathLike[str]) -> None:
    from bpfkit.metrics.yamlconf import CONFIG_LIMIT

    path = os.path.join(tmp_path, "big.yaml")
    with open(path, "w") as f:
        f.write("#" * CONFIG_LIMIT + "\nmaps: {}\n")
    with pytest.raises(UsageError, match=rf"metrics config {path} is {CONFIG_LIMIT + 11} bytes, over bpfkit's size limit for "
                                         r"it \(256 KiB|262144 bytes\)"):
        load_config(path)


def test_log2_bounds_past_float_range() -> None:
    """2**1024 is past float: slot 1,023 of a log2 histogram is bounded by inf, not an
    OverflowError (every scrape answered 500 before)."""
    from bpfkit.metrics.plan import HistPlan

    h = HistPlan("h", "", "slot_key")
    assert h.upper(1022) == 2.0 ** 1023 and h.upper(1023) == h.upper(5000) == float("inf")
    assert h.lower(1023) == 2.0 ** 1023 and h.lower(1024) == float("inf")
    h.multiplier = 1e300
    assert h.upper(10) == 2047e300 and h.upper(100) == float("inf")
