# SPDX-License-Identifier: Apache-2.0
"""The one attach path (bpfkit/attach.py) without a kernel: the public names that lead to it,
every probe-spec kind and section kind having its attacher, and no import hidden in a string.
integration/test_link_cli.py checks that `bpfkit attach` calls it once per SPEC."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from bpfkit import attach, link, probespec
from bpfkit.collection import Collection

PACKAGE = Path(attach.__file__).resolve().parent

# Modules allowed to call importlib.import_module: the packages' lazy-export tables (a name
# asked of the package imports the submodule that defines it, keeping `import bpfkit` light).
# _lazy.py imports by name for the tables of bpfkit, bpfkit.events and bpfkit.spec (their _LAZY).
LAZY_EXPORT_TABLES = {"_lazy.py", "usdt/__init__.py"}


def test_public_attach_names_are_the_attach_module(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("attach_probe", "attach_section", "attach_all", "attach_network", "auto_attach", "skip_reason",
                 "parse_section", "SectionTarget", "AttachedLinks"):
        assert getattr(link, name) is getattr(attach, name), name
    seen: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(attach, "attach_all", lambda coll, **kw: seen.append((coll, kw)))  # a mock: who is called
    me = object()
    Collection.attach_all(me, pid=5, programs=["a"])  # type: ignore[arg-type]
    assert seen == [(me, dict(mode="auto", pid=5, cookie=0, programs=["a"], cgroup=None, netkit=None))]


def test_every_probe_kind_has_an_attacher() -> None:
    assert set(attach._PROBE_KINDS) == set(probespec.KINDS)


def test_section_kinds_parse_and_are_not_skipped() -> None:
    for prefix, (kind, _) in attach._SECTION_KINDS.items():
        target = attach.parse_section(f"{prefix}/x:y")
        assert target is not None and target.kind == kind, prefix
        assert attach.skip_reason(f"{prefix}/x:y") is None, prefix
    for prefix in attach._NEVER_AUTO:
        assert "never auto-attached" in (attach.skip_reason(prefix) or ""), prefix


def test_unknown_section_is_refused_naming_the_kinds() -> None:
    from bpfkit.errors import NotSupportedError

    with pytest.raises(NotSupportedError, match=r"auto-attach of section 'lwt_in'.*kprobe, kretprobe"):
        attach.attach_section(0, "lwt_in")
    assert attach.skip_reason("lwt_in") == "section 'lwt_in' is not a kind auto-attach handles"
    # Kinds attached by hand say how.
    assert attach.skip_reason("socket") == ("section 'socket' is never auto-attached: a socket filter goes on a "
                                            "socket chosen at run time: attach with bpfkit.link.attach_socket_filter")


def _dynamic_imports(path: Path) -> list[str]:
    """Calls that import a module named by a string: importlib.import_module(...), import_module(...),
    __import__(...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__"):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_import_hidden_in_a_string() -> None:
    """Imports are plain statements (lazy ones inside functions are fine) so that readers, grep,
    mypy and pdoc see them; only the packages' lazy-export tables import by name."""
    hidden = [hit for path in sorted(PACKAGE.rglob("*.py"))
              if str(path.relative_to(PACKAGE)) not in LAZY_EXPORT_TABLES
              for hit in _dynamic_imports(path)]
    assert hidden == []
    for allowed in LAZY_EXPORT_TABLES:  # the allow-list names files that exist and still need it
        assert _dynamic_imports(PACKAGE / allowed), allowed
