# SPDX-License-Identifier: Apache-2.0
"""Numeric BTF map fields in both of libbpf's encodings (issue #18 item 2), and prog arrays
with a typed value and ``values`` (item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import bpfkit
from bpfkit._kernel.consts import MapType
from bpfkit.errors import ParseError

from .clang_objects import ULONG, build_c

USE = '\nSEC("xdp") int p(void *c) {{ __u32 k = 0; return bpf_map_lookup_elem(&m, &k) != 0; }}'


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mapfields")


def one_map(fields: str) -> str:
    return ULONG + f'struct {{ {fields} }} m SEC(".maps");' + USE.format()


def test_ulong_fields_parse_like_uint(out_dir):
    # Every numeric field as __ulong(); map_extra past 32 bits is an ENUM64 in BTF.
    src = one_map("__ulong(type, BPF_MAP_TYPE_HASH); __ulong(max_entries, 7); __ulong(map_flags, 1); "
                  "__ulong(key_size, 4); __ulong(value_size, 8); __ulong(numa_node, 0); __ulong(pinning, 0); "
                  "__ulong(map_extra, 0x100000000ULL << 8);")
    m = bpfkit.load_spec(build_c(src, out_dir)).maps["m"]
    assert (m.type, m.max_entries, m.flags, m.key_size, m.value_size, m.map_extra) == \
        (MapType.HASH, 7, 1, 4, 8, 1 << 40)


def test_ulong_map_extra_of_an_arena(out_dir):
    # What libbpf's own arena tests write: a 64-bit address hint in map_extra.
    src = ULONG + """
struct { __uint(type, 33 /* BPF_MAP_TYPE_ARENA, newer than the host headers */); __uint(map_flags, BPF_F_MMAPABLE); __uint(max_entries, 10);
         __ulong(map_extra, (1ull << 44)); } arena SEC(".maps");
SEC("syscall") int p(void *c) { return 0; }
"""
    m = bpfkit.load_spec(build_c(src, out_dir)).maps["arena"]
    assert (m.type, m.max_entries, m.map_extra) == (MapType.ARENA, 10, 1 << 44)


@pytest.mark.parametrize("fields, message", [
    ("__uint(type, BPF_MAP_TYPE_ARRAY); __ulong(max_entries, 0x100000000ULL); __type(key, __u32); __type(value, __u32);",
     r"map 'm': field 'max_entries' is 0x100000000, more than its 32 bits hold"),
    ("__uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); enum { A = 1, B = 2 } map_flags; "
     "__type(key, __u32); __type(value, __u32);",
     r"map 'm': field 'map_flags' is an enum with 2 values; an __ulong\(\) has exactly one"),
    ("__uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); int map_extra; __type(key, __u32); __type(value, __u32);",
     r"map 'm': field 'map_extra' is not an __uint\(\) \(a pointer to an array\) nor an __ulong\(\)"),
])
def test_bad_numeric_fields(out_dir, fields, message):
    with pytest.raises(ParseError, match=message):
        bpfkit.load_spec(build_c(one_map(fields), out_dir))


# ------------------------------------------------------------- prog arrays with a value type
PROG_ARRAY = """
SEC("xdp") int tail(void *c) {{ return 1; }}
struct {{ __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 2); __type(key, __u32); {value}
         __array(values, int (void *)); }} jumps SEC(".maps") = {{ .values = {{ [1] = (void *)&tail }} }};
SEC("xdp") int p(void *c) {{ bpf_tail_call(c, &jumps, 1); return 2; }}
"""


@pytest.mark.parametrize("value", ["__type(value, __u32);", "__uint(value_size, 4);", "__type(value, int);"])
def test_prog_array_with_a_4_byte_value_type_and_values(out_dir, value):
    m = bpfkit.load_spec(build_c(PROG_ARRAY.format(value=value), out_dir)).maps["jumps"]
    assert (m.type, m.key_size, m.value_size, m.contents) == (MapType.PROG_ARRAY, 4, 4, [(1, "tail")])


@pytest.mark.parametrize("value, size", [("__type(value, __u64);", 8), ("__uint(value_size, 2);", 2)])
def test_prog_array_value_size_other_than_4_is_refused(out_dir, value, size):
    with pytest.raises(ParseError, match=rf"map 'jumps': prog-array value size {size} conflicts with 'values', "
                                         r"whose entries are 4-byte fds \(use __type\(value, __u32\) or leave the value out\)"):
        bpfkit.load_spec(build_c(PROG_ARRAY.format(value=value), out_dir))


def test_map_in_map_value_size_other_than_4_is_refused(out_dir):
    src = """
struct inner { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); };
struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64);
         __array(values, struct inner); } outer SEC(".maps");
SEC("xdp") int p(void *c) { __u32 k = 0; return bpf_map_lookup_elem(&outer, &k) != 0; }
"""
    with pytest.raises(ParseError, match="map 'outer': map-in-map inner value size 8 conflicts with 'values'"):
        bpfkit.load_spec(build_c(src, out_dir))
