# SPDX-License-Identifier: Apache-2.0
"""Readers of what BPF programs send: perf event arrays, BPF ring buffers, sideband records.

* :class:`RingBuffer` reads BPF_MAP_TYPE_RINGBUF maps (several in one poll);
  :class:`UserRingBuffer` writes BPF_MAP_TYPE_USER_RINGBUF.
* :class:`PerfBuffer` reads a BPF_MAP_TYPE_PERF_EVENT_ARRAY (one ring per CPU), including
  overwritable rings; :class:`PerfRing` walks any perf ring.
* :class:`ProcessTracker` follows processes (comm, exec, mappings) from perf sideband records
  merged with a /proc snapshot, and turns (pid, address) into (binary, offset, symbol).
* :mod:`~bpfkit.events.records` holds record types and :class:`RecordFormat` for batch decoding.

Every reader offers the same faces: ``poll(timeout)``/``consume()`` with a per-record callback
(the record is a zero-copy memoryview valid during the call), ``read(timeout)`` iteration,
``read_batch(format)``/``consume_batch(cb, format)`` for whole-buffer drains decoded in one
step (numpy structured arrays when numpy is installed), and asyncio (``poll_async``,
``async for``). See docs/events.md.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "RingBuffer": "bpfkit.events.ringbuf",
    "UserRingBuffer": "bpfkit.events.ringbuf",
    "Reservation": "bpfkit.events.ringbuf",
    "RingBufferFullError": "bpfkit.events.ringbuf",
    "PerfBuffer": "bpfkit.events.perf",
    "PerfRing": "bpfkit.events.perf",
    "ProcessTracker": "bpfkit.events.process",
    "Process": "bpfkit.events.process",
    "Mapping": "bpfkit.events.process",
    "Resolution": "bpfkit.events.process",
    "RecordFormat": "bpfkit.events.records",
    "Decoder": "bpfkit.events.records",
    "LostRecordsWarning": "bpfkit.events._common",
}

# Every lazy name is public: the readers, what they hand out (Reservation, Process, Mapping,
# Resolution), their errors and warnings, and the batch-decoding formats.
__all__ = [
    "Decoder",
    "LostRecordsWarning",
    "Mapping",
    "PerfBuffer",
    "PerfRing",
    "Process",
    "ProcessTracker",
    "RecordFormat",
    "Reservation",
    "Resolution",
    "RingBuffer",
    "RingBufferFullError",
    "UserRingBuffer",
]


__getattr__ = lazy_getattr("bpfkit.events", _LAZY, globals())
