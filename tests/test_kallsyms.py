# SPDX-License-Identifier: Apache-2.0
"""/proc/kallsyms has one reader, bpfkit._kernel.kallsyms: its parser and lookups on small files
of the same format (streamed in pieces, bounded), the callers that go through it, and a check
that no other module of bpfkit/ names the file."""

from __future__ import annotations

import ast
import os
import tracemalloc
from pathlib import Path

import pytest

from bpfkit._kernel import kallsyms, kinfo, tracefs
from bpfkit.errors import KernelError, KernelPermissionError, NotFoundError, UsageError
from conftest import package_dir

PACKAGE = package_dir()
OWNER = PACKAGE / "_kernel" / "kallsyms.py"

# vmlinux's lines sorted, then a module's and a BPF program's (as the kernel lists them); a
# static name at two addresses (dup), a data symbol, aliases at one address (T and t), ftrace's
# padding symbols (__pfx_).
SAMPLE = (
    "ffffffff81000000 T _stext\n"
    "ffffffff81000100 t __pfx_do_sys_open\n"
    "ffffffff81000110 t do_sys_open\n"
    "ffffffff81000200 T do_sys_openat2\n"
    "ffffffff81000300 t __do_sys_getppid\n"
    "ffffffff81000300 T __x64_sys_getppid\n"
    "ffffffff81000400 t dup\n"
    "ffffffff81000500 t dup\n"
    "ffffffff81000600 T __x64_sys_bpf\n"
    "ffffffff82000000 D jiffies\n"
    "ffffffffc0001000 t ext4_read\t[ext4]\n"
    "ffffffffc0001100 T dup_in_mod\t[ext4]\n"
    "ffffffffc0002000 t bpf_prog_6deef7357e7b4530_sd_fw_ingress\t[bpf]\n"
)


@pytest.fixture
def sample(tmp_path: Path) -> str:
    path = tmp_path / "kallsyms"
    path.write_text(SAMPLE)
    return str(path)


# ------------------------------------------------------------------------------ one reader
def _names_the_file(path: Path) -> list[int]:
    """Lines of ``path`` with a string constant that is the path /proc/kallsyms (or its last
    part, to be joined): messages that mention it in a sentence are not readers."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
            and (node.value.strip() if isinstance(node.value, str) else node.value.strip().decode(errors="replace"))
            in ("/proc/kallsyms", "kallsyms")]


def test_one_module_names_proc_kallsyms() -> None:
    """Every reader of /proc/kallsyms goes through bpfkit._kernel.kallsyms (issue 36: six
    modules read it each in its own way)."""
    others = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
              if p != OWNER and (lines := _names_the_file(p))}
    assert others == {}
    assert _names_the_file(OWNER)


# ------------------------------------------------------------------------------ the parser
def test_symbols_parse_every_line(sample: str) -> None:
    syms = list(kallsyms.symbols(sample))
    assert len(syms) == SAMPLE.count("\n")
    assert syms[0] == (0xFFFFFFFF81000000, "T", "_stext", "")
    assert syms[9] == (0xFFFFFFFF82000000, "D", "jiffies", "")
    assert syms[10] == (0xFFFFFFFFC0001000, "t", "ext4_read", "ext4")
    assert syms[-1][2:] == ("bpf_prog_6deef7357e7b4530_sd_fw_ingress", "bpf")
    assert kallsyms.parse_line("") is None and kallsyms.parse_line("zz T x") is None
    assert kallsyms.parse_line("00000000 T f") == (0, "T", "f", "")  # 32-bit width


def test_symbols_stream_across_read_boundaries(sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 7-byte buffer, shorter than every line: it grows to hold one, and the lines come out
    whole and the same."""
    whole = list(kallsyms.symbols(sample))
    monkeypatch.setattr(kallsyms, "_READ_SIZE", 7)
    assert list(kallsyms.symbols(sample)) == whole
    assert kallsyms.addresses(sample)["do_sys_open"] == 0xFFFFFFFF81000110
    assert kallsyms.has_symbol("ext4:ext4_read", sample)
    assert kallsyms.read(sample) == SAMPLE.encode()


def test_a_file_without_a_last_newline(tmp_path: Path) -> None:
    path = tmp_path / "kallsyms"
    path.write_text(SAMPLE.rstrip("\n"))
    assert list(kallsyms.symbols(str(path)))[-1][2] == "bpf_prog_6deef7357e7b4530_sd_fw_ingress"
    assert kallsyms.has_symbol("bpf:bpf_prog_6deef7357e7b4530_sd_fw_ingress", str(path))


def test_reads_are_bounded(sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kallsyms, "LIMIT", 64)
    for read in (kallsyms.read, lambda p: list(kallsyms.symbols(p)), kallsyms.addresses, kallsyms.function_names,
                 kallsyms.KernelSymbols.load, lambda p: kallsyms.has_symbol("nothing", p)):
        with pytest.raises(UsageError, match=r"kernel symbols .* is over bpfkit's size limit for it \(0 MiB\)"):
            read(sample)


def test_streaming_holds_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4 MiB file read in 64 KiB pieces is parsed holding about one piece (its bytes, its
    text, its lines), never the whole file."""
    monkeypatch.setattr(kallsyms, "_READ_SIZE", 64 << 10)
    path = tmp_path / "kallsyms"
    line = b"ffffffff81000000 t some_kernel_function_name_of_a_usual_length\n"
    with open(path, "wb") as f:
        f.write(line * ((4 << 20) // len(line)))
    tracemalloc.start()
    try:
        count = sum(1 for _ in kallsyms.symbols(str(path)))
        names = kallsyms.function_names(str(path))
        found = kallsyms.has_symbol("not_there", str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == (4 << 20) // len(line) and len(names) == 1 and not found
    assert peak < 1 << 20, peak


# ------------------------------------------------------------------------------ lookups
def test_addresses(sample: str) -> None:
    table = kallsyms.addresses(sample)
    assert table["_stext"] == 0xFFFFFFFF81000000
    assert table["dup"] == -1  # two addresses: ambiguous for a __ksym
    assert table["ext4_read"] == 0xFFFFFFFFC0001000 and table["jiffies"] == 0xFFFFFFFF82000000
    assert len(table) == 12


def test_has_symbol(sample: str) -> None:
    assert kallsyms.has_symbol("do_sys_open", sample)
    assert kallsyms.has_symbol("jiffies", sample)  # any type
    assert kallsyms.has_symbol("ext4_read", sample) and kallsyms.has_symbol("ext4:ext4_read", sample)
    assert not kallsyms.has_symbol("xfs:ext4_read", sample)
    assert not kallsyms.has_symbol("ext4:do_sys_open", sample)  # vmlinux's, not the module's
    assert not kallsyms.has_symbol("do_sys", sample) and not kallsyms.has_symbol("sys_open", sample)
    assert not kallsyms.has_symbol("T", sample)  # the type letter is not a name
    assert not kallsyms.has_symbol("dup_in", sample)


def test_function_names(sample: str) -> None:
    assert kallsyms.function_names(sample) == {
        "_stext", "__pfx_do_sys_open", "do_sys_open", "do_sys_openat2", "__do_sys_getppid", "__x64_sys_getppid",
        "dup", "__x64_sys_bpf", "ext4_read", "dup_in_mod", "bpf_prog_6deef7357e7b4530_sd_fw_ingress"}
    assert kallsyms.function_names(sample, ("D", "W")) == {"jiffies"}
    assert kallsyms.function_names(sample, exclude=("__pfx_", "dup")) == kallsyms.function_names(sample) - {
        "__pfx_do_sys_open", "dup", "dup_in_mod"}


def test_kernel_symbols_from_a_file(sample: str) -> None:
    ksyms = kallsyms.KernelSymbols.load(sample)
    assert len(ksyms) == SAMPLE.count("\n") and ksyms.source == sample
    assert ksyms.lookup(0xFFFFFFFF81000000 - 1) is None
    assert ksyms.lookup(0xFFFFFFFF81000113) == ("do_sys_open", 3, "")
    assert ksyms.lookup(0xFFFFFFFF81000301) == ("__x64_sys_getppid", 1, "")  # the global alias
    assert ksyms.lookup(0xFFFFFFFF82000010) == ("__x64_sys_bpf", 0xFFFFFFFF82000010 - 0xFFFFFFFF81000600, "")
    assert ksyms.lookup(0xFFFFFFFFC0001004) == ("ext4_read", 4, "ext4")
    assert ksyms.name(0xFFFFFFFFC0002000) == "bpf_prog_6deef7357e7b4530_sd_fw_ingress"
    assert ksyms.address("do_sys_openat2") == 0xFFFFFFFF81000200 and ksyms.address("jiffies") is None
    assert ksyms.modules == ["", "ext4", "bpf"]


def test_errors_of_each_reader(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    with pytest.raises(NotFoundError, match=f"^kernel symbols: {missing} does not exist$"):
        kallsyms.KernelSymbols.load(missing)
    with pytest.raises(KernelError, match=f"^read {missing}: ENOENT"):
        kallsyms.addresses(missing)
    for call in (lambda: list(kallsyms.symbols(missing)), lambda: kallsyms.function_names(missing),
                 lambda: kallsyms.has_symbol("x", missing)):
        with pytest.raises(FileNotFoundError):  # the callers decide: no names, "unknown", ...
            call()


def test_all_zero_addresses_are_hidden(tmp_path: Path) -> None:
    """kptr_restrict: every address reads 0. The symbolizer's table refuses it; the names
    stay usable; the ksym metrics decoder shows addresses as hex."""
    path = tmp_path / "kallsyms"
    path.write_text("".join(f"0000000000000000 {line[17:]}\n" for line in SAMPLE.splitlines()))
    with pytest.raises(KernelPermissionError, match=r"^read .*kallsyms: EPERM .*every address reads as 0"):
        kallsyms.KernelSymbols.load(str(path))
    assert kallsyms.has_symbol("do_sys_open", str(path))
    assert set(kallsyms.addresses(str(path)).values()) == {0}


def test_ksym_decoder_when_addresses_are_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("yaml", reason="needs PyYAML (the metrics extra)")
    from bpfkit.metrics.decoders import make_decoder

    hidden = tmp_path / "hidden"
    hidden.write_text("0000000000000000 T _stext\n0000000000000000 t foo\n")
    shown = tmp_path / "shown"
    shown.write_text(SAMPLE)
    for path, want in ((hidden, "0xffffffff81000113"), (shown, "do_sys_open")):
        monkeypatch.setattr(kallsyms.KernelSymbols, "load", classmethod(lambda cls, p=str(path): cls(Path(p).read_bytes(), p)))
        decode = make_decoder("ksym")
        assert decode(0xFFFFFFFF81000113) == want and decode(0xFFFFFFFF81000113) == want
        assert decode(1) == "0x1" and decode("text") == "text"


def test_callers_on_this_kernel() -> None:
    """tracefs, kinfo, the multi-kprobe and did-you-mean lists read /proc/kallsyms through it."""
    from bpfkit.cli import hints

    assert tracefs.kernel_symbol_exists("schedule") is True
    assert tracefs.kernel_symbol_exists("no_such_symbol_in_any_kernel") is False
    names = hints.kernel_functions()
    assert "schedule" in names and len(names) > 10_000  # (BPF programs come and go meanwhile)
    wrapper = kinfo.has_syscall_wrapper()
    assert wrapper == kinfo.has_syscall_wrapper(kinfo.read_kallsyms())
    if os.uname().machine == "x86_64":
        assert wrapper  # 4.17+
