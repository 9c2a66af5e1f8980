# SPDX-License-Identifier: Apache-2.0
"""Auto-attach from section names, on bpf/link_probes.bpf.c (needs the loader, issue 3).

link_probes has tracepoint/syscalls/sys_enter_getppid, uprobe//lib/x86_64-linux-gnu/libc.so.6:
getppid (an absolute path), uretprobe/libc.so.6:getppid (a library name) and a target-less
SEC("kprobe"), which attach_all must skip with a note.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from bpfkit import link
from bpfkit.errors import NotSupportedError

from .test_link import MODES, N, REPO, SLOT_TP, SLOT_URETPROBE, SLOT_UPROBE, _loader_works, _set_variable, _u64, our_probes, trigger

pytestmark = pytest.mark.skipif(not _loader_works(), reason="needs the loader (bpfkit.load_spec + Collection) to load bpf/link_probes.bpf.o")


@pytest.fixture
def coll() -> Iterator[Any]:
    import bpfkit

    spec = bpfkit.load_spec(str(REPO / "bpf/.output/link_probes.bpf.o"))
    _set_variable(spec, "target_tgid", os.getpid())
    with bpfkit.Collection(spec) as c:
        yield c


def counts(coll: Any) -> list[int]:
    return [_u64(coll.maps["hits"].lookup(s)) for s in (SLOT_TP, SLOT_UPROBE, SLOT_URETPROBE)]


@pytest.mark.parametrize("mode", MODES)
def test_attach_all_from_sections(coll: Any, mode: str) -> None:
    with link.attach_all(coll, mode=mode) as links:
        assert sorted(links) == ["tp_getppid", "up_getppid", "uret_getppid"]
        assert links.skipped == {"kp_any": "section 'kprobe' names no target"}
        want = link.PerfEventLink if mode == "link" else link.PerfEventIoctlLink
        assert all(type(lk) is want for lk in links.values())
        trigger()
        assert counts(coll) == [N, N, N]
    trigger()
    assert counts(coll) == [N, N, N]
    assert all(lk.closed for lk in links.values())


def test_collection_attach_all_and_program_filter(coll: Any) -> None:
    with coll.attach_all(programs=["up_getppid"]) as links:
        assert list(links) == ["up_getppid"]
        trigger()
    assert counts(coll) == [0, N, 0]


def test_attach_all_is_all_or_nothing(coll: Any) -> None:
    # A program whose section names a target this host cannot attach (a kprobe: no
    # CONFIG_KPROBES here; an unknown symbol elsewhere): nothing stays attached.
    coll.programs["kp_any"].section = "kprobe/bpfkit_no_such_function"
    with pytest.raises(Exception) as info:
        link.attach_all(coll)
    assert "kp_any" in str(info.value)
    trigger()
    assert counts(coll) == [0, 0, 0]
    assert our_probes() == []


def test_attach_section_without_target(coll: Any) -> None:
    with pytest.raises(NotSupportedError, match="names no target"):
        link.attach_section(coll.programs["kp_any"])
    with link.attach_section(coll.programs["kp_any"], "uprobe/libc:getppid") as lk:
        trigger()
        assert isinstance(lk, (link.PerfEventLink, link.PerfEventIoctlLink))
