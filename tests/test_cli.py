# SPDX-License-Identifier: Apache-2.0
"""The `bpfkit` command without the kernel: parsing, printing, hints, lazy start-up."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit.cli import hints
from bpfkit.cli.main import EXIT_FAILED, EXIT_PERMISSION, EXIT_UNSUPPORTED, EXIT_USAGE, build_parser, exit_code_for
from bpfkit.cli.output import RecordPrinter, hexdump, print_json, print_table, record_format
from bpfkit.errors import KernelPermissionError, NotFoundError, NotSupportedError, ParseError, UsageError

REPO = Path(__file__).resolve().parent.parent


def test_help_imports_neither_the_kernel_layer_nor_cffi() -> None:
    code = ("import sys; from bpfkit.cli.main import build_parser; build_parser().format_help(); "
            "print([m for m in sys.modules if m.startswith(('cffi', 'bpfkit._kernel', 'bpfkit.collection', "
            "'bpfkit.link', 'bpfkit.events', 'elftools'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_every_command_is_in_the_help() -> None:
    text = build_parser().format_help()
    for name in ("attach", "inspect", "prog", "link", "map", "gc", "events"):
        assert name in text


def test_attach_arguments() -> None:
    args = build_parser().parse_args(["attach", "x.o", "t:syscalls:sys_enter_openat", "u:libc:fopen", "--program", "p",
                                      "--pid", "7", "--cookie", "0x10", "--mode", "ioctl", "--events", "events",
                                      "--events", "other", "--json", "--trace-pipe"])
    assert args.spec == ["t:syscalls:sys_enter_openat", "u:libc:fopen"]
    assert (args.program, args.pid, args.cookie, args.mode) == (["p"], 7, 16, "ioctl")
    assert args.events == ["events", "other"] and args.json and args.trace_pipe and args.event_type == "event"
    bare = build_parser().parse_args(["attach", "x.o"])
    assert bare.spec == [] and bare.pin is None and bare.events == []


@pytest.mark.parametrize("argv", [["prog", "list", "--json"], ["prog", "show", "12"], ["map", "dump", "/sys/fs/bpf/m"],
                                  ["link", "pin", "3", "/sys/fs/bpf/l"], ["link", "detach", "3"],
                                  ["events", "/sys/fs/bpf/ev", "--count", "2"]])
def test_system_commands_parse(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args._run is not None


def test_exit_codes() -> None:
    assert exit_code_for(NotSupportedError("kprobes")) == EXIT_UNSUPPORTED == 3
    assert exit_code_for(KernelPermissionError("BPF_PROG_LOAD", 1, "CAP_BPF")) == EXIT_PERMISSION == 4
    assert exit_code_for(ParseError("bad probe spec")) == exit_code_for(UsageError("x")) == EXIT_USAGE == 2
    assert exit_code_for(NotFoundError("symbol")) == EXIT_FAILED == 1


def test_table_aligns_columns() -> None:
    out = io.StringIO()
    print_table([{"id": 1, "name": "a", "x": None}, {"id": 1234, "name": "bbbb", "x": [1, 2]}],
                [("id", "ID"), ("name", "NAME"), ("x", "X")], out)
    assert out.getvalue().splitlines() == ["ID    NAME  X", "1     a     -", "1234  bbbb  1,2"]


def test_json_is_one_compact_line() -> None:
    out = io.StringIO()
    print_json({"a": b"abc\0\0", "b": [1, None]}, out)
    assert out.getvalue() == '{"a":"abc","b":[1,null]}\n'


def test_record_printer_hex_json_and_decoded() -> None:
    from bpfkit.events import RecordFormat

    out = io.StringIO()
    RecordPrinter("events", out=out)(b"\x01\x02\x03\x04\x05", cpu=3)
    assert out.getvalue() == "events cpu 3 [5 bytes]: 01020304 05\n"
    fmt = RecordFormat("<I8s", ["pid", "comm"])
    out = io.StringIO()
    printer = RecordPrinter("events", fmt, out=out)
    printer(b"\x07\x00\x00\x00bash\0\0\0\0")
    printer(b"\x07\x00")  # shorter than the struct: hex
    assert out.getvalue().splitlines() == ["events: pid=7 comm=bash", "events [2 bytes]: 0700"]
    out = io.StringIO()
    RecordPrinter("events", fmt, json_lines=True, out=out)(b"\x07\x00\x00\x00bash\0\0\0\0")
    RecordPrinter("events", None, json_lines=True, out=out)(b"\xff")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {"map": "events", "cpu": None, "size": 12, "fields": {"pid": 7, "comm": "bash"}}
    assert second == {"map": "events", "cpu": None, "size": 1, "hex": "ff"}
    assert printer.count == 2


def test_non_text_char_arrays_print_as_hex() -> None:
    from bpfkit.events import RecordFormat

    out = io.StringIO()
    RecordPrinter("m", RecordFormat("<4s", ["raw"]), out=out)(b"\xff\xfe\x00\x01")
    assert out.getvalue() == "m: raw=fffe0001\n"
    assert hexdump(b"") == ""


def test_record_format_of_the_example(bpf_obj) -> None:
    import bpfkit

    spec = bpfkit.load_spec(bpf_obj("cli_opensnoop"))
    fmt = record_format(spec.btf, "struct event")
    assert fmt.names == ["ts_ns", "pid", "uid", "flags", "source", "comm", "filename"] and fmt.size == 168
    assert record_format(spec.btf, "no_such") is None and record_format(None, "event") is None


def test_did_you_mean_from_kallsyms(tmp_path: Path) -> None:
    kallsyms = tmp_path / "kallsyms"
    kallsyms.write_text("ffffffff81000000 T do_sys_openat2\nffffffff81000010 t do_sys_open\n"
                        "ffffffff81000020 D do_sys_opendata\nffffffff81000030 T vfs_read\n")
    names = hints.kernel_functions(str(kallsyms))
    assert names == {"do_sys_openat2", "do_sys_open", "vfs_read"}
    assert hints.close_matches("do_sys_opn", names)[0] == "do_sys_open"
    assert hints.close_matches("zzz", names) == []
    assert hints.binary_symbol_hint("fopne", "/lib/libc.so.6", ["fopen", "fclose"]) == \
        "symbol fopne not found in /lib/libc.so.6 (did you mean fopen?)"
    assert hints.binary_symbol_hint("qqqq", "/x", ["fopen"]) == "symbol qqqq not found in /x"


def test_did_you_mean_scales_to_a_kallsyms_sized_pool() -> None:
    pool = [f"sym_{i:06d}_fn" for i in range(200_000)] + ["do_sys_openat2"]
    assert hints.close_matches("do_sys_open", pool) == ["do_sys_openat2"]
