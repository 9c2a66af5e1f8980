# SPDX-License-Identifier: Apache-2.0
"""Warnings on the command line (issue #19 item 10): offline commands print none, the others one
line each, never Python's "file:line: RuntimeWarning" plus a source line."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import console_script

REPO = Path(__file__).resolve().parent.parent
BPFKIT = console_script()


def _main(argv: list[str]) -> tuple[int, str, str]:
    from bpfkit.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv(1) from util-linux")
@pytest.mark.root
@pytest.mark.parametrize("core", [False, True])
def test_unprivileged_inspect_prints_nothing_extra(bpf_obj, core: bool) -> None:
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BPFKIT, "inspect",
           str(bpf_obj("core_task"))] + (["--core"] if core else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "programs (" in out.stdout


def test_offline_command_silences_bpfkit_warnings(bpf_obj, monkeypatch: pytest.MonkeyPatch) -> None:
    """No inspect path warns on this machine, so one is made to (a mock: the warning's source
    is what matters, e.g. a BTF EPERM seen by an unprivileged user elsewhere)."""
    import bpfkit

    real = bpfkit.load_spec

    def warning_load_spec(path):  # type: ignore[no-untyped-def]
        warnings.warn("bpfkit: loading the object's BTF failed, continuing without it: BPF_BTF_LOAD: "
                      "EPERM (Operation not permitted): load 'BTF' rejected\nsecond line", RuntimeWarning, stacklevel=2)
        return real(path)

    monkeypatch.setattr(bpfkit, "load_spec", warning_load_spec)
    code, out, err = _main(["inspect", str(bpf_obj("minimal"))])
    assert code == 0 and err == "" and "count_getppid" in out


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv(1) from util-linux")
@pytest.mark.root
def test_load_prints_the_btf_warning_on_one_line(bpf_obj) -> None:
    """Real: without CAP_BPF the object's BTF load is refused (a warning: bpfkit goes on without
    BTF, as libbpf does), then the map creation (the error)."""
    from bpfkit._kernel import caps

    if caps.sysctl("unprivileged_bpf_disabled") == "0":
        pytest.skip("kernel.unprivileged_bpf_disabled is 0: BTF loads without CAP_BPF here")
    drop = "-bpf,-sys_admin"
    out = subprocess.run(["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", BPFKIT, "load",
                          str(bpf_obj("minimal")), f"/sys/fs/bpf/bpfkit_warn_test_{os.getpid()}"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    lines = out.stderr.splitlines()
    assert len(lines) == 2, out.stderr
    assert lines[0].startswith("bpfkit: warning: loading the object's BTF failed, continuing without it: "
                               "BPF_BTF_LOAD: EPERM (Operation not permitted)"), lines[0]
    assert lines[1].startswith("bpfkit: error: ")
    assert "RuntimeWarning" not in out.stderr and "Traceback" not in out.stderr
