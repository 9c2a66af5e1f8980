# SPDX-License-Identifier: Apache-2.0
"""The perf and ring buffer readers share one delivery of a validated run or batch
(events/_common.py: deliver_run, deliver_batch) and one start of a pass over a ring
(published); the BTF kinds with a size, a list and a kind_flag share one maker. Pinned so that
a second copy does not grow back in either reader."""

from __future__ import annotations

import inspect
import re

import pytest

from bpfkit.btf import Enum, Enum64, Struct, Union
from bpfkit.events import _common, perf, ringbuf

# What delivering a run or a batch is made of.
_DELIVERY = ("frombuffer", "iter_unpack", "starmap", "length_hint")


@pytest.mark.parametrize("module", [perf, ringbuf], ids=lambda m: m.__name__)
def test_readers_deliver_through_common(module):
    source = inspect.getsource(module)
    assert [word for word in _DELIVERY if word in source] == []
    assert len(re.findall(r"published\((?:pq|ctl), ", source)) == 1  # the record iterator (the consuming loop inlines it)
    assert module.deliver_run is _common.deliver_run and module.deliver_batch is _common.deliver_batch
    assert module.published is _common.published


def test_readers_share_consume_and_poll():
    for reader in (perf.PerfBuffer, ringbuf.RingBuffer):
        assert "consume" not in vars(reader) and "poll" not in vars(reader)
        assert reader.consume is _common.PolledReader.consume and reader.poll is _common.PolledReader.poll


def test_sized_kinds_share_one_maker():
    makers = {cls._maker.__func__ for cls in (Struct, Union, Enum, Enum64)}
    assert len(makers) == 1
    e = Enum(1, "e", 4, [], signed=True)
    assert e.signed and e.kind_flag
    e.signed = False
    assert not e.kind_flag
