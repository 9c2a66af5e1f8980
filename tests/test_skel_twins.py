# SPDX-License-Identifier: Apache-2.0
"""Twins (bpfkit.spec.twins): a tp_btf and a raw_tp program on one tracepoint, as runqlat.bpf.c
ships them, load as alternatives through a skeleton and ``bpfkit attach``, and attach once
through ``Collection.attach_all``; each event is counted once, checked against a plain
tracepoint program counting the same events (bpf/skel_twins.bpf.c). Groups of alternatives in
``Skeleton.load(programs=...)`` pass ``mypy --strict`` through a generated skeleton.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import bpfkit
from bpfkit.collection import Collection
from bpfkit.errors import BPFKitError, UsageError
from bpfkit.maps import Map
from bpfkit.spec.load import load_spec
from bpfkit.spec.twins import find_twins, group_twins, load_selection
from conftest import bpf_object, console_script, start_attached

REPO = Path(__file__).resolve().parent.parent
HOOKS = ("sched_wakeup", "sched_wakeup_new", "sched_switch", "sched_process_fork")  # the maps' slots
SWITCH, FORK = 2, 3
root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def twins_obj() -> Path:
    return bpf_object("skel_twins")


def workload(set_target: Callable[[int], None]) -> None:
    """A thread that sleeps 30 times and forks twice, counted while it is the target: the tid is
    set while the thread waits (not running) and cleared after it ended, so every program
    attached sees the same events."""
    go = threading.Event()
    tids: list[int] = []

    def work() -> None:
        tids.append(threading.get_native_id())
        go.wait()
        for _ in range(30):
            time.sleep(0.001)  # a sched_switch each, at least
        for _ in range(2):
            subprocess.run(["true"], check=True)  # a sched_process_fork each, current = this thread

    thread = threading.Thread(target=work)
    thread.start()
    while not tids:
        time.sleep(0.001)
    time.sleep(0.01)
    set_target(tids[0])
    go.set()
    thread.join()
    set_target(0)


def hits(maps: dict[str, Map[int, int]], name: str) -> list[int]:
    return [int(maps[name][slot]) for slot in range(len(HOOKS))]


# ------------------------------------------------------------------------ the pairs, pure
def test_twins_are_found_by_kind_and_target() -> None:
    spec = load_spec(twins_obj())
    twins = find_twins({n: p.section for n, p in spec.programs.items()})
    assert [(t.preferred, t.fallback) for t in twins] == [(h, f"handle_{h}") for h in HOOKS]
    assert twins[2].hook == "tracepoint sched_switch (tp_btf/raw_tp)"
    # The plain tracepoint programs are no one's twin; every twin loads as a group, BTF first.
    assert load_selection(spec) == [(h, f"handle_{h}") for h in HOOKS] + [(f"tp_{h}",) for h in HOOKS]


def test_twins_of_every_kind_and_what_is_not_a_pair() -> None:
    sections = {"a": "fentry/do_unlinkat", "b": "kprobe/do_unlinkat", "c": "fexit/do_unlinkat",
                "d": "kretprobe/do_unlinkat", "e": "?tp_btf/sys_enter", "f": "raw_tracepoint/sys_enter",
                "g": "fentry/vfs_read", "h": "kprobe/vfs_read+4",  # an offset: not the entry
                "i": "tp_btf/sched_switch", "j": "raw_tp/sched_switch", "k": "raw_tp/sched_switch"}  # two: no guess
    assert [(t.preferred, t.fallback) for t in find_twins(sections)] == [("a", "b"), ("c", "d"), ("e", "f")]
    # Explicit groups stay; singles that are twins become one group where the first stood.
    assert group_twins([("b",), ("x", "y"), ("a",), ("c",)], sections) == [("a", "b"), ("x", "y"), ("c",)]


# --------------------------------------------------------------------- through the kernel
@root
def test_skeleton_load_and_attach_count_each_event_once() -> None:
    """skel.load(); skel.attach(): one program of each pair, so btf + raw == tp on every hook;
    sched_process_fork's tp_btf is refused by the verifier and its raw_tp twin runs instead."""
    with bpfkit.open(twins_obj()) as skel:
        skel.load()
        coll = skel.collection
        assert coll is not None
        assert "sched_process_fork" in coll.not_loaded  # the verifier's btf_ctx_access: no 5th argument
        with pytest.raises(UsageError, match="the kernel refused it"):
            skel.sched_process_fork  # noqa: B018
        links = skel.attach()
        for hook in HOOKS:
            assert (hook in links) != (f"handle_{hook}" in links), (hook, list(links))
        assert "handle_sched_process_fork" in links
        workload(lambda tid: setattr(skel, "target_tid", tid))
        btf, raw, tp = (hits(coll.maps, m) for m in ("btf_hits", "raw_hits", "tp_hits"))
    assert tp[SWITCH] >= 30 and tp[FORK] >= 2, tp
    assert [b + r for b, r in zip(btf, raw)] == tp, (btf, raw, tp)
    assert btf[FORK] == 0 and raw[FORK] == tp[FORK]


def _load_both(path: Path) -> Collection:
    """Both sched_switch twins and the reference program loaded (skip where tp_btf is not)."""
    try:
        return Collection(load_spec(path), programs=["sched_switch", "handle_sched_switch", "tp_sched_switch"])
    except BPFKitError as exc:
        pytest.skip(f"this kernel does not load tp_btf programs: {exc}")


def _run(coll: Collection, programs: list[str] | None = None) -> tuple[list[str], dict[str, str], list[list[int]]]:
    with coll.attach_all(programs=programs) as links:
        workload(lambda tid: coll.maps[".bss"].update(0, tid.to_bytes(4, sys.byteorder)))
        made, skipped = list(links), dict(links.skipped)
    return made, skipped, [hits(coll.maps, m) for m in ("btf_hits", "raw_hits", "tp_hits")]


@root
def test_attach_all_attaches_one_of_two_loaded_twins() -> None:
    with _load_both(twins_obj()) as coll:
        made, skipped, (btf, raw, tp) = _run(coll)
    assert made == ["sched_switch", "tp_sched_switch"]
    assert "twin of 'sched_switch'" in skipped["handle_sched_switch"]
    assert tp[SWITCH] >= 30 and btf[SWITCH] == tp[SWITCH] and raw[SWITCH] == 0, (btf, raw, tp)


@root
def test_attach_all_attaches_both_twins_when_both_are_named() -> None:
    with _load_both(twins_obj()) as coll:
        made, _, (btf, raw, tp) = _run(coll, ["sched_switch", "handle_sched_switch", "tp_sched_switch"])
    assert sorted(made) == ["handle_sched_switch", "sched_switch", "tp_sched_switch"]
    assert tp[SWITCH] >= 30 and btf[SWITCH] == raw[SWITCH] == tp[SWITCH], (btf, raw, tp)  # each event twice


@root
def test_attach_all_falls_back_to_the_twin_when_the_preferred_one_is_refused() -> None:
    """The kernel refusing to attach the tp_btf program (here: its fd closed, EBADF or bpfkit's
    own refusal of a closed program) makes attach_all attach the raw_tp twin."""
    with _load_both(twins_obj()) as coll:
        coll.programs["sched_switch"].close()
        made, skipped, (btf, raw, tp) = _run(coll)
    assert made == ["handle_sched_switch", "tp_sched_switch"]
    assert "its twin 'handle_sched_switch'" in skipped["sched_switch"]
    assert tp[SWITCH] >= 30 and raw[SWITCH] == tp[SWITCH] and btf[SWITCH] == 0, (btf, raw, tp)


@root
def test_bpfkit_attach_loads_one_twin_of_each_pair() -> None:
    proc, seen = start_attached([console_script(), "attach", str(twins_obj())])
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    text = "".join(seen) + out
    assert proc.returncode == 0, text
    assert "did not load program sched_process_fork" in text  # refused: its twin loaded
    assert "attached handle_sched_process_fork:" in text
    for hook in HOOKS:
        attached = [name for name in (hook, f"handle_{hook}") if f"attached {name}:" in text]
        assert len(attached) == 1, (hook, text)


# ---------------------------------------------------------------------------- mypy --strict
MYPY_CACHE = Path(tempfile.gettempdir()) / "bpfkit-test-skeleton-mypy"  # as tests/test_skeleton.py: shared
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")

SNIPPET = '''from __future__ import annotations

from skel_twins_skel import SkelTwins


def run() -> int:
    with SkelTwins.open() as skel:
        skel.load(programs=[("sched_switch", "handle_sched_switch"), "tp_sched_switch", ["sched_wakeup"]])
        skel.attach(programs=["tp_sched_switch"])
        return int(skel.btf_hits[2]) + int(skel.raw_hits[2])


def run_again() -> None:
    SkelTwins.open_and_load(programs=(("sched_process_fork", "handle_sched_process_fork"),)).close()
'''


def test_groups_of_alternatives_pass_mypy_strict(tmp_path: Path) -> None:
    if MYPY is None:
        pytest.skip("needs mypy (pip install -e '.[test]')")
    gen = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", str(twins_obj()), "-o",
                          str(tmp_path / "skel_twins_skel.py")], check=False, capture_output=True, text=True, cwd=REPO)
    assert gen.returncode == 0, gen.stderr
    assert "# twins on tracepoint sched_switch (tp_btf/raw_tp): load() keeps 'sched_switch', else " \
           "'handle_sched_switch'" in (tmp_path / "skel_twins_skel.py").read_text()
    (tmp_path / "use_twins.py").write_text(SNIPPET)
    (tmp_path / "misuse_twins.py").write_text(SNIPPET.replace('"tp_sched_switch", ["sched_wakeup"]', "3"))

    def check(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([MYPY, "--strict", f"--cache-dir={MYPY_CACHE}", str(tmp_path / name)],
                              check=False, capture_output=True, text=True, cwd=REPO)

    good = check("use_twins.py")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = check("misuse_twins.py")  # a number is neither a name nor a group
    assert bad.returncode == 1 and 'misuse_twins.py:8: error: List item 1 has incompatible type "int"' in bad.stdout, \
        bad.stdout
