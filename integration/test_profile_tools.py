# SPDX-License-Identifier: Apache-2.0
"""bpfkit's profile files opened by the tools people read them with: ``go tool pprof -top``
(Debian's golang-go) on the pprof file of a profiled workload shows spin first; the SVG flame
graph in headless Chromium (Debian's chromium): the frames present, no script error, and the
script working (a click on a frame zooms into it, a search reports its share)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bpfkit.profile import Profile, write_profile
from integration.stack_workload import Workload, build

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "examples" / "profile" / "profile.py"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("tools"))


def test_go_tool_pprof_top(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (Debian's golang-go): go tool pprof reads the pprof file")
    pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    bpf_obj("stacks")
    out = tmp_path / "w.pprof"
    proc = subprocess.Popen([str(workload.workload), "spin", "30"])
    try:
        run = subprocess.run([sys.executable, str(PROFILE), "--pid", str(proc.pid), "--duration", "2",
                              "--output", str(out)], capture_output=True, text=True, timeout=120, check=False,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
    finally:
        proc.kill()
        proc.wait()
    assert run.returncode == 0, run.stderr
    top = subprocess.run([go, "tool", "pprof", "-top", str(out)], capture_output=True, text=True, timeout=300,
                         check=False, env=dict(os.environ, HOME=str(tmp_path)))
    assert top.returncode == 0, top.stderr
    rows = [line.split() for line in top.stdout.splitlines() if line.strip() and line.split()[-1] != "cum%"]
    table = [r for r in rows if len(r) == 6 and r[1].endswith("%")]
    assert table and table[0][-1] == "spin", top.stdout
    assert "Type: samples" in top.stdout


def _profile() -> Profile:
    p = Profile(name="browser test")
    p.add(["w", "main", "a", "b", "c", "spin"], 90)
    p.add(["w", "main", "x"], 10)
    p.add(["w", "main", "a", "getppid_[k]"], 7)
    return p


CLICK_AND_SEARCH = """<pre id="out"></pre><script>
window.addEventListener("load", function () {
  var g = Array.prototype.slice.call(document.querySelectorAll("#frames g"));
  var c = g.filter(function (x) { return x.getAttribute("data-n") === "c"; })[0];
  c.dispatchEvent(new MouseEvent("click", {bubbles: true}));
  search(new RegExp("spin"));
  var shown = g.filter(function (x) { return x.style.display !== "none"; }).map(function (x) {
    return x.getAttribute("data-n") + "@" + x.getElementsByTagName("rect")[0].getAttribute("width"); });
  document.getElementById("out").textContent = "SHOWN=" + shown.join(",") + "; " +
    document.getElementById("matched").textContent;
});
</script>"""


def _chromium(url: str, tmp: Path) -> tuple[str, str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (Debian's chromium; scripts/setup.sh installs it unless BPFKIT_SETUP_CHROMIUM=0): "
                    "it opens the SVG flame graph")
    run = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          f"--user-data-dir={tmp / 'profile'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


def test_svg_in_chromium(tmp_path: Path) -> None:
    svg = tmp_path / "p.svg"
    write_profile(_profile(), str(svg))
    dom, log = _chromium(svg.as_uri(), tmp_path)
    assert 'data-n="spin"' in dom and 'data-n="getppid_[k]"' in dom
    assert "Uncaught" not in log, log[-2000:]
    # The script ran: init() fitted each frame's label to its width ("all" fits).
    assert ">all</text>" in dom

    page = tmp_path / "p.html"
    page.write_text("<!DOCTYPE html><html><body>" + svg.read_text().split("\n", 1)[1] + CLICK_AND_SEARCH
                    + "</body></html>")
    dom, log = _chromium(page.as_uri(), tmp_path)
    assert "Uncaught" not in log, log[-2000:]
    # Zoomed into c: its ancestors (dimmed) and c and spin span the width; x and getppid are hidden.
    assert "SHOWN=all@1180,w@1180,main@1180,a@1180,b@1180,c@1180,spin@1180; Matched: 84.1%" in dom, dom[-1500:]
