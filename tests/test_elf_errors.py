# SPDX-License-Identifier: Apache-2.0
"""Malformed objects give bpfkit errors that name the problem.

Most cases are small C programs compiled here with clang (skipped without it), the rest are
real objects with a byte patched: truncated files, wrong machine, bad relocations.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
import sysconfig
from pathlib import Path

import pytest

import bpfkit
from bpfkit.elf.reader import ElfFile
from bpfkit.errors import ParseError

CLANG = shutil.which("clang-19") or shutil.which("clang")
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
PRELUDE = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
LICENSE = '\nchar LICENSE[] SEC("license") = "GPL";\n'


@pytest.fixture(scope="module")
def compile_c(tmp_path_factory):
    if CLANG is None:
        pytest.skip("needs clang to build test objects")
    out_dir = tmp_path_factory.mktemp("objs")

    def build(source: str) -> bytes:
        text = PRELUDE + source + LICENSE
        name = hashlib.sha1(text.encode()).hexdigest()[:12]
        src, obj = out_dir / f"{name}.c", out_dir / f"{name}.o"
        src.write_text(text)
        proc = subprocess.run(
            [CLANG, "-g", "-O2", "-target", "bpf", f"-I/usr/include/{MULTIARCH}", "-c", str(src), "-o", str(obj)],
            capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr
        return obj.read_bytes()

    return build


MAP = 'struct {{ {fields} }} m SEC(".maps");\nSEC("xdp") int p(void *c) {{ __u32 k = 0; return bpf_map_lookup_elem(&m, &k) != 0; }}'
ARRAY = "__uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); "


@pytest.mark.parametrize(
    "fields, message",
    [
        (ARRAY + "__type(key, __u32); __type(value, __u64); __uint(bogus, 3);", "map 'm': unknown field 'bogus'"),
        (ARRAY + "__type(key, __u32); __uint(key_size, 8); __type(value, __u64);", "key_size 8 contradicts its key type's size 4"),
        ("__uint(max_entries, 1); __type(key, __u32); __type(value, __u64);", "map 'm': no 'type'"),
        ("__uint(type, 999); __uint(max_entries, 1);", "map 'm': unknown map type 999"),
        (ARRAY + "__type(key, __u32); __type(value, __u64); __uint(pinning, 7);", "unknown pinning value 7"),
        ("__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32);",
         "needs an inner map"),
        ("__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __type(key, __u32); __array(values, int (void *));",
         "'values' initialisers need a prog array or map-in-map"),
        (ARRAY + "__type(key, __u32); int value;", "field 'value' is not a __type()"),
        ("int type; __uint(max_entries, 1);", "field 'type' is not an __uint()"),
    ],
)
def test_bad_btf_map_definitions(compile_c, fields, message):
    data = compile_c(MAP.format(fields=fields))
    with pytest.raises(ParseError, match=message):
        bpfkit.load_spec(data)


def test_bad_legacy_map_section(compile_c):
    src = """
struct def { unsigned int t, k, v, m, f, extra; };
struct def SEC("maps") m = { BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0, 77 };
SEC("xdp") int p(void *c) { __u32 k = 0; return bpf_map_lookup_elem(&m, &k) != 0; }
"""
    with pytest.raises(ParseError, match="map 'm': its 24-byte definition has non-zero fields past the 20 bytes"):
        bpfkit.load_spec(compile_c(src))


def test_static_program_is_refused(compile_c):
    src = 'SEC("xdp") static int hidden(void *c) { return 2; }\nSEC("xdp") int shown(void *c) { return hidden(c); }'
    with pytest.raises(ParseError, match="program 'hidden' in section 'xdp' is static"):
        bpfkit.load_spec(compile_c(src))


def test_kconfig_externs_become_a_data_map(compile_c):
    # Parsed since CO-RE/extern support (bpfkit.spec.externs); tests/test_core_externs.py has the rest.
    src = 'extern int LINUX_KERNEL_VERSION __kconfig;\nSEC("xdp") int p(void *c) { return LINUX_KERNEL_VERSION; }'
    spec = bpfkit.load_spec(compile_c(src))
    assert spec.externs["LINUX_KERNEL_VERSION"].kind.value == "kconfig"
    assert spec.maps[".kconfig"].value_size == 4
    assert [r.map for r in spec.programs["p"].references] == [".kconfig"]


def test_extern_functions_without_ksym_are_refused(compile_c):
    src = 'extern int helper_elsewhere(void);\nSEC("xdp") int p(void *c) { return helper_elsewhere(); }'
    with pytest.raises(ParseError, match="'helper_elsewhere' is neither __kconfig nor __ksym"):
        bpfkit.load_spec(compile_c(src))


def test_unknown_section_parses_but_has_no_type(compile_c):
    spec = bpfkit.load_spec(compile_c('SEC("made_up/thing") int p(void *c) { return 0; }'))
    assert int(spec.programs["p"].type) == 0 and spec.programs["p"].section == "made_up/thing"


def test_maps_without_btf(compile_c, tmp_path):
    data = compile_c(MAP.format(fields=ARRAY + "__type(key, __u32); __type(value, __u64);"))
    # Rename .BTF so the object has none: '.maps' then cannot be read.
    patched = data.replace(b".BTF\0", b".XTF\0", 1)
    with pytest.raises(ParseError, match="needs BTF"):
        bpfkit.load_spec(patched)


# --------------------------------------------------------------------------- byte-patched
def _ehdr(data: bytes):
    return struct.unpack_from("<16sHHIQQQIHHHHHH", data, 0)


def test_truncated(bpf_obj):
    data = bpf_obj("minimal").read_bytes()
    with pytest.raises(ParseError, match="truncated ELF header"):
        bpfkit.load_spec(data[:40])
    with pytest.raises(ParseError, match="truncated ELF"):
        bpfkit.load_spec(data[: len(data) - 100])
    with pytest.raises(ParseError, match="not an ELF file"):
        bpfkit.load_spec(b"hello world" * 10)
    with pytest.raises(ParseError, match="not an ELF file"):
        bpfkit.load_spec(b"")


def test_wrong_machine_class_and_order(bpf_obj):
    data = bytearray(bpf_obj("minimal").read_bytes())
    x86 = bytearray(data)
    struct.pack_into("<H", x86, 18, 62)
    with pytest.raises(ParseError, match="machine is 62, not EM_BPF"):
        bpfkit.load_spec(bytes(x86))
    c32 = bytearray(data)
    c32[4] = 1
    with pytest.raises(ParseError, match="not ELFCLASS64"):
        bpfkit.load_spec(bytes(c32))
    be = bytearray(data)
    be[5] = 2
    with pytest.raises(ParseError, match="big-endian"):
        bpfkit.load_spec(bytes(be))
    exe = bytearray(data)
    struct.pack_into("<H", exe, 16, 2)
    with pytest.raises(ParseError, match="not ET_REL"):
        bpfkit.load_spec(bytes(exe))


def _rel_section(data: bytes, name: str):
    elf = ElfFile(data)
    return elf.by_name[name]


def test_bad_relocation_symbol(bpf_obj):
    data = bytearray(bpf_obj("minimal").read_bytes())
    rel = _rel_section(bytes(data), ".reltracepoint/syscalls/sys_enter_getppid")
    offset, info = struct.unpack_from("<QQ", data, rel.offset)
    struct.pack_into("<QQ", data, rel.offset, offset, (9999 << 32) | (info & 0xFFFFFFFF))
    with pytest.raises(ParseError, match="names symbol 9999, out of range"):
        bpfkit.load_spec(bytes(data))


def test_relocation_on_wrong_instruction(bpf_obj):
    data = bytearray(bpf_obj("minimal").read_bytes())
    rel = _rel_section(bytes(data), ".reltracepoint/syscalls/sys_enter_getppid")
    offset, info = struct.unpack_from("<QQ", data, rel.offset)
    struct.pack_into("<QQ", data, rel.offset, 0, info)  # instruction 0 is a mov
    with pytest.raises(ParseError, match="applies to opcode 0xb7, not a call or ld_imm64"):
        bpfkit.load_spec(bytes(data))
    struct.pack_into("<QQ", data, rel.offset, 3, info)
    with pytest.raises(ParseError, match="is not at an instruction"):
        bpfkit.load_spec(bytes(data))


def test_relocation_to_a_non_map(bpf_obj):
    data = bytearray(bpf_obj("minimal").read_bytes())
    elf = ElfFile(bytes(data))
    rel = elf.by_name[".reltracepoint/syscalls/sys_enter_getppid"]
    license_sym = next(s for s in elf.symbols if s.name == "LICENSE")
    for i in range(rel.size // 16):
        offset, info = struct.unpack_from("<QQ", data, rel.offset + 16 * i)
        struct.pack_into("<QQ", data, rel.offset + 16 * i, offset, (license_sym.index << 32) | (info & 0xFFFFFFFF))
    with pytest.raises(ParseError, match="refers to 'LICENSE' in section 'license', which is neither a map"):
        bpfkit.load_spec(bytes(data))


def test_missing_file(tmp_path):
    from bpfkit.errors import NotFoundError

    with pytest.raises(NotFoundError, match="no such file"):
        bpfkit.load_spec(tmp_path / "nope.o")
