# SPDX-License-Identifier: Apache-2.0
"""Numbers are checked by the argument parser (bpfkit.cli.argtypes): a value the kernel cannot
take is a usage error naming the range, exit 2, never an OverflowError from cffi."""

from __future__ import annotations

import pytest

from bpfkit.cli import main as cli


def usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("argv, message", [
    (["attach", "--cookie", "-5", "o"], "argument --cookie: -5 is out of range: a u64 must be in 0..18446744073709551615"),
    (["attach", "--cookie", str(1 << 64), "o"], f"argument --cookie: {1 << 64} is out of range"),
    (["attach", "--cookie", "zz", "o"], "argument --cookie: 'zz' is not an integer"),
    (["attach", "--pid", "0", "o"], "argument --pid: 0 is out of range: a pid must be in 1..2147483647"),
    (["prog", "show", str(1 << 40)], "a program id must be in 1..4294967295"),
    (["map", "show", "0"], "argument ID|PATH: 0 is out of range: a map id must be in 1..4294967295"),
    (["link", "pin", "99999999999", "/sys/fs/bpf/x"], "a link id must be in 1..4294967295"),
    (["events", "/p", "--count", "-1"], "argument --count: -1 is out of range: a count must be in 0..4294967295"),
    (["events", "/p", "--duration", "inf"], "argument --duration: inf is out of range: seconds must be in 0..1000000000"),
    (["user-event", "delete", "e", "--timeout", "nan"], "argument --timeout: nan is out of range"),
])
def test_out_of_range(capsys, argv: list[str], message: str) -> None:
    assert message in usage_error(capsys, argv)


def test_in_range() -> None:
    args = cli.build_parser().parse_args(["attach", "--cookie", "0xffffffffffffffff", "--pid", "1", "o"])
    assert args.cookie == (1 << 64) - 1 and args.pid == 1
    assert cli.build_parser().parse_args(["prog", "show", "4294967295"]).target == 4294967295
    assert cli.build_parser().parse_args(["prog", "show", "/sys/fs/bpf/p"]).target == "/sys/fs/bpf/p"


@pytest.mark.parametrize("argv, expected", [
    (["attach", "o.bpf.o", "-p", "prog", "kprobe:f"], {"object": "o.bpf.o", "program": ["prog"], "spec": ["kprobe:f"]}),
    (["attach", "o.bpf.o", "kprobe:f", "--cookie", "3", "kprobe:g"],
     {"object": "o.bpf.o", "cookie": 3, "spec": ["kprobe:f", "kprobe:g"]}),
    (["load", "o", "--maps-dir", "/m", "/d", "-p", "a", "-p", "b"],
     {"object": "o", "pin_dir": "/d", "maps_dir": "/m", "program": ["a", "b"]}),
    (["inspect", "o", "--json"], {"object": "o", "json": True}),
    (["prog", "show", "7", "--json", "-v"], {"target": 7, "json": True, "verbose": True}),
    (["link", "pin", "3", "/sys/fs/bpf/l", "-v"], {"target": 3, "path": "/sys/fs/bpf/l", "verbose": True}),
    (["events", "/sys/fs/bpf/e", "--count", "2"], {"pinned": "/sys/fs/bpf/e", "count": 2}),
    (["features", "perf_link", "--json", "kprobe_multi"], {"names": ["perf_link", "kprobe_multi"], "json": True}),
    (["usdt", "list", "libc", "-v"], {"binary": "libc", "verbose": True}),
])
def test_options_anywhere(argv: list[str], expected: dict) -> None:
    args = cli.build_parser().parse_args(argv)
    assert {k: getattr(args, k) for k in expected} == expected


def test_a_missing_object_is_the_only_thing_reported(capsys) -> None:
    assert usage_error(capsys, ["attach"]) == "bpfkit attach: error: the following arguments are required: OBJ"
