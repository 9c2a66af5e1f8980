# SPDX-License-Identifier: Apache-2.0
"""`bpfkit list` without the kernel: how probes are spelled (each spelling parses as the probe
spec `bpfkit attach` takes), pattern errors, and the binary kinds, which read only files (a
binary's ELF symbol tables and USDT notes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit.cli.main import build_parser
from bpfkit.errors import NotFoundError, ParseError
from bpfkit.probelist import ListedProbe, list_probes
from bpfkit.probespec import parse_probe

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("probe", "text"), [
    (ListedProbe("tracepoint", "syscalls", "sys_enter_openat"), "tracepoint:syscalls:sys_enter_openat"),
    (ListedProbe("kprobe", "", "vfs_read"), "kprobe:vfs_read"),
    (ListedProbe("kprobe", "ext4", "ext4_file_open"), "kprobe:ext4:ext4_file_open"),
    (ListedProbe("rawtracepoint", "", "sched_switch"), "rawtracepoint:sched_switch"),
    (ListedProbe("fentry", "", "vfs_read"), "fentry:vfs_read"),
    (ListedProbe("fexit", "nf_conntrack", "nf_ct_delete"), "fexit:nf_conntrack:nf_ct_delete"),
    (ListedProbe("uprobe", "/usr/bin/bash", "readline"), "uprobe:/usr/bin/bash:readline"),
    (ListedProbe("usdt", "/usr/bin/python3", "function__entry", "python"), "usdt:/usr/bin/python3:python:function__entry"),
])
def test_spelling_is_bpftraces_and_parses(probe: ListedProbe, text: str) -> None:
    assert str(probe) == text
    assert probe.to_dict()["probe"] == text
    assert parse_probe(text).kind == probe.kind  # what `bpfkit attach` takes


def test_json_fields() -> None:
    assert ListedProbe("usdt", "/b", "n", "p").to_dict() == {"probe": "usdt:/b:p:n", "kind": "usdt", "target": "/b",
                                                            "name": "n", "provider": "p"}
    assert "provider" not in ListedProbe("kprobe", "", "f").to_dict()


def test_pattern_errors_name_the_fix() -> None:
    with pytest.raises(ParseError, match=r"no probe kind matches 'nope' \(kinds: tracepoint, .*aliases as in bpftrace"):
        list_probes("nope:x")
    with pytest.raises(ParseError, match=r"uprobe probes are listed for one binary: give its path or library name, "
                                         r"e\.g\. uprobe:/bin/bash:\* or uprobe:libc:\*"):
        list_probes("uprobe:*")
    with pytest.raises(NotFoundError, match=r"binary 'no-such-binary-xyz' not found in \$PATH"):
        list_probes("uprobe:no-such-binary-xyz:*")


def test_uprobe_functions_of_a_binary() -> None:
    bash = shutil.which("bash")
    assert bash
    found = list_probes("u:bash:read*").probes  # the alias, a $PATH name and a glob
    names = {p.name for p in found}
    assert "readline" in names and all(n.startswith("read") for n in names)
    assert {p.kind for p in found} == {"uprobe"} and {p.target for p in found} == {str(Path(bash).resolve())}
    every = list_probes(f"uprobe:{bash}:*").probes
    assert len(every) > len(found) and [p.name for p in every] == sorted(p.name for p in every)
    assert {p.kind for p in list_probes(f"uretprobe:{bash}:readline").probes} == {"uretprobe"}


def test_usdt_probes_of_a_binary() -> None:
    from bpfkit.usdt.notes import read_probes

    candidates = [Path(p).resolve() for p in (sys.executable, "/usr/bin/python3") if Path(p).exists()]
    with_notes = [p for p in candidates if read_probes(str(p))]
    if not with_notes:
        pytest.skip(f"no Python with USDT notes among {candidates} (built without --with-dtrace)")
    python = with_notes[0]
    found = list_probes(f"usdt:{python}:*").probes
    assert all(str(p).startswith(f"usdt:{python}:") for p in found)
    assert len({(p.provider, p.name) for p in found}) == len(found)  # one line per probe, not per site
    one = found[0]
    assert list_probes(f"usdt:{python}:{one.provider}:{one.name}").probes == [one]


def test_cli_arguments_and_lazy_help() -> None:
    args = build_parser().parse_args(["list", "t:syscalls:*open*", "--json"])
    assert (args.pattern, args.json) == ("t:syscalls:*open*", True)
    assert build_parser().parse_args(["list"]).pattern == ""


def test_cli_json_for_a_binary() -> None:
    bash = shutil.which("bash")
    out = subprocess.run([sys.executable, "-m", "bpfkit.cli", "list", "--json", f"uprobe:{bash}:readline"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    assert json.loads(out.stdout) == [{"probe": f"uprobe:{Path(str(bash)).resolve()}:readline", "kind": "uprobe",
                                       "target": str(Path(str(bash)).resolve()), "name": "readline"}]


def test_btf_names_of_kind_lazy_and_decoded_agree(bpf_obj: object) -> None:
    # fentry/fexit and raw tracepoints are listed from BTF type headers without decoding types.
    import bpfkit
    from bpfkit.btf.spec import BTF
    from bpfkit.btf.types import Kind

    raw = bpfkit.load_spec(bpf_obj("hist_syscall_lat")).btf.to_bytes()  # type: ignore[operator]
    for kind in (Kind.STRUCT, Kind.FUNC, Kind.TYPEDEF):
        lazy, decoded = BTF.from_bytes(raw, lazy=True).names_of_kind(kind), BTF.from_bytes(raw).names_of_kind(kind)
        assert lazy == decoded
    assert {"hist", "hist_key"} <= set(BTF.from_bytes(raw, lazy=True).names_of_kind(Kind.STRUCT))
    assert {"on_enter", "on_exit"} <= set(BTF.from_bytes(raw, lazy=True).names_of_kind(Kind.FUNC))


def test_tracepoints_whose_group_starts_with_a_digit() -> None:
    # The 9p module's tracepoints (tracepoint:9p:9p_client_req) are listed on kernels that load
    # it (the Debian 5.10 VM): their spelling must parse, and their event directory be found.
    from bpfkit._kernel import tracefs

    assert parse_probe("kprobe:9p:v9fs_fid_xattr_set").module == "9p"  # and modules named so
    assert parse_probe("fentry:9pnet:p9_client_create").module == "9pnet"
    spec = parse_probe("tracepoint:9p:9p_client_req")
    assert (spec.category, spec.function) == ("9p", "9p_client_req")
    assert tracefs.validate_name("group", "9p", static=True) == "9p"
    with pytest.raises(ParseError, match=r"must match \[a-zA-Z_\]"):
        tracefs.validate_name("group", "9p")  # a kprobe/uprobe event group must not (is_good_name)
    with pytest.raises(ParseError, match="must match"):
        tracefs.validate_name("group", "../x", static=True)


def test_tracepoint_groups_with_a_dash_and_raw_tracepoints_starting_with_a_digit() -> None:
    # Found by `bpfkit list --json` on the 7.2 VM: TRACE_SYSTEM spi-mem (drivers/spi) and the
    # 9pnet module's raw tracepoints (rawtracepoint:9pnet:9p_client_req) must parse.
    from bpfkit._kernel import tracefs

    spec = parse_probe("tracepoint:spi-mem:spi_mem_start_op")
    assert (spec.category, spec.function) == ("spi-mem", "spi_mem_start_op")
    assert tracefs.validate_name("group", "spi-mem", static=True) == "spi-mem"
    with pytest.raises(ParseError, match="must match"):
        tracefs.validate_name("group", "spi-mem")  # a kprobe/uprobe event group must not
    raw = parse_probe("rawtracepoint:9pnet:9p_client_req")
    assert (raw.module, raw.function) == ("9pnet", "9p_client_req")
    with pytest.raises(ParseError, match="invalid tracepoint name"):
        parse_probe("rawtracepoint:a/b")
