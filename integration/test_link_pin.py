# SPDX-License-Identifier: Apache-2.0
"""Pinned links: they outlive the process that made them, and `bpfkit gc` knows their probes.

A subprocess attaches, pins the link (and the counting map) under this module's pin directory
and exits; this process then triggers the probe, reads exact counts from the pinned map, opens
the pinned link, unpins it and sees the program stop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from bpfkit import link
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import NotFoundError, UsageError
from bpfkit.maps import Map

from .test_link import N, REPO, SUBPROCESS_TIMEOUT, SLOT_TP, SLOT_UPROBE, Counters, _u64, trigger

PIN_ROOT = "/sys/fs/bpf"
pytestmark = pytest.mark.feature("perf_link")  # pinning needs a bpf_link (5.15 for perf events)


def _is_bpffs(path: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path and " - bpf " in line for line in f)


@pytest.fixture(scope="module")
def pin_dir() -> Iterator[Path]:
    """A fresh directory in bpffs (mounted if needed); must be empty again at the end."""
    if not _is_bpffs(PIN_ROOT):
        os.makedirs(PIN_ROOT, exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", PIN_ROOT], check=True)
    path = Path(PIN_ROOT) / f"bpfkit_test_link_{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        left = sorted(p.name for p in path.iterdir())
        for p in path.iterdir():
            p.unlink()
        path.rmdir()
        assert not left, f"tests left pins behind: {left}"


CREATOR = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {repo!r})
    from bpfkit import link
    from integration.test_link import Counters
    pin_dir, kind, tgid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Counters(tgid, use_object=False)
    if kind == "tracepoint":
        lk = link.tracepoint("syscalls", "sys_enter_getppid", c.tp, mode="link")
    else:
        lk = link.uprobe("libc", "getppid", c.up, mode="link", tracefs=True)
        print(lk.perf_event.probe.group, flush=True)
    lk.pin(pin_dir + "/link")
    c.hits.pin(pin_dir + "/hits")
    lk.close()
    c.close()
    """
)


def _create_pinned(pin_dir: Path, kind: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", CREATOR.format(repo=str(REPO)), str(pin_dir), kind, str(os.getpid())],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_pinned_tracepoint_link_outlives_its_creator(pin_dir: Path) -> None:
    _create_pinned(pin_dir, "tracepoint")
    try:
        with Map.load_pinned(str(pin_dir / "hits")) as hits:
            trigger()
            assert _u64(hits.lookup(SLOT_TP)) == N
            with link.load_pinned_link(str(pin_dir / "link")) as lk:
                assert isinstance(lk, link.PerfEventLink) and lk.pinned_path == str(pin_dir / "link")
                info = lk.info()
                assert info.detail.detail is None or info.detail.detail.name == "sys_enter_getppid"
                lk.unpin()
                assert not (pin_dir / "link").exists()
                trigger()
                assert _u64(hits.lookup(SLOT_TP)) == 2 * N  # our fd still holds the link
            trigger()
            assert _u64(hits.lookup(SLOT_TP)) == 2 * N  # last reference gone: detached
    finally:
        for name in ("link", "hits"):
            if (pin_dir / name).exists():
                (pin_dir / name).unlink()


def test_pinned_tracefs_uprobe_stays_until_unpinned_then_gc(pin_dir: Path) -> None:
    group = _create_pinned(pin_dir, "uprobe")
    try:
        assert group in {e.group for e in _tracefs.list_probe_events("uprobe")}
        with Map.load_pinned(str(pin_dir / "hits")) as hits:
            trigger()
            assert _u64(hits.lookup(SLOT_UPROBE)) == N
        # Owner dead, probe in use by the pinned link: gc must keep it and say why.
        results = {r.probe.event.group: r for r in link.remove_stale_probes()}
        assert not results[group].removed and "busy" in results[group].reason
        with link.load_pinned_link(str(pin_dir / "link")) as lk:
            detail = lk.info().detail.detail
            assert detail is None or detail.path.endswith("libc.so.6")
            lk.unpin()
        results = {r.probe.event.group: r for r in link.remove_stale_probes()}
        assert results[group].removed
        assert group not in {e.group for e in _tracefs.list_probe_events("uprobe")}
    finally:
        for name in ("link", "hits"):
            if (pin_dir / name).exists():
                (pin_dir / name).unlink()
        link.remove_stale_probes()


def test_pin_move_unpin_in_process(pin_dir: Path) -> None:
    c = Counters(os.getpid())
    try:
        with link.tracepoint("syscalls", "sys_enter_getppid", c.tp, mode="link") as lk:
            lk.pin(str(pin_dir / "a"))
            lk.pin(str(pin_dir / "b"))  # moves the pin
            assert not (pin_dir / "a").exists() and (pin_dir / "b").exists()
            assert lk.pinned_path == str(pin_dir / "b")
            lk.unpin()
            lk.unpin()  # idempotent
            assert not (pin_dir / "b").exists() and lk.pinned_path is None
    finally:
        c.close()


def test_load_pinned_link_errors(pin_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        link.load_pinned_link(str(pin_dir / "nothing"))
    c = Counters(os.getpid())
    try:
        c.hits.pin(str(pin_dir / "a_map"))
        try:
            with pytest.raises(UsageError, match="a map, not a link"):
                link.load_pinned_link(str(pin_dir / "a_map"))
        finally:
            c.hits.unpin()
        with link.tracepoint("syscalls", "sys_enter_getppid", c.tp, mode="link") as lk:
            with pytest.raises(Exception, match="bpf filesystem"):
                lk.pin(str(tmp_path / "not_bpffs"))
    finally:
        c.close()
