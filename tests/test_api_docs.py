# SPDX-License-Identifier: Apache-2.0
"""The API reference builds from the docstrings without a single pdoc warning
(scripts/api_docs.py; the test extra installs pdoc)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("pdoc", reason="needs pdoc (pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "api_docs.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    for page in ("bpfkit.html", "bpfkit/link.html", "bpfkit/events.html", "bpfkit/collection.html", "bpfkit/errors.html",
                 "bpfkit/spec.html", "bpfkit/symbols.html", "bpfkit/profile.html", "bpfkit/metrics.html",
                 "bpfkit/hist.html", "bpfkit/skeleton.html"):
        assert page in pages, f"{page} missing from the API reference: {sorted(pages)}"


def _api_docs_lists() -> tuple[list[str], dict[str, str]]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("api_docs", REPO / "scripts" / "api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        pytest.skip("needs pdoc (pip install -e '.[test]')")
    return module.PUBLIC_MODULES, module.INTERNAL_MODULES


def test_every_public_module_is_in_the_reference() -> None:
    """Each of bpfkit's top-level modules and packages (not _private) is documented, or listed as
    internal with what it is: a new public package cannot be left out of the reference."""
    from conftest import package_dir

    public, internal = _api_docs_lists()
    package = package_dir()
    top = {f"bpfkit.{p.stem}" for p in package.glob("*.py") if not p.stem.startswith("_")}
    top |= {f"bpfkit.{p.parent.name}" for p in package.glob("*/__init__.py") if not p.parent.name.startswith("_")}
    assert not set(public) & set(internal)
    # pdoc documents bpfkit.errors with the bpfkit package (listing it again is a pdoc warning);
    # the first test checks its page.
    missing = sorted(top - set(public) - set(internal) - {"bpfkit", "bpfkit.errors"})
    assert not missing, f"top-level modules in neither PUBLIC_MODULES nor INTERNAL_MODULES of scripts/api_docs.py: {missing}"
    stale = sorted((set(public) | set(internal)) - top - {"bpfkit"})
    assert not stale, f"scripts/api_docs.py lists modules that do not exist: {stale}"
