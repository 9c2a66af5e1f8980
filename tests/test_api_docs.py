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
    for page in ("bpfkit.html", "bpfkit/link.html", "bpfkit/events.html", "bpfkit/collection.html"):
        assert page in pages, f"{page} missing from the API reference: {sorted(pages)}"
