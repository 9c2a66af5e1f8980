# SPDX-License-Identifier: Apache-2.0
"""Uprobe targets without a kernel: symbol -> file offset, library names, ld.so cache parsing.

A small C program is built with gcc into a temporary directory (skipped if gcc is missing); the
offsets bpfkit computes are checked against pyelftools' independent reading of the same file.
The integration tests reuse :func:`build_target` for a binary to put uprobes in.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bpfkit.errors import NotFoundError, ParseError, UsageError
from bpfkit.link import Executable
from bpfkit.link._binary import BinaryImage, ld_cache_entries, parse_ld_cache, resolve_binary

TARGET_C = r"""
#include <stdio.h>
#include <stdlib.h>

/* A USDT-style semaphore: the kernel bumps it while a uprobe with ref_ctr_offset exists. */
unsigned short bpfkit_sema __attribute__((section(".probes"), used)) = 0;

__attribute__((noinline)) int bpfkit_probe_me(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) static int bpfkit_local_fn(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 2;
}

/* Calls bpfkit_probe_me N times per line read from stdin (N = argv[1]), then prints the
   semaphore; with no stdin lines wanted (argv[2] == "once") runs one round and exits. */
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	int once = argc > 2;
	char line[64];
	int sum = 0;

	for (;;) {
		if (!once && !fgets(line, sizeof(line), stdin))
			break;
		for (int i = 0; i < n; i++)
			sum += bpfkit_probe_me(i) + bpfkit_local_fn(i);
		printf("%u %d\n", (unsigned)bpfkit_sema, sum);
		fflush(stdout);
		if (once)
			break;
	}
	return 0;
}
"""


def build_target(directory: Path, name: str = "probe_target", extra: tuple[str, ...] = ()) -> Path:
    """Compile TARGET_C into ``directory/name`` (PIE, with symbols); skips without gcc."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("needs gcc to build a uprobe target")
    src = directory / f"{name}.c"
    src.write_text(TARGET_C)
    out = directory / name
    subprocess.run([gcc, "-O1", "-g0", "-o", str(out), str(src), *extra], check=True)
    return out


def elftools_offsets(path: Path, name: str) -> int:
    """File offset of ``name`` as pyelftools sees it (independent of bpfkit's reader)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        for table in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(table)
            if sec is None:
                continue
            for sym in sec.iter_symbols():
                if sym.name == name and sym["st_value"]:
                    value = sym["st_value"]
                    for seg in elf.iter_segments():
                        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= value < seg["p_vaddr"] + seg["p_memsz"]:
                            return value - seg["p_vaddr"] + seg["p_offset"]
    raise AssertionError(f"{name} not in {path}")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_target(tmp_path_factory.mktemp("uprobe-target"))


def test_function_offsets_match_pyelftools(target: Path) -> None:
    exe = Executable(str(target))
    for name in ("bpfkit_probe_me", "bpfkit_local_fn", "main"):
        assert exe.symbol_offset(name) == elftools_offsets(target, name)
    assert exe.symbol_offset("bpfkit_probe_me", 1) == elftools_offsets(target, "bpfkit_probe_me") + 1
    assert exe.symbols()["bpfkit_probe_me"] == exe.symbol_offset("bpfkit_probe_me")


def test_semaphore_offset_through_data_segment(target: Path) -> None:
    exe = Executable(str(target))
    (sema,) = [s for s in exe.image.symbols if s.name == "bpfkit_sema"]
    assert exe.address_offset(sema.value) == elftools_offsets(target, "bpfkit_sema")


def test_imported_symbol_hint(target: Path) -> None:
    with pytest.raises(NotFoundError) as info:
        Executable(str(target)).symbol_offset("printf")
    text = str(info.value)
    assert "imported" in text and "libc.so.6" in text and "Executable('libc')" in text


def test_missing_symbol_and_not_a_function(target: Path) -> None:
    exe = Executable(str(target))
    with pytest.raises(NotFoundError, match="not found"):
        exe.symbol_offset("no_such_function")
    with pytest.raises(NotFoundError, match="not a function"):
        exe.symbol_offset("bpfkit_sema")
    with pytest.raises(UsageError, match="past the end"):
        exe.symbol_offset("bpfkit_probe_me", 1 << 20)


def test_stripped_binary_says_so(tmp_path: Path) -> None:
    path = build_target(tmp_path, "stripped", ("-s",))
    with pytest.raises(NotFoundError, match="stripped"):
        Executable(str(path)).symbol_offset("bpfkit_probe_me")


def test_exported_symbol_of_stripped_binary_via_dynsym(tmp_path: Path) -> None:
    path = build_target(tmp_path, "dynamic", ("-s", "-rdynamic"))
    exe = Executable(str(path))
    assert exe.symbol_offset("bpfkit_probe_me") == elftools_offsets(path, "bpfkit_probe_me")
    assert all(s.table == ".dynsym" for s in exe.image.symbols)


def test_not_elf_and_missing(tmp_path: Path) -> None:
    text = tmp_path / "script.sh"
    text.write_text("#!/bin/sh\n")
    with pytest.raises(ParseError, match="not an ELF"):
        BinaryImage(str(text))
    with pytest.raises(NotFoundError):
        Executable(str(tmp_path / "nope"))


def test_library_names_resolve_like_bpftrace() -> None:
    libc = resolve_binary("libc")
    assert os.path.basename(libc).startswith("libc.so.") and os.path.isabs(libc)
    assert resolve_binary("libc.so.6") == libc
    with open(libc, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert resolve_binary("true") == os.path.realpath(shutil.which("true") or "")
    with pytest.raises(NotFoundError, match="ld.so cache"):
        resolve_binary("libbpfkit_no_such_library")


def test_libc_getppid_is_a_function() -> None:
    exe = Executable("libc")
    off = exe.symbol_offset("getppid")
    assert off == elftools_offsets(Path(exe.path), "getppid")
    assert "ld-linux" in " ".join(exe.image.needed) or exe.image.needed


def _cache_blob(entries: list[tuple[str, str, int]], old: bool) -> bytes:
    """An ld.so.cache image in glibc's new format, optionally behind the old one."""
    strings = b""
    offsets = []
    for name, path, _ in entries:
        offsets.append((len(strings), len(strings) + len(name) + 1))
        strings += name.encode() + b"\0" + path.encode() + b"\0"
    header = 48
    table = 24 * len(entries)
    new = b"glibc-ld.so.cache1.1" + struct.pack("<II B3x I 3I", len(entries), len(strings), 2, 0, 0, 0, 0)
    for (name, path, flags), (k, v) in zip(entries, offsets):
        new += struct.pack("<iII I Q", flags, header + table + k, header + table + v, 0, 0)
    new += strings
    if not old:
        return new
    prefix = b"ld.so-1.7.0\0" + struct.pack("<I", 0)
    pad = (-len(prefix)) % 8
    return prefix + b"\0" * pad + new


@pytest.mark.parametrize("old", [False, True])
def test_parse_ld_cache(old: bool) -> None:
    entries = [("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", 0x303), ("libfoo.so.1", "/opt/libfoo.so.1", 0x303)]
    assert parse_ld_cache(_cache_blob(entries, old)) == entries
    with pytest.raises(ParseError):
        parse_ld_cache(b"garbage" * 10)


def test_system_ld_cache_has_libc() -> None:
    if not os.path.exists("/etc/ld.so.cache"):
        pytest.skip("no /etc/ld.so.cache")
    assert any(name.startswith("libc.so.") for name, _ in ld_cache_entries())


def _default_and_compat(libc: str) -> list[tuple[str, str, str]]:
    """(name, default version, a hidden version) of libc functions with both, from readelf."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs binutils' readelf as the independent reading of symbol versions")
    out = subprocess.run([readelf, "-W", "--dyn-syms", libc], check=True, capture_output=True, text=True).stdout
    default: dict[str, str] = {}
    hidden: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 8 or parts[6] == "UND" or "@" not in parts[7]:
            continue
        name, _, ver = parts[7].partition("@")
        if ver.startswith("@"):
            default[name] = ver[1:]
        else:
            hidden[name] = ver
    return [(n, default[n], hidden[n]) for n in sorted(default.keys() & hidden.keys())]


def test_unversioned_name_binds_to_the_default_version() -> None:
    """One rule for symbol versions, checked on the host's libc: a plain name is the default
    (``@@``) version, as the dynamic linker binds it; ``name@VERSION`` reaches a compat one."""
    libc = resolve_binary("libc")
    image = BinaryImage(libc)
    pairs = _default_and_compat(libc)
    if not pairs:
        pytest.skip(f"{libc} has no function with both a default and a compat version")
    for name, default, hidden in pairs:
        sym = image.resolve(name)
        assert sym is not None and sym.version == default and not sym.hidden, (name, sym)
        compat = image.resolve(f"{name}@{hidden}")
        assert compat is not None and compat.hidden and compat.version == hidden
        fn = image.functions.get(name)
        assert fn is None or fn is sym
    memcpy = image.resolve("memcpy")
    if memcpy is not None and ("memcpy", "GLIBC_2.14", "GLIBC_2.2.5") in pairs:  # glibc on x86-64
        assert memcpy.full_name == "memcpy@@GLIBC_2.14" and memcpy.type == 10  # STT_GNU_IFUNC
        exe = Executable(libc)
        with pytest.raises(NotFoundError, match=r"'memcpy@@GLIBC_2.14' .* indirect function .* memcpy@GLIBC_2.2.5"):
            exe.symbol_offset("memcpy")
        compat = image.resolve("memcpy@GLIBC_2.2.5")
        assert compat is not None and exe.symbol_offset("memcpy@GLIBC_2.2.5") == image.file_offset(compat.value)
    # A function whose compat entry comes first in .dynsym still binds to the default one.
    funcs = [(n, d) for n, d, _ in pairs if image.resolve(n) is not None and image.resolve(n).type == 2]
    for name, default in funcs:
        assert Executable(libc).symbol_offset(name) == image.file_offset(image.resolve(f"{name}@@{default}").value)
