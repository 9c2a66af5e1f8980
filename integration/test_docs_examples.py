# SPDX-License-Identifier: Apache-2.0
"""Every example in README.md and docs/ that is marked runnable runs, as written, on this kernel.

A fenced block whose info string is ``python runnable`` or ``sh runnable`` is extracted and run
from the repository's root: Python with this interpreter, shell with bash (``set -e``) and the
interpreter's bin directory first on PATH, so ``bpfkit`` is the checkout's console script. A block
may add ``needs=KIND`` (``kprobes``, ``trampolines``, ``sched_ext``, ``user_events``, ``tcx``,
``netfilter_link``, ``sockmap_link``,
``kfunc_calls``, or any feature name of bpfkit.features, iterator targets as ``iter_TARGET``;
several as ``needs=A,B``) to say what
the kernel must have; it is skipped, naming the first one missing, where this kernel lacks it. An example that needs files builds them
itself (``bpf/.output`` objects are built by scripts/setup.sh). Blocks not marked runnable are
fragments (grammar, placeholders such as ``prog.bpf.o``), marked ``python fragment`` or
``sh fragment``: ``test_every_fenced_block_is_runnable_or_a_fragment`` fails on a Python or shell
block marked neither, so a new example is a decision, not an accident.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import congestion_control_names

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
# Under emulation (integration/vm.py sets BPFKIT_VM_KERNEL) the examples run several times
# slower: docs/skeleton.md's mypy --strict of a generated module took over 120 s in the 7.2 VM.
TIMEOUT = 900 if os.environ.get("BPFKIT_VM_KERNEL") else 120


@dataclasses.dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    runnable: bool
    fragment: bool
    needs: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        lang = words[0] if words else ""
        needs = next((w.split("=", 1)[1] for w in words if w.startswith("needs=")), "")
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(path, line, lang, "runnable" in words, "fragment" in words, needs,
                            match.group(2)))
    return blocks


ALL_BLOCKS = [b for path in DOCS for b in fenced_blocks(path)]
RUNNABLE = [b for b in ALL_BLOCKS if b.runnable]


def _kernel_has(kind: str) -> str:
    """'' when this kernel has `kind`, else why not."""
    if kind == "kprobes":
        if os.path.exists("/sys/bus/event_source/devices/kprobe/type"):
            return ""
        return "this kernel has no kprobes (CONFIG_KPROBES): the example runs in a VM (docs/vm-runner.md)"
    if kind == "tcx":
        from bpfkit.link import have_tcx

        return "" if have_tcx() else "this kernel has no tcx links (Linux 6.6)"
    if kind in ("netfilter_link", "sockmap_link"):
        from bpfkit import link

        has = link.have_netfilter_link() if kind == "netfilter_link" else link.have_sockmap_link()
        return "" if has else f"this kernel has no {kind.replace('_', ' ')}s (Linux {'6.4' if kind == 'netfilter_link' else '6.10'})"
    if kind == "kfunc_calls":
        release = os.uname().release.split("-")[0].split(".")
        if (int(release[0]), int(release[1])) >= (5, 13):
            return ""
        return "calling kernel functions (kfuncs) from BPF programs needs Linux 5.13"
    if kind == "trampolines":
        from bpfkit import features

        result = features.probe("tracing_programs")
        return "" if result.supported else f"this kernel refuses BPF trampolines: {result.reason}"
    if kind == "sched_ext":
        if os.path.exists("/sys/kernel/sched_ext/state"):
            return ""
        return "this kernel lacks sched_ext (CONFIG_SCHED_CLASS_EXT, Linux 6.12+; Debian's 7.2 has it)"
    if kind == "user_events":
        if os.path.exists("/sys/kernel/tracing/user_events_data"):
            return ""
        return ("this kernel lacks user_events (CONFIG_USER_EVENTS, Linux 6.4+; no Debian kernel "
                "enables it: integration/build_user_events_kernel.sh builds one)")
    from bpfkit import features
    from bpfkit.errors import UsageError

    try:  # any feature bpfkit probes: needs=perf_link, needs=bpf_cookie, needs=iter_task ...
        result = features.probe(kind)
    except UsageError:
        return f"unknown needs={kind} in the doc block"
    return "" if result.supported else f"this kernel lacks {kind}: {result.reason}"


def test_docs_have_runnable_examples() -> None:
    assert RUNNABLE, "no fenced block in README.md or docs/ is marked runnable"


def test_every_fenced_block_is_runnable_or_a_fragment() -> None:
    """Python and shell blocks are either runnable or declared fragments (``python fragment``)."""
    undecided = [b.id for b in ALL_BLOCKS
                 if b.lang in ("python", "sh", "bash", "shell") and not (b.runnable or b.fragment)]
    assert not undecided, ("code blocks neither `runnable` nor `fragment` (mark each one): "
                           + ", ".join(undecided))


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_example_runs(block: Block) -> None:
    for kind in filter(None, block.needs.split(",")):
        why = _kernel_has(kind)
        if why:
            pytest.skip(why)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if block.lang == "python":
        cmd = [sys.executable, "-c", block.code]
    elif block.lang in ("sh", "bash", "shell"):
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        pytest.fail(f"{block.id}: runnable block in unsupported language {block.lang!r}")
    # An example registering the test congestion controls holds their names (machine-wide) alone.
    names = congestion_control_names() if "struct_ops_tcp_ca" in block.code else contextlib.nullcontext()
    try:
        with names:
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id}: the example did not finish in {TIMEOUT} s")
    assert proc.returncode == 0, (
        f"{block.id}: the example exited {proc.returncode}\n--- code\n{block.code}"
        f"--- stdout\n{proc.stdout[-2000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    assert "Traceback" not in proc.stderr, f"{block.id}: printed a traceback:\n{proc.stderr[-3000:]}"
