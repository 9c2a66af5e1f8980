# SPDX-License-Identifier: Apache-2.0
"""One record per link kind (bpfkit/link/kind.py): every kind module ends with one ``KIND``;
the attach path, ``link_from_fd`` and ``bpfkit attach`` read those records (through the
generated index bpfkit/link/_kinds.py) and keep no table of kinds of their own; a kind
registered in a module of its own shows up in section matching. And ``import bpfkit`` does
the same whatever the program is called (no argv[0] rule)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import bpfkit
from bpfkit import probespec
from bpfkit.errors import ParseError
from bpfkit.features import probes as feature_probes
from bpfkit.link import _kinds, base
from bpfkit.link import attach as link_attach
from bpfkit.link.kind import LinkKind, NamedSection, Section, SectionTarget
from bpfkit.sections import SECTION_DEFS

PKG = Path(bpfkit.__file__).resolve().parent
REPO = PKG.parent


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_link_kinds", REPO / "scripts" / "gen_link_kinds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_index_is_what_the_records_say() -> None:
    gen = _generator()
    text = (PKG / "link" / "_kinds.py").read_text()
    assert gen.rewrite(text, gen.render()) == text, "run python3 scripts/gen_link_kinds.py"
    assert list(_kinds.MODULES) == gen.kind_modules()


def test_every_kind_module_exports_one_record() -> None:
    for kind in _kinds.all_kinds():
        assert isinstance(kind, LinkKind)
    for module in _kinds.MODULES:
        loaded = sys.modules[module]
        records = [name for name, value in vars(loaded).items() if isinstance(value, LinkKind)]
        assert records == ["KIND"], (module, records)
    # Every module that defines a link class or a link-type decoder is a kind with a record:
    # link classes and decoders are registered by records only (LinkKind registers them).
    for path in sorted((PKG / "link").glob("*.py")):
        if path.name == "kind.py":
            continue
        calls = [node.func.id for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id.startswith("register_") and node.func.id.endswith(("_class", "_decoder"))]
        assert calls == [], f"{path.name}: {calls} (declare them in the module's KIND)"


def test_records_claim_only_libbpf_section_names() -> None:
    """The names of sections are libbpf's one table (bpfkit/sections.py); a record claims
    prefixes of it and says nothing else about them."""
    libbpf = {sec.sec.rstrip("+/").partition("/")[0] for sec in SECTION_DEFS}
    for kind in _kinds.all_kinds():
        for prefix in [sec.prefix for sec in kind.sections] + list(kind.never_auto):
            assert prefix in libbpf, (kind, prefix)


def test_records_name_registered_features() -> None:
    for kind in _kinds.all_kinds():
        assert kind.features, kind
        for feature in kind.features:
            assert feature in feature_probes.REGISTRY, (kind, feature)


def test_probe_specs_and_sections_come_from_the_records() -> None:
    probes = {name for kind in _kinds.all_kinds() for name in kind.probes}
    assert probes == set(probespec.KINDS) == set(_kinds.PROBES)
    assert {name for kind in _kinds.all_kinds() if kind.network for name in kind.probes} == link_attach.NETWORK_KINDS
    # attach.py keeps no table: its old ones are views of the records.
    source = (PKG / "link" / "attach.py").read_text()
    for table in ("_PROBE_KINDS", "_SECTION_KINDS", "_NAMED_KINDS", "_NEVER_AUTO"):
        assert f"{table} = " not in source and f"{table}: " not in source, table
    assert (PKG / "attach.py").read_text().count("def ") == 1  # the shim: its __getattr__ only


def test_link_types_come_from_the_records() -> None:
    for kind in _kinds.all_kinds():
        for link_type, cls in kind.link_classes.items():
            assert base._LINK_CLASSES[int(link_type)] is cls
            assert _kinds.LINK_TYPES[int(link_type)] in _kinds.MODULES
    assert "_registered" not in vars(base)  # no list of kind modules in base.py


def _demo_kind(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, SectionTarget, object]]:
    """A link kind declared in a module of its own (a test double: lwt_in, which no bpfkit kind
    attaches), put in the index as scripts/gen_link_kinds.py would."""
    seen: list[tuple[object, SectionTarget, object]] = []
    module = types.ModuleType("bpfkit_test_demo.kind")

    def attach(prog: object, target: SectionTarget, options: object) -> object:
        seen.append((prog, target, options))
        return "a link"

    def parse(sec: NamedSection, section: str, target: str) -> SectionTarget:
        if ":" not in target:
            raise ParseError(f"section {section!r}: expected {sec.prefix}/A:B")
        return SectionTarget(sec.kind, target, *target.split(":", 1)[:1])

    module.KIND = LinkKind(  # type: ignore[attr-defined]
        "demo", sections=(Section("lwt_in", "lwt", attach),
                          NamedSection("lwt_out", "lwt_out", parse, lambda p, t, o, s: attach(p, t, o))),
        never_auto={"lwt_xmit": "lwt_xmit programs go on a route: attach by hand"}, features=("bpf_link",))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(_kinds.SECTIONS, "lwt_in", module.__name__)
    monkeypatch.setitem(_kinds.SECTIONS, "lwt_out", module.__name__)
    monkeypatch.setitem(_kinds.NEVER_AUTO, "lwt_xmit", module.__name__)
    return seen


def test_a_new_kind_shows_up_in_section_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    from bpfkit import attach

    assert attach.parse_section("lwt_in/x") is None  # no kind claims it yet
    assert attach.skip_reason("lwt_in") == "section 'lwt_in' is not a kind auto-attach handles"
    seen = _demo_kind(monkeypatch)
    assert attach.parse_section("lwt_in/x") == SectionTarget("lwt", "x")
    assert attach.skip_reason("lwt_in") is None  # a Section decides what an empty target means
    assert attach.attach_section(7, "lwt_in/eth0", pid=3) == "a link"
    prog, target, options = seen[0]
    assert (prog, target, options.pid) == (7, SectionTarget("lwt", "eth0"), 3)
    assert attach.parse_section("lwt_out/a:b") == SectionTarget("lwt_out", "a:b", "a")
    assert attach.skip_reason("lwt_out") == "section 'lwt_out' names no target"
    with pytest.raises(ParseError, match="expected lwt_out/A:B"):
        attach.parse_section("lwt_out/ab")
    assert attach.skip_reason("lwt_xmit/x") == ("section 'lwt_xmit/x' is never auto-attached: lwt_xmit programs go "
                                                "on a route: attach by hand")


def _import_state(argv0: str, command: bool = False) -> list[str]:
    """What importing bpfkit and bpfkit.link does in a fresh process run as ``argv0``: whether
    it is the command (bpfkit._lazy.IN_COMMAND), every link kind imported, the collector's
    threshold of the command (bpfkit.cli.start_command's)."""
    code = ("import sys, gc\n"
            f"sys.argv = [{argv0!r}, 'attach', 'x.bpf.o']\n"
            + ("import bpfkit.cli; bpfkit.cli.start_command()\n" if command else "")
            + "import bpfkit, bpfkit.link, bpfkit._lazy\n"
            "print(bpfkit._lazy.IN_COMMAND, 'bpfkit.link.netkit' in sys.modules, gc.get_threshold()[0] == 20000)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    return out.stdout.split()


def test_importing_bpfkit_does_not_depend_on_the_program_name() -> None:
    """Nothing looks at argv[0] (the console script's early signal guard is its entry module's,
    _bpfkit_console.py, outside the package); the command is the command because it says so
    (bpfkit.cli.start_command, from main())."""
    library = ["False", "True", "False"]  # not the command; every link kind; the default collector
    assert _import_state("bpfkit") == library
    assert _import_state("/usr/local/bin/bpfkit") == library
    assert _import_state("myprog") == library
    assert _import_state("anything", command=True) == ["True", "False", "True"]


def test_link_is_a_sealed_base_whose_info_is_one_type() -> None:
    from bpfkit import link
    from bpfkit.link.base import GroupInfo, Link, LinkInfo

    with pytest.raises(TypeError, match=r"bpfkit\.link\.Link is sealed"):
        type("MyLink", (Link,), {"__module__": "myprog"})
    for kind in _kinds.all_kinds():
        for cls in kind.link_classes.values():
            assert issubclass(cls, Link), cls  # type: ignore[arg-type]
    for cls in (link.PerfEventIoctlLink, link.RawTracepointFd, link.SocketFilter, link.XdpNetlinkLink, link.ClsBpfLink,
                link.CgroupProgAttachment, link.NetnsProgAttachment, link.StructOpsMapLink, link.LinkGroup,
                link.MultiPerfGroup, link.RawLink):
        assert issubclass(cls, Link), cls

    class Member:  # a LinkGroup holds any object with close() and info()
        def __init__(self, n: int) -> None:
            self.n = n

        def info(self) -> LinkInfo:
            return LinkInfo(7, self.n, 9)

        def close(self) -> None:
            pass

    group = link.LinkGroup([Member(1), Member(2)])  # type: ignore[list-item]
    info = group.info()
    assert isinstance(info, LinkInfo) and isinstance(info, GroupInfo)
    assert (info.type, info.id, info.program_id, len(info)) == (7, 0, 9, 2)
    assert [i.id for i in info] == [1, 2] and info[1].id == 2 and [i.id for i in info[:1]] == [1]
    nested = link.LinkGroup([group, Member(3)]).info()  # type: ignore[list-item]
    assert isinstance(nested[0], GroupInfo) and nested.type == 7 and nested.program_id == 9
