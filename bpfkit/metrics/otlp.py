# SPDX-License-Identifier: Apache-2.0
"""Records of ring buffers and perf event arrays as OpenTelemetry log records
(``bpfkit attach --otlp ENDPOINT``; docs/metrics.md). Needs the ``otlp`` extra
(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http).

Each record is decoded through BTF (a struct of the object's BTF, by default ``event``) into
one log record: one attribute per field (nested structs as ``outer.inner``; enums by member
name, ``char[]`` as text, arrays as lists, u64 values above 2**63-1 as decimal text since OTLP
integers are signed 64-bit), plus ``bpf.map`` (and ``bpf.cpu`` for a perf array); its event name
is the struct's, its body ``map: field=value ...``. The SDK batches records
(BatchLogRecordProcessor) and sends them with its OTLP/HTTP (protobuf) exporter; :meth:`close`
flushes what is queued.
"""

from __future__ import annotations

import enum
import socket
import sys
import time
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from ..btf.spec import BTF
from ..btf.types import Struct
from ..btf.values import Record, ValueCodec, value_codec
from ..errors import NotFoundError, UsageError

__all__ = ["OtlpEvents", "EventSink", "logs_endpoint", "signal_endpoint", "otlp_exporter", "event_codec"]

_I64_MAX = (1 << 63) - 1


def signal_endpoint(endpoint: str, signal: str, what: str = "--otlp") -> str:
    """OTLP/HTTP's convention: a base URL (``http://collector:4318``) gets ``/v1/<signal>``
    (``logs``, ``traces``); a URL that already names a path is used as given. ``what`` names
    where the URL came from in the error."""
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"{what} {endpoint!r}: not an http:// or https:// URL (e.g. http://127.0.0.1:4318)")
    rest = endpoint.split("://", 1)[1]
    return endpoint if "/" in rest.rstrip("/") else endpoint.rstrip("/") + f"/v1/{signal}"


def logs_endpoint(endpoint: str) -> str:
    """Where log records go: :func:`signal_endpoint` for ``logs``."""
    return signal_endpoint(endpoint, "logs")


def otlp_exporter(endpoint: str, timeout: float = 10.0) -> LogRecordExporter:
    """The SDK's OTLP/HTTP log exporter for ``endpoint`` (see :func:`logs_endpoint`)."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    return OTLPLogExporter(endpoint=logs_endpoint(endpoint), timeout=timeout)


def event_codec(btf: BTF | None, type_name: str, what: str = "--event-type") -> ValueCodec:
    """The codec of struct ``type_name`` (``event`` or ``struct event``) of ``btf``, or of the
    object's DWARF when BTF lacks it (bpfkit.btf.dwarf.find_struct)."""
    from ..btf.dwarf import find_struct

    name = type_name.removeprefix("struct ").strip()
    if btf is None:
        raise UsageError(f"{what} {name}: the object has no BTF to decode records with")
    try:
        where, found = find_struct(btf, name, what)
    except NotFoundError as exc:
        structs = sorted({t.name for t in btf.types if isinstance(t, Struct) and t.name})[:12]
        raise NotFoundError(f"{exc} (BTF's structs: {', '.join(structs) or 'none'}); a struct used only inside "
                            f"functions is left out of BTF: build with clang -g, or declare a global "
                            f"'struct {name} *unused_{name} __attribute__((unused));'") from None
    return value_codec(where, found.id, name=name)


def _attributes(value: object, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Record):
        for k, v in value.__dict__.items():
            _attributes(v, f"{prefix}.{k}" if prefix else k, out)
        return
    out[prefix] = _attr_value(value)


def _attr_value(value: object) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if value <= _I64_MAX else str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, list):
        items = [_attr_value(v) for v in value]
        return items if all(type(i) is type(items[0]) and not isinstance(i, list) for i in items) else str(items)
    if isinstance(value, (float, str)):
        return value
    return str(value)


class EventSink:
    """One map's records -> log records; called as ``sink(data, cpu)`` by the event readers."""

    def __init__(self, owner: OtlpEvents, map_name: str, codec: ValueCodec | None, percpu: bool) -> None:
        self.owner = owner
        self.map_name = map_name
        self.codec = codec
        self.percpu = percpu
        self.count = 0
        self.lost_count = 0

    def attributes(self, data: bytes | memoryview, cpu: int | None = None) -> dict[str, Any]:
        """The log record's attributes for one record."""
        attrs: dict[str, Any] = {"bpf.map": self.map_name}
        if cpu is not None:
            attrs["bpf.cpu"] = cpu
        codec = self.codec
        if codec is not None and len(data) >= codec.size:
            _attributes(codec.decode(data), "", attrs)
        else:  # no struct, or a record shorter than it: its bytes
            attrs["bpf.record"] = bytes(data).hex()
        return attrs

    def __call__(self, data: Any, cpu: int | None = None) -> None:
        attrs = self.attributes(data, cpu)
        self.count += 1
        body = " ".join(f"{k}={v}" for k, v in attrs.items() if not k.startswith("bpf."))
        self.owner.logger.emit(timestamp=time.time_ns(), body=f"{self.map_name}: {body}", attributes=attrs,
                               event_name=self.codec.name if self.codec is not None else self.map_name)

    def lost(self, cpu: int | None, count: int) -> None:
        """Lost records are said on stderr (the program produced faster than they were read)."""
        self.lost_count += count
        where = f" on cpu {cpu}" if cpu is not None else ""
        sys.stderr.write(f"bpfkit: lost {count} record(s) from {self.map_name}{where}\n")
        sys.stderr.flush()


class OtlpEvents:
    """A LoggerProvider exporting to ``exporter`` (batched unless ``batch=False``), and one
    :class:`EventSink` per map (:meth:`sink`)."""

    def __init__(self, exporter: LogRecordExporter, *, object_name: str = "", batch: bool = True) -> None:
        attrs: dict[str, str] = {"service.name": "bpfkit", "host.name": socket.gethostname()}
        if object_name:
            attrs["bpfkit.object"] = object_name
        self.provider = LoggerProvider(resource=Resource.create(attrs), shutdown_on_exit=False)
        processor = BatchLogRecordProcessor(exporter, schedule_delay_millis=1000) if batch else SimpleLogRecordProcessor(exporter)
        self.provider.add_log_record_processor(processor)
        self.logger = self.provider.get_logger("bpfkit.events")
        self.sinks: list[EventSink] = []

    def sink(self, map_name: str, codec: ValueCodec | None, percpu: bool = False) -> EventSink:
        s = EventSink(self, map_name, codec, percpu)
        self.sinks.append(s)
        return s

    @property
    def count(self) -> int:
        return sum(s.count for s in self.sinks)

    def close(self, timeout_millis: int = 10_000) -> None:
        """Send what is queued, then stop the exporter."""
        self.provider.force_flush(timeout_millis)
        self.provider.shutdown()
