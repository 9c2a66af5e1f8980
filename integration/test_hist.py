# SPDX-License-Identifier: Apache-2.0
"""bpfkit.hist on maps a real program fills: bpf/hist_syscall_lat.bpf.c times this thread's
getppid() calls on the raw_syscalls tracepoints into four histogram shapes (a slot-keyed array,
a per-thread struct hist, a {tid, slot} key, a linear array); each is read back, drawn, and its
counts agree with the number of calls made. Twice: with the maps typed through BTF (records,
ints), and created without BTF (bytes, which bpfkit.hist reads as integers and __u32 slots)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import bpfkit
from bpfkit import hist

N = 25
GETPPID = 110  # x86_64 __NR_getppid


HIST_MAPS = ("lat_hist", "tid_hist", "key_hist", "lin_hist")


@pytest.fixture(params=["typed", "bytes"])
def filled(bpf_obj: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    spec = bpfkit.load_spec(bpf_obj("hist_syscall_lat"))
    if request.param == "bytes":
        for name in HIST_MAPS:  # maps without BTF: keys and values are bytes
            spec.maps[name].btf_key_type_id = spec.maps[name].btf_value_type_id = 0
    spec.variables["target_tid"].value = threading.get_native_id()
    spec.variables["target_nr"].value = GETPPID
    with bpfkit.Collection(spec) as coll:
        links = coll.attach_all()
        try:
            for _ in range(N):
                os.getppid()
        finally:
            links.close()
        yield coll


def test_slot_keyed_array_drawn(filled: Any) -> None:
    m = filled.maps["lat_hist"]
    (h,) = hist.find_histograms(m, "usecs")
    assert h.kind == "log2" and h.label is None and h.total == N
    text = hist.render_map(m, "usecs")
    assert text == h.render() == hist.log2_hist(m, "usecs").render()
    lines = text.splitlines()
    assert lines[0] == "     usecs               : count     distribution"
    assert lines[1].startswith("         0 -> 1          : ")
    assert all(len(line) == 78 and line.endswith("|") for line in lines[1:])  # 10+4+10+3+8+1+42
    assert "*" * 40 in text  # the fullest bucket fills the bar


def test_struct_hist_per_thread(filled: Any) -> None:
    m = filled.maps["tid_hist"]  # tid -> struct hist { __u32 slots[26]; } (a record, or bytes)
    (h,) = hist.find_histograms(m, "usecs")
    assert h.label == threading.get_native_id() and h.total == N
    assert h.counts == hist.log2_hist(filled.maps["lat_hist"]).counts
    assert hist.per_key(m, "usecs") == [h]
    assert hist.render_map(m, "usecs").startswith(f"\nkey = {threading.get_native_id()}\n     usecs ")


def test_struct_key_with_slot(filled: Any) -> None:
    m = filled.maps["key_hist"]  # {tid, slot} -> count
    first_key = next(iter(m.keys()))
    if isinstance(first_key, bytes):  # without BTF nothing says where the slot is: split by hand
        items = [({"tid": int.from_bytes(k[:4], "little"), "slot": int.from_bytes(k[4:], "little")},
                  int.from_bytes(v, "little")) for k, v in m.items()]
        assert hist.find_histograms(m) == []  # an 8-byte key is no slot index, the name no *hist
        (h,) = hist.per_key(items, "usecs")
    else:
        (h,) = hist.find_histograms(m, "usecs")
        assert hist.per_key(m, "usecs") == [h]
    assert h.label == threading.get_native_id()
    assert h.counts == hist.log2_hist(filled.maps["lat_hist"]).counts


def test_linear_array(filled: Any) -> None:
    m = filled.maps["lin_hist"]
    (h,) = hist.find_histograms(m, "usecs")
    assert h.kind == "linear" and h.total == N
    assert hist.linear_hist(m, "usecs", step=10).buckets[0].high == 9
    assert hist.render_map(m, "usecs").splitlines()[0] == "     usecs         : count     distribution"


def test_render_map_on_a_map_opened_by_id(filled: Any) -> None:
    # What `bpfkit map dump --hist` has: a Map opened by id (or pin), described by the kernel.
    from bpfkit.maps import Map

    for name in HIST_MAPS:
        with Map.from_id(filled.maps[name].id) as m:
            assert hist.render_map(m, "usecs") == hist.render_map(filled.maps[name], "usecs")


def test_cli_map_dump_hist_draws_the_pinned_map(filled: Any, tmp_path: Any) -> None:
    """`bpfkit map dump PINNED --hist --unit usecs` prints what render_map draws."""
    import subprocess
    import sys
    import uuid

    pin = f"/sys/fs/bpf/bpfkit-test-hist-{uuid.uuid4().hex[:8]}"
    m = filled.maps["lat_hist"]
    m.pin(pin)
    try:
        out = subprocess.run([sys.executable, "-m", "bpfkit.cli", "map", "dump", pin, "--hist", "--unit", "usecs"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout == hist.render_map(m, "usecs") + "\n"
        both = subprocess.run([sys.executable, "-m", "bpfkit.cli", "map", "dump", pin, "--hist", "--json"],
                              capture_output=True, text=True, timeout=60)
        assert both.returncode == 2 and "not allowed with argument" in both.stderr
    finally:
        m.unpin()
