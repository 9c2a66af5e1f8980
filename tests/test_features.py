# SPDX-License-Identifier: Apache-2.0
"""bpfkit.features without a kernel: the registry, caching, require(), the CLI's output
shapes (probes faked), the hand-made BTF blobs, and docs/features.md staying in sync."""

from __future__ import annotations

import io
import json
import re
import struct
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bpfkit import features
from bpfkit.features import probes
from bpfkit._kernel.consts import MapType, ProgType
from bpfkit.btf.types import Enum, Enum64, EnumValue, Func, FuncProto, Linkage, Member, Param, Struct
from bpfkit.errors import NotSupportedError, UsageError

REPO = Path(__file__).resolve().parent.parent

# The names other code uses in @pytest.mark.feature(...) and features.require(...).
REQUIRED = {
    "bpf_syscall", "bpf_link", "perf_link", "bpf_cookie", "kprobe_pmu", "uprobe_pmu", "uprobe_ref_ctr_pmu",
    "kprobe_events", "uprobe_events", "kprobe_multi", "uprobe_multi", "ringbuf", "perf_event_array", "btf",
    "btf_func", "btf_func_global", "btf_datasec", "btf_qmark_datasec", "btf_float", "btf_decl_tag", "btf_type_tag", "btf_enum64",
    "mmapable_maps", "raw_tracepoint_link", "log_true_size", "tracing_programs",
}


def test_every_required_name_and_every_type_is_probed() -> None:
    names = features.names()
    assert len(names) == len(set(names))
    assert REQUIRED <= set(names)
    for pt in ProgType:
        if pt != ProgType.UNSPEC:
            assert f"prog_type_{pt.kernel_name}" in names
    for mt in MapType:
        if mt != MapType.UNSPEC:
            assert f"map_type_{mt.kernel_name}" in names


def test_every_feature_has_a_group_version_and_description() -> None:
    for name in features.names():
        info = features.describe(name)
        assert info.group in features.groups()
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", info.min_version), (name, info.min_version)
        assert info.what and info.how


def test_known_minimum_versions() -> None:
    want = {"perf_link": "5.15", "bpf_cookie": "5.15", "uprobe_multi": "6.6", "kprobe_multi": "5.18",
            "ringbuf": "5.8", "uprobe_ref_ctr_pmu": "4.20", "kprobe_pmu": "4.17", "log_true_size": "6.4",
            "mmapable_maps": "5.5", "btf_enum64": "6.0", "map_type_arena": "6.9", "prog_type_netfilter": "6.4"}
    for name, version in want.items():
        assert features.describe(name).min_version == version, name


def test_unknown_feature_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown kernel feature 'nope'"):
        features.probe("nope")


@pytest.fixture
def fake_probes(monkeypatch: pytest.MonkeyPatch):
    """Every probe answers from a table; counts calls to show the cache works."""
    calls: list[str] = []

    def run(name: str):
        calls.append(name)
        return (name != "kprobe_pmu", f"fake answer for {name}")

    monkeypatch.setattr(probes, "run", run)
    features.clear_cache()
    yield calls
    features.clear_cache()


def test_results_are_cached(fake_probes: list[str]) -> None:
    first = features.probe("perf_link")
    assert first == features.FeatureResult("perf_link", True, "fake answer for perf_link", "5.15")
    assert features.probe("perf_link") is first
    assert fake_probes == ["perf_link"]
    assert bool(first) and not features.probe("kprobe_pmu")


def test_require(fake_probes: list[str]) -> None:
    assert features.require("uprobe_pmu").supported
    with pytest.raises(NotSupportedError) as info:
        features.require("kprobe_pmu")
    assert info.value.min_version == "4.17"
    assert "fake answer for kprobe_pmu" in str(info.value) and "4.17" in str(info.value)


def test_probe_all_in_names_order(fake_probes: list[str]) -> None:
    assert list(features.probe_all()) == features.names()


def _cli(argv: list[str]) -> tuple[int, str]:
    from bpfkit.cli.main import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(argv)
    return code, buf.getvalue()


def test_cli_json_is_one_object_of_supported_and_reason(fake_probes: list[str]) -> None:
    code, out = _cli(["features", "--json"])
    assert code == 0
    table = json.loads(out)
    assert list(table) == [*features.names(), *probes.ITERATORS]  # iterator targets last
    assert table["kprobe_pmu"] == {"supported": False, "reason": "fake answer for kprobe_pmu"}
    assert all(set(v) == {"supported", "reason"} for v in table.values())


def test_cli_table_groups_and_filters(fake_probes: list[str]) -> None:
    code, out = _cli(["features"])
    assert code == 0
    for group in features.groups():
        assert f"{group}:" in out
    line = next(l for l in out.splitlines() if l.split()[:1] == ["kprobe_pmu"])
    assert line.split()[1:3] == ["no", "4.17+"] and "fake answer" in line
    code, out = _cli(["features", "--unsupported", "--json"])
    assert json.loads(out) == {"kprobe_pmu": {"supported": False, "reason": "fake answer for kprobe_pmu"}}
    code, _ = _cli(["features", "no_such_feature"])
    assert code == 2


def test_btf_blobs_are_well_formed() -> None:
    for name, make in probes.BTF_BLOBS.items():
        blob = make()
        magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", blob)
        assert (magic, version, flags, hdr_len) == (0xEB9F, 1, 0, 24), name
        assert type_off == 0 and str_off == type_len and len(blob) == 24 + type_len + str_len
        strings = blob[24 + type_len :]
        assert strings.startswith(b"\0") and strings.endswith(b"\0")


def test_btf_builder_int_and_func_encoding() -> None:
    b = probes.BTFBuilder()
    assert b.int_() == 1
    proto = b.add(FuncProto(0, "", 1, [Param("a", 1)]))
    func = b.add(Func(0, "f", proto, Linkage.GLOBAL))
    blob = b.encode()
    types = blob[24:]
    # int: name "int", kind 1, size 4, then encoding BTF_INT_SIGNED<<24 | 32 bits
    assert struct.unpack_from("<IIII", types, 0) == (1, 1 << 24, 4, (1 << 24) | 32)
    assert struct.unpack_from("<III", types, 16) == (0, (13 << 24) | 1, 1)
    assert struct.unpack_from("<III", types, 36) == (7, (12 << 24) | 1, proto) and func == 3  # name "f" at 7


def test_kernel_version_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    class U:
        release = "6.18.44-fc-v657"

    monkeypatch.setattr(os, "uname", lambda: U)
    assert probes.kernel_version_code() == (6 << 16) | (18 << 8) | 44
    U.release = "5.10.300-amd64"
    assert probes.kernel_version_code() == (5 << 16) | (10 << 8) | 255
    U.release = "6.1"
    assert probes.kernel_version_code() == (6 << 16) | (1 << 8)


def test_docs_list_every_feature_with_its_version() -> None:
    text = (REPO / "docs" / "features.md").read_text()
    for name in features.names():
        info = features.describe(name)
        row = re.search(rf"^\| `{re.escape(name)}` \|[^\n]*\| {re.escape(info.min_version)} \|", text, re.M)
        assert row, f"docs/features.md has no row for {name} ({info.min_version}): run scripts/gen_features_doc.py"


# Transient failures (issue #19 item 7). The kernel cannot be made to give EINTR, EAGAIN or
# ENOMEM to one chosen bpf() call, so these tests inject them at bpfkit's bpf() wrapper (a mock,
# for faults only); the retry then asks the real kernel.
@pytest.mark.root
@pytest.mark.parametrize("err", ["EINTR", "ENOMEM", "EAGAIN", "EBUSY"])
@pytest.mark.parametrize("feature", ["map_type_hash", "prog_type_socket_filter", "btf", "perf_link"])
def test_transient_failure_is_not_cached(monkeypatch: pytest.MonkeyPatch, err: str, feature: str) -> None:
    import errno as _errno

    from bpfkit._kernel import bpf as _bpf
    from bpfkit.errors import kernel_error

    def bpf_failing(cmd, attr, size=_bpf.ATTR_SIZE, detail=""):  # type: ignore[no-untyped-def]
        raise kernel_error(f"BPF_{cmd.name}", getattr(_errno, err), detail)

    features.clear_cache()
    with monkeypatch.context() as patch:  # every bpf() fails during the first probe
        patch.setattr(_bpf, "bpf", bpf_failing)
        first = features.probe(feature)
    assert not first.supported
    assert err in first.reason and "inconclusive: not cached" in first.reason, first.reason
    second = features.probe(feature)
    assert "inconclusive" not in second.reason, second.reason  # the kernel's answer (perf_link: no on 5.10)
    assert features.probe(feature) is second  # the definite answer is cached
    features.clear_cache()


def test_refusal_is_a_definite_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """EPERM is the kernel's answer for this process: cached (a mocked refusal, as above)."""
    import errno as _errno

    from bpfkit._kernel import bpf as _bpf
    from bpfkit.errors import kernel_error

    calls: list[int] = []

    def bpf_refusing(cmd, attr, size=_bpf.ATTR_SIZE, detail=""):  # type: ignore[no-untyped-def]
        calls.append(int(cmd))
        raise kernel_error(f"BPF_{cmd.name}", _errno.EPERM, detail)

    features.clear_cache()
    monkeypatch.setattr(_bpf, "bpf", bpf_refusing)
    first = features.probe("map_type_hash")
    assert not first.supported and "EPERM" in first.reason and "inconclusive" not in first.reason
    assert features.probe("map_type_hash") is first and len(calls) == 1
    features.clear_cache()


def _fake_vmlinux(session_cookie_params: int, with_fsession: bool) -> object:
    """A small lazily parsed BTF with what the vmlinux BTF probes look for, and decoys: a
    flavored name, and the names as other kinds."""
    from bpfkit.btf.spec import BTF
    from bpfkit.features._btf_kinds import BTFBuilder

    b = BTFBuilder()
    i = b.int_()
    values = ["BPF_CGROUP_INET_INGRESS", *(["BPF_TRACE_FSESSION"] if with_fsession else [])]
    b.add(Enum(0, "bpf_attach_type", 4, [EnumValue(v, n) for n, v in enumerate(values)]))
    b.add(Enum(0, "bpf_attach_type___x", 4, [EnumValue("BPF_TRACE_FSESSION", 9)]))  # a flavor
    b.add(Enum64(0, "bpf_link_type", 8, [EnumValue("BPF_LINK_TYPE_TRACING_MULTI", 1)]))
    b.add(Struct(0, "cgroup_bpf", 4, [Member("revisions", i, 0)]))
    b.add(Struct(0, "bpf_rcu_read_lock", 0, []))  # the name, but not a FUNC
    proto = b.add(FuncProto(0, "", i, [Param(f"a{n}", i) for n in range(session_cookie_params)]))
    b.add(Func(0, "bpf_session_cookie", proto))
    b.add(Func(0, "bpf_session_is_return", proto))
    return BTF.from_bytes(b.encode(), lazy=True, name="vmlinux")


def test_vmlinux_btf_probes_ask_by_name_and_kind_and_follow_a_new_vmlinux(monkeypatch: pytest.MonkeyPatch) -> None:
    """The BTF probes' batched lookups take only the exact name of the asked kinds (ENUM64 is an
    enum; a ___flavor or another kind of the same name is not), and answer from the vmlinux BTF
    of the moment (a new one after kernel.clear_cache() is asked again)."""
    btf = _fake_vmlinux(1, with_fsession=False)
    monkeypatch.setattr(probes, "_vmlinux", lambda: btf)
    assert probes.run("fsession") == (False, "vmlinux BTF's enum bpf_attach_type lacks BPF_TRACE_FSESSION")
    assert probes.run("tracing_multi")[0] is True  # an ENUM64
    assert probes.run("cgroup_mprog")[0] is True
    assert probes.run("kfunc_rcu_read_lock") == (False, "vmlinux BTF has no function bpf_rcu_read_lock")
    assert probes.run("kfunc_session") == (True, "vmlinux BTF has bpf_session_is_return (1 argument)")
    assert probes.run("kfunc_session_ctx") == (True, "vmlinux BTF has bpf_session_cookie (1 argument)")
    btf = _fake_vmlinux(0, with_fsession=True)
    assert probes.run("fsession")[0] is True
    assert probes.run("kfunc_session_ctx") == (False, "vmlinux BTF has bpf_session_cookie taking 0 arguments, not 1")
