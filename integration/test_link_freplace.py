# SPDX-License-Identifier: Apache-2.0
"""freplace (BPF_PROG_TYPE_EXT): link_freplace.bpf.o's new_verdict() replaces pick_verdict() of
link_freplace_target.bpf.o's tc program, and BPF_PROG_TEST_RUN sees the verdict change (100 +
len before, 7 * len while attached, 100 + len again after the link closes).

The host (6.18) refuses BPF trampolines, freplace included (EPERM before verification): there
the tests that need an attached extension skip naming that; they run in a VM kernel
(``integration/vm.py --kernel 6.1``).
"""

from __future__ import annotations

import errno
import os
from typing import Any, Iterator

import pytest

import bpfkit
from bpfkit import link
from bpfkit._kernel.consts import LinkType
from bpfkit.errors import UsageError, VerifierError, NotFoundError

PKT = bytes(64)  # BPF_PROG_TEST_RUN for tc wants at least an Ethernet header
BEFORE = 100 + len(PKT)
AFTER = 7 * len(PKT)
PIN_ROOT = "/sys/fs/bpf"


@pytest.fixture
def target(bpf_obj: Any) -> Iterator[Any]:
    with bpfkit.Collection.from_file(bpf_obj("link_freplace_target")) as coll:
        yield coll.programs["freplace_target"]


def _verdict(prog: Any) -> int:
    return prog.test_run(PKT)[0]


def _load_ext(bpf_obj: Any, target: Any = None, func: str = "pick_verdict", **kw: Any) -> tuple[Any, Any]:
    spec = bpfkit.load_spec(bpf_obj("link_freplace"))
    if target is not None or kw:
        spec.programs["new_verdict"].set_attach_target(func, target, **kw)
    try:
        return spec, bpfkit.Collection(spec)
    except VerifierError as exc:
        if exc.errno == errno.EPERM and not exc.log.strip():
            pytest.skip(f"this kernel refuses freplace (BPF trampoline) programs before verification: EPERM ({exc})")
        raise


def _calls(spec: Any, coll: Any) -> int:
    v = spec.variables["calls"]
    raw = coll.maps[v.section][0]
    return int.from_bytes(raw[v.offset : v.offset + v.size], "little")


def test_freplace_changes_the_verdict(bpf_obj: Any, target: Any) -> None:
    assert _verdict(target) == BEFORE
    spec, ext = _load_ext(bpf_obj, target)
    with ext:
        prog = ext.programs["new_verdict"]
        assert _verdict(target) == BEFORE  # loaded, not attached: nothing changes yet
        with link.freplace(prog, target) as lk:
            info = lk.info()
            assert info.type == LinkType.TRACING
            assert info.detail.target_obj_id in (0, target.id)  # 0 before about 6.0
            assert _verdict(target) == AFTER
            assert _verdict(target) == AFTER
            assert _calls(spec, ext) == 2
        assert _verdict(target) == BEFORE  # closing the link restores pick_verdict()


def test_freplace_load_time_target_and_auto_attach(bpf_obj: Any, target: Any) -> None:
    """link.freplace(prog) with no target uses the load-time one; attach_all does the same."""
    _, ext = _load_ext(bpf_obj, target)
    with ext:
        with link.freplace(ext.programs["new_verdict"]) as lk:
            assert _verdict(target) == AFTER
        assert _verdict(target) == BEFORE
    _, ext = _load_ext(bpf_obj, target)
    with ext, ext.attach_all() as links:
        assert _verdict(target) == AFTER
    assert _verdict(target) == BEFORE


def test_freplace_target_by_pin_fd_and_id(bpf_obj: Any, target: Any) -> None:
    path = os.path.join(PIN_ROOT, f"bpfkit_test_freplace_{os.getpid()}")
    target.pin(path)
    try:
        for how in ({"prog": path}, {"prog": target.fd}, {"prog": int(target.fd)}, {"prog_id": target.id}):
            spec = bpfkit.load_spec(bpf_obj("link_freplace"))
            spec.programs["new_verdict"].set_attach_target("pick_verdict", **how)
            try:
                ext = bpfkit.Collection(spec)
            except VerifierError as exc:
                if exc.errno == errno.EPERM and not exc.log.strip():
                    pytest.skip(f"this kernel refuses freplace (BPF trampoline) programs: EPERM ({exc})")
                raise
            with ext:
                arg = how.get("prog")
                kw = {"prog_id": how["prog_id"]} if "prog_id" in how else {}
                with link.freplace(ext.programs["new_verdict"], arg, "pick_verdict", **kw):
                    assert _verdict(target) == AFTER, how
            assert _verdict(target) == BEFORE
    finally:
        target.unpin()


def test_ext_without_a_target_says_so(bpf_obj: Any) -> None:
    """Runs everywhere: the loader refuses before asking the kernel."""
    spec = bpfkit.load_spec(bpf_obj("link_freplace"))
    with pytest.raises(UsageError) as info:
        bpfkit.Collection(spec)
    msg = str(info.value)
    assert "an ext (freplace) program needs a target program" in msg
    assert "set_attach_target('pick_verdict', prog=TARGET)" in msg


def test_freplace_of_a_missing_function(bpf_obj: Any, target: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("link_freplace"))
    spec.programs["new_verdict"].set_attach_target("no_such_func", target)
    with pytest.raises(NotFoundError, match=r"has no function 'no_such_func' \(its BTF has .*pick_verdict"):
        bpfkit.Collection(spec)


def test_freplace_refusal_is_explained_on_the_host(bpf_obj: Any, target: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("link_freplace"))
    spec.programs["new_verdict"].set_attach_target("pick_verdict", target)
    try:
        bpfkit.Collection(spec).close()
    except VerifierError as exc:
        assert exc.errno == errno.EPERM
        assert "BPF trampoline programs (fentry/fexit/fmod_ret/lsm/freplace) need trampoline support" in str(exc)
    else:
        pytest.skip("this kernel loads freplace programs")
