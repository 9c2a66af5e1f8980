# SPDX-License-Identifier: Apache-2.0
"""Build small BPF objects from C text with clang-19 (or clang) for tests that need an object
bpf/ does not hold: a case clang emits only for some source (static maps, __ulong(), ...).
Tests skip without clang."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

CLANG = shutil.which("clang-19") or shutil.which("clang")
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
PRELUDE = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
LICENSE = '\nchar LICENSE[] SEC("license") = "GPL";\n'


def build_c(source: str, out_dir: Path) -> bytes:
    """Compile PRELUDE + source + a GPL license section; return the object's bytes."""
    if CLANG is None:
        pytest.skip("needs clang to build test objects")
    text = PRELUDE + source + LICENSE
    name = hashlib.sha1(text.encode()).hexdigest()[:12]
    src, obj = out_dir / f"{name}.c", out_dir / f"{name}.o"
    if not obj.exists():
        src.write_text(text)
        proc = subprocess.run(
            [CLANG, "-g", "-O2", "-target", "bpf", f"-I/usr/include/{MULTIARCH}", "-c", str(src), "-o", str(obj)],
            capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr
    return obj.read_bytes()


# Two maps in each map section; program 'p' uses only the second, 'q' only the first.
BTF_MAPS = """
{static}struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); }} first SEC(".maps");
{static}struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); __type(key, __u32); __type(value, __u64); }} second SEC(".maps");
"""
LEGACY_MAPS = """
struct legacy_def {{ unsigned int type, key_size, value_size, max_entries, map_flags; }};
{static}struct legacy_def SEC("maps") first = {{ BPF_MAP_TYPE_ARRAY, 4, 8, 1, 0 }};
{static}struct legacy_def SEC("maps") second = {{ BPF_MAP_TYPE_ARRAY, 4, 8, 2, 0 }};
"""
TWO_MAP_PROGRAMS = """
SEC("xdp") int q(void *c) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&first, &k); if (v) *v += 1; return 2; }
SEC("xdp") int p(void *c) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&second, &k); if (v) *v += 1; return 2; }
"""


def two_maps(section: str, static: bool) -> str:
    """C text of two maps in ``section`` ('.maps' or 'maps') and the programs p and q."""
    maps = BTF_MAPS if section == ".maps" else LEGACY_MAPS
    return maps.format(static="static " if static else "") + TWO_MAP_PROGRAMS

# __ulong() as libbpf 1.4 added it to bpf_helpers.h, defined here whatever the headers say: the
# host's libbpf-dev (1.1) has none, and 1.5's (Debian 13) pastes __COUNTER__ unexpanded, so two
# __ulong fields in one struct redefine one enumerator ("redefinition of enumerator
# '__unique_value__COUNTER__'"). A middle macro expands the counter first; the field's BTF is
# libbpf's: an anonymous enum holding VAL (ENUM64 past 32 bits).
ULONG = """
#undef __ulong
#define ___bpfkit_paste(a, b) a ## b
#define ___bpfkit_ulong(n, name, val) enum { ___bpfkit_paste(__unique_value, n) = val } name
#define __ulong(name, val) ___bpfkit_ulong(__COUNTER__, name, val)
"""
