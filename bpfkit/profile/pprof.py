# SPDX-License-Identifier: Apache-2.0
"""pprof: the gzipped protobuf ``perftools.profiles.Profile`` that ``go tool pprof``, Parca,
Pyroscope and Grafana read (github.com/google/pprof, proto/profile.proto).

The message types are built at run time from a descriptor (google.protobuf.descriptor_pb2):
no protoc and no generated module. Field numbers are profile.proto's. Each distinct frame name
is one Function and one Location (no addresses: the names are what the profile carries, as
in a folded file); a sample lists its locations leaf first, as pprof wants. Every string
goes through bpfkit._visible: protobuf strings must be valid UTF-8 (a lone surrogate is
refused), and ``pprof -top`` prints names to a terminal.
"""

from __future__ import annotations

import gzip
import time
from functools import lru_cache
from typing import Any

from .._visible import visible
from ..errors import NotSupportedError
from .model import Profile

__all__ = ["to_pprof", "from_pprof", "profile_message_class"]

# (message, [(field, number, type, repeated)]) of profile.proto (proto3: repeated scalars packed).
_I64, _U64, _BOOL, _MSG = "int64", "uint64", "bool", "msg"
_MESSAGES: list[tuple[str, list[tuple[str, int, str, bool]]]] = [
    ("ValueType", [("type", 1, _I64, False), ("unit", 2, _I64, False)]),
    ("Label", [("key", 1, _I64, False), ("str", 2, _I64, False), ("num", 3, _I64, False), ("num_unit", 4, _I64, False)]),
    ("Sample", [("location_id", 1, _U64, True), ("value", 2, _I64, True), ("label", 3, "Label", True)]),
    ("Mapping", [("id", 1, _U64, False), ("memory_start", 2, _U64, False), ("memory_limit", 3, _U64, False),
                 ("file_offset", 4, _U64, False), ("filename", 5, _I64, False), ("build_id", 6, _I64, False),
                 ("has_functions", 7, _BOOL, False), ("has_filenames", 8, _BOOL, False),
                 ("has_line_numbers", 9, _BOOL, False), ("has_inline_frames", 10, _BOOL, False)]),
    ("Line", [("function_id", 1, _U64, False), ("line", 2, _I64, False), ("column", 3, _I64, False)]),
    ("Location", [("id", 1, _U64, False), ("mapping_id", 2, _U64, False), ("address", 3, _U64, False),
                  ("line", 4, "Line", True), ("is_folded", 5, _BOOL, False)]),
    ("Function", [("id", 1, _U64, False), ("name", 2, _I64, False), ("system_name", 3, _I64, False),
                  ("filename", 4, _I64, False), ("start_line", 5, _I64, False)]),
    ("Profile", [("sample_type", 1, "ValueType", True), ("sample", 2, "Sample", True),
                 ("mapping", 3, "Mapping", True), ("location", 4, "Location", True),
                 ("function", 5, "Function", True), ("string_table", 6, "string", True),
                 ("drop_frames", 7, _I64, False), ("keep_frames", 8, _I64, False), ("time_nanos", 9, _I64, False),
                 ("duration_nanos", 10, _I64, False), ("period_type", 11, "ValueType", False),
                 ("period", 12, _I64, False), ("comment", 13, _I64, True), ("default_sample_type", 14, _I64, False)]),
]


@lru_cache(maxsize=1)
def profile_message_class() -> Any:
    """The ``perftools.profiles.Profile`` message class (needs the ``protobuf`` package:
    ``pip install bpfkit[pprof]``)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise NotSupportedError("pprof output", "the protobuf package is not installed "
                                "(pip install 'bpfkit[pprof]' or pip install protobuf)") from None
    fdp = descriptor_pb2.FileDescriptorProto(name="bpfkit/profile.proto", package="perftools.profiles",
                                             syntax="proto3")
    types = {"int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
             "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
             "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
             "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING}
    for name, fields in _MESSAGES:
        msg = fdp.message_type.add(name=name)
        for fname, number, ftype, repeated in fields:
            f = msg.field.add(name=fname, number=number,
                              label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if repeated
                              else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
            if ftype in types:
                f.type = types[ftype]
            else:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = f".perftools.profiles.{ftype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


def to_pprof(profile: Profile) -> bytes:
    """``profile`` as a gzipped pprof protobuf."""
    cls = profile_message_class()
    msg = cls()
    strings: dict[str, int] = {"": 0}

    def s(text: str) -> int:
        return strings.setdefault(visible(text), len(strings))

    msg.sample_type.add(type=s(profile.sample_type), unit=s(profile.unit))
    if profile.period:
        msg.period_type.type = s(profile.period_type)
        msg.period_type.unit = s(profile.period_unit)
        msg.period = profile.period
    msg.time_nanos = profile.time_ns or time.time_ns()
    msg.duration_nanos = profile.duration_ns
    locations: dict[str, int] = {}
    for stack, value in profile.stacks.items():
        ids = []
        for name in reversed(stack):  # leaf first
            loc = locations.get(name)
            if loc is None:
                loc = locations[name] = len(locations) + 1
                msg.function.add(id=loc, name=s(name), system_name=s(name))
                msg.location.add(id=loc).line.add(function_id=loc)
            ids.append(loc)
        msg.sample.add(location_id=ids, value=[value])
    msg.string_table.extend(strings)  # dicts keep insertion order: index i is the i-th string
    return gzip.compress(msg.SerializeToString(), mtime=0)


def from_pprof(data: bytes) -> Profile:
    """Read a pprof file back (gzipped or not) into a :class:`Profile` of function names
    (the first value of each sample; a location's innermost line first, as pprof inlines)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    msg = profile_message_class().FromString(data)
    st = list(msg.string_table)
    funcs = {f.id: st[f.name] for f in msg.function}
    locs = {loc.id: [funcs.get(line.function_id, "?") for line in loc.line] for loc in msg.location}
    st_type = msg.sample_type[0] if msg.sample_type else None
    prof = Profile(sample_type=st[st_type.type] if st_type else "", unit=st[st_type.unit] if st_type else "",
                   period=msg.period, duration_ns=msg.duration_nanos, time_ns=msg.time_nanos)
    if msg.period_type.type or msg.period_type.unit:
        prof.period_type, prof.period_unit = st[msg.period_type.type], st[msg.period_type.unit]
    for sample in msg.sample:
        names = [n for lid in reversed(sample.location_id) for n in reversed(locs.get(lid, ["?"]))]
        prof.add(names, sample.value[0] if sample.value else 0)
    return prof
