# SPDX-License-Identifier: Apache-2.0
"""The suite tests the bpfkit it runs with, wherever that is installed: a test starts the console
script beside the running interpreter (conftest.console_script), never the checkout's
.venv/bin/bpfkit (run against an installed wheel by scripts/wheel-legs.sh, that would test the
editable checkout instead; outside a checkout it does not exist)."""

from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path

from conftest import console_script

REPO = Path(__file__).resolve().parent.parent
# the checkout's venv as a path in code: REPO / ".venv", f"{REPO}/.venv/bin/bpfkit"
VENV_PATH = re.compile(r"""/\s*["']\.venv["']|/\.venv/bin/""")


def test_console_script_is_beside_the_interpreter() -> None:
    assert console_script() == os.path.join(os.path.dirname(sys.executable), "bpfkit")
    assert os.access(console_script(), os.X_OK)


def test_no_test_hard_codes_the_checkout_venv() -> None:
    found = []
    for top in ("tests", "integration"):
        for path in sorted((REPO / top).rglob("*.py")):
            if path.name == Path(__file__).name:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if VENV_PATH.search(code):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "tests that run the checkout's venv instead of conftest.console_script():\n" + "\n".join(found)


def test_iter_links_skips_a_link_another_process_is_making(monkeypatch) -> None:
    """A second copy of the suite made a link while this one listed them: BPF_LINK_GET_FD_BY_ID
    said EAGAIN (a link not yet settled) and iter_links raised. Faked: the kernel gives EAGAIN
    only in the moment between a link's id and its settling, which cannot be produced on demand."""
    from bpfkit._kernel import bpf as _bpf
    from bpfkit.errors import KernelError
    from bpfkit.link import base

    asked: list[int] = []

    def fd_by_id(kind: str, ident: int) -> object:
        asked.append(ident)
        raise KernelError("BPF_LINK_GET_FD_BY_ID", errno.EAGAIN if ident == 7 else errno.ENOENT, f"link id {ident}")

    monkeypatch.setattr(_bpf, "iter_ids", lambda kind: iter([7, 8]))
    monkeypatch.setattr(_bpf, "fd_by_id", fd_by_id)
    assert list(base.iter_links()) == [] and asked == [7, 8]
