# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach ... --stacks counts --output F`` against a hostile workload and a hostile
output path (issue 35, items 2 and 10), on the real kernel: the workload spins in a function
whose ELF symbol is ``f\\nFAKE;INJECTED 99999999`` and another holding ESC, and F is a symlink
another user planted. The profile replaces the link (its target is untouched), the folded
file has one stack a line with the names escaped, and the SVG parses as XML."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import bpfkit
from conftest import start_attached
from tests.clang_objects import CLANG

pytestmark = pytest.mark.root

SECONDS = 2
VICTIM_TEXT = "root's file, not to be overwritten\n"
FOLDED_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")  # flamegraph.pl's reading of a line
WORKLOAD = r"""
#include <time.h>
__attribute__((noinline)) void spin(void) __asm__("f\nFAKE;INJECTED 99999999");
__attribute__((noinline)) void spin(void) { volatile unsigned long n = 0; for (;;) n++; }
__attribute__((noinline)) void outer(void) __asm__("esc@27@[2J");
__attribute__((noinline)) void outer(void) { spin(); }
int main(void) { outer(); return 0; }  /* -O0: each call is followed by code, so every return address lies inside its caller */
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CLANG is None:
        pytest.skip("needs clang to build the workload")
    d = tmp_path_factory.mktemp("hostile")
    (d / "w.c").write_bytes(WORKLOAD.replace("@27@", "\x1b").encode())
    subprocess.run([CLANG, "-O0", "-fno-omit-frame-pointer", "-o", str(d / "hostile"), str(d / "w.c")],
                   check=True, capture_output=True)
    return d / "hostile"


@pytest.mark.parametrize("suffix", [".folded", ".svg"])
def test_attach_stacks_output_of_a_hostile_workload_through_a_planted_symlink(
        bpf_obj: Any, hostile: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"profile{suffix}"
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    out.symlink_to(victim)
    work = subprocess.Popen([str(hostile)])
    # The bpfkit this test imported (a checkout or an installed copy), in the child too.
    env = dict(os.environ, PYTHONPATH=str(Path(bpfkit.__file__).resolve().parent.parent))
    cli, seen = start_attached([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("stacks")), "profile:hz:99",
                                "--stacks", "counts", "--stack-map", "stacks", "--output", str(out)], env=env)
    try:
        time.sleep(SECONDS)
        cli.send_signal(signal.SIGINT)
        rest = cli.communicate(timeout=60)[0]
    finally:
        work.kill()
        work.wait()
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, "".join(seen) + rest
    assert victim.read_text() == VICTIM_TEXT and not out.is_symlink()
    assert sorted(os.listdir(tmp_path)) == sorted(["victim", out.name])  # no temporary file left
    data = out.read_bytes()
    assert b"\x1b" not in data
    if suffix == ".svg":
        names = {g.get("data-n") for g in ET.fromstring(data).iter("{http://www.w3.org/2000/svg}g")}
        assert "f\\x0aFAKE;INJECTED 99999999" in names and "esc\\x1b[2J" in names
        return
    lines = data.decode().split("\n")
    assert lines[-1] == "" and all(FOLDED_LINE.match(line) for line in lines[:-1])
    assert not any(line.startswith("FAKE") for line in lines)
    mine = [line for line in lines if line.startswith("hostile;")]
    assert any(";esc\\x1b[2J;f\\x0aFAKE:INJECTED 99999999" in line for line in mine), mine
