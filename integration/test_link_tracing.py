# SPDX-License-Identifier: Apache-2.0
"""Raw tracepoints, BTF tracing programs (tp_btf, fentry, fexit, fmod_ret, lsm) and iterators.

Counts are exact: the programs count only what one thread does (``target_tid``, this test's
thread) for one syscall (getppid: each os.getppid() enters sys_enter once) or one function
(do_sys_openat2: each os.open() calls it once). On the host (6.18) raw tracepoints, tp_btf and
iterators work and fentry/fexit/fmod_ret/lsm are refused at load; those run in a VM kernel
(integration/vm.py --kernel 6.1 / 6.12).
"""

from __future__ import annotations

import errno
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import bpfkit
from bpfkit import asm, features, link
from bpfkit.features import probes
from bpfkit._kernel.consts import AttachType, LinkType, ProgType
from bpfkit.errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError, VerifierError
from bpfkit.program import Program, ProgramSpec

N = 7
GETPPID = 110  # x86_64 __NR_getppid
PIN_ROOT = "/sys/fs/bpf"
IN_VM = bool(os.environ.get("BPFKIT_VM_KERNEL"))
SLOW = 30 if IN_VM else 1  # Python under TCG emulation is far slower


def _kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


def _u64(raw: bytes | int) -> int:
    """A counter: typed (an int) from a map declared through BTF, else its bytes."""
    return raw if isinstance(raw, int) else struct.unpack("<Q", raw[:8])[0]


def _var(coll: Any, spec: Any, name: str) -> int:
    """A global in .bss, read back from the kernel's map."""
    v = spec.variables[name]
    raw = coll.maps[v.section][0]
    return int.from_bytes(raw[v.offset : v.offset + v.size], "little", signed=True)


def _load(bpf_obj: Any, name: str, programs: list[str], **variables: int) -> tuple[Any, Any]:
    spec = bpfkit.load_spec(bpf_obj(name))
    spec.variables["target_tid"].value = threading.get_native_id()
    for var, value in variables.items():
        spec.variables[var].value = value
    return spec, bpfkit.Collection(spec, programs=programs)


@pytest.fixture
def rawtp(bpf_obj: Any) -> Iterator[tuple[Any, Any]]:
    spec, coll = _load(bpf_obj, "tracing_rawtp", ["on_sys_enter", "on_sys_enter_other", "on_test_finish", "btf_sys_enter"],
                       target_nr=GETPPID, test_finish_err=-errno.ENOTTY)
    with coll:
        yield spec, coll


def hits(coll: Any) -> list[int]:
    return [_u64(coll.maps["hits"][i]) for i in range(4)]


def getppid(n: int = N) -> None:
    for _ in range(n):
        os.getppid()


@pytest.fixture(scope="module")
def pin_dir() -> Iterator[Path]:
    with open("/proc/self/mountinfo") as f:
        mounted = any(line.split()[4] == PIN_ROOT and " - bpf " in line for line in f)
    if not mounted:
        os.makedirs(PIN_ROOT, exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", PIN_ROOT], check=True)
    path = Path(PIN_ROOT) / f"bpfkit_test_tracing_{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        left = sorted(p.name for p in path.iterdir())
        for p in path.iterdir():
            p.unlink()
        path.rmdir()
        assert not left, f"tests left pins behind: {left}"


# --------------------------------------------------------------------- raw tracepoints
def test_raw_tracepoint_counts_exactly(rawtp: Any) -> None:
    _, coll = rawtp
    with link.raw_tracepoint("sys_enter", coll.programs["on_sys_enter"]) as lk:
        assert isinstance(lk, link.RawTracepointLink)
        getppid()
        other = threading.Thread(target=getppid)  # another thread: not counted
        other.start()
        other.join()
        assert hits(coll)[0] == N
    getppid()
    assert hits(coll)[0] == N, "the program still ran after close"


@pytest.mark.feature("raw_tracepoint_link")
def test_raw_tracepoint_info_and_ids(rawtp: Any) -> None:
    _, coll = rawtp
    prog = coll.programs["on_sys_enter"]
    with link.raw_tracepoint("sys_enter", prog) as lk:
        info = lk.info()
        assert info.type == LinkType.RAW_TRACEPOINT
        assert info.program_id == prog.id
        assert info.detail == link.RawTracepointInfo("sys_enter")
        assert any(i.id == info.id for i in link.iter_links())
        with link.link_from_id(info.id) as again:
            assert isinstance(again, link.RawTracepointLink)
            assert again.info().detail.name == "sys_enter"


@pytest.mark.feature("raw_tracepoint_link")
def test_raw_tracepoint_pin_outlives_close(rawtp: Any, pin_dir: Path) -> None:
    _, coll = rawtp
    path = str(pin_dir / "sys_enter")
    lk = link.raw_tracepoint("sys_enter", coll.programs["on_sys_enter"])
    lk.pin(path)
    lk.close()
    getppid()
    assert hits(coll)[0] == N, "the pinned link stopped when its object closed"
    with link.load_pinned_link(path) as pinned:
        assert isinstance(pinned, link.RawTracepointLink)
        assert pinned.pinned_path == path
        assert pinned.info().detail.name == "sys_enter"
        link_id = pinned.info().id
        pinned.unpin()
        assert not os.path.exists(path)
        getppid()
    # bpffs drops its reference after an RCU grace period and the link is freed from a work
    # queue: detaching after the last unpin/close is asynchronous (slow on 5.10 under TCG).
    _wait_link_gone(link_id)
    before = hits(coll)[0]
    assert before >= 2 * N
    getppid()
    assert hits(coll)[0] == before, "unpinned and closed, the program should have stopped"


def _wait_link_gone(link_id: int, timeout: float = 20.0 * SLOW) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            link.link_from_id(link_id).close()
        except NotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(f"link {link_id} still exists {timeout:.0f} s after its last reference went")


@pytest.mark.feature("raw_tracepoint_link")
def test_raw_tracepoint_update_and_detach_say_not_supported(rawtp: Any) -> None:
    _, coll = rawtp
    with link.raw_tracepoint("sys_enter", coll.programs["on_sys_enter"]) as lk:
        with pytest.raises(NotSupportedError, match="update of a raw_tracepoint link"):
            lk.update(coll.programs["on_sys_enter_other"])
        with pytest.raises(NotSupportedError, match="detach of a raw_tracepoint link"):
            lk.detach()
        getppid()  # still attached, still the first program
        assert hits(coll)[:2] == [N, 0]
    with pytest.raises(UsageError, match="closed"):
        lk.update(coll.programs["on_sys_enter_other"])


def test_two_raw_tracepoints_on_one_event(rawtp: Any) -> None:
    _, coll = rawtp
    with link.raw_tracepoint("sys_enter", coll.programs["on_sys_enter"]), \
            link.raw_tracepoint("sys_enter", coll.programs["on_sys_enter_other"]):
        getppid()
    assert hits(coll)[:2] == [N, N]


def test_raw_tracepoint_errors(rawtp: Any) -> None:
    _, coll = rawtp
    with pytest.raises(NotFoundError, match="no tracepoint 'no_such_tracepoint_xyz'"):
        link.raw_tracepoint("no_such_tracepoint_xyz", coll.programs["on_sys_enter"])
    with pytest.raises(UsageError, match="tp_btf programs: link.tp_btf"):
        link.raw_tracepoint("sys_enter", coll.programs["btf_sys_enter"])
    with pytest.raises(UsageError, match="raw_tp programs: link.raw_tracepoint"):
        link.attach_tracing(coll.programs["on_sys_enter"])


def test_raw_tracepoint_cookie(rawtp: Any, bpf_obj: Any) -> None:
    if not _kernel_at_least(6, 10):  # nor may a raw_tp program call bpf_get_attach_cookie there
        with pytest.raises(NotSupportedError, match="6.10"):
            link.raw_tracepoint("sys_enter", rawtp[1].programs["on_sys_enter"], cookie=42)
        return
    spec, coll = _load(bpf_obj, "tracing_rawtp", ["raw_sys_enter_cookie"], target_nr=GETPPID)
    with coll:
        with link.raw_tracepoint("sys_enter", coll.programs["raw_sys_enter_cookie"], cookie=0xC0FFEE):
            getppid(1)
        assert _var(coll, spec, "raw_cookie") == 0xC0FFEE


def _skb_program() -> Program:
    return Program(ProgramSpec("tracing_ret0", ProgType.SOCKET_FILTER, asm.return_imm(0)))


def test_writable_raw_tracepoint_changes_test_run_result(rawtp: Any) -> None:
    """bpf_test_finish(int *err) is writable: the program makes BPF_PROG_TEST_RUN fail with
    ENOTTY, for this thread only, while attached."""
    _, coll = rawtp
    packet = bytes(64)
    with _skb_program() as skb:
        assert skb.test_run(packet)[0] == 0
        with link.raw_tracepoint("bpf_test_finish", coll.programs["on_test_finish"]):
            with pytest.raises(KernelError) as caught:
                skb.test_run(packet)
            assert caught.value.errno == errno.ENOTTY
        assert skb.test_run(packet)[0] == 0
    assert hits(coll)[2] == 1


def test_writable_raw_tracepoint_needs_writable_event(rawtp: Any) -> None:
    _, coll = rawtp
    with pytest.raises(KernelError, match="not writable"):
        link.raw_tracepoint("sys_enter", coll.programs["on_test_finish"])


# ------------------------------------------------------------------------------ tp_btf
def test_tp_btf_counts_exactly(rawtp: Any) -> None:
    _, coll = rawtp
    prog = coll.programs["btf_sys_enter"]
    with link.tp_btf(prog) as lk:
        getppid()
        assert hits(coll)[3] == N
        info = lk.info()
        # tp_btf attaches as a raw tracepoint link (BPF_LINK_TYPE_RAW_TRACEPOINT).
        assert info.type == LinkType.RAW_TRACEPOINT and info.detail.name == "sys_enter"
        assert info.program_id == prog.id
    getppid()
    assert hits(coll)[3] == N
    with pytest.raises(UsageError, match="loaded as tp_btf, not fentry"):
        link.fentry(prog)


def test_tp_btf_cookie(rawtp: Any, bpf_obj: Any) -> None:
    if not _kernel_at_least(6, 10):
        with pytest.raises(NotSupportedError, match="6.10"):
            link.tp_btf(rawtp[1].programs["btf_sys_enter"], cookie=5)
        return
    spec, coll = _load(bpf_obj, "tracing_rawtp", ["btf_sys_enter_cookie"], target_nr=GETPPID)
    with coll:
        prog = coll.programs["btf_sys_enter_cookie"]
        with link.tp_btf(prog, cookie=77):
            getppid(1)
        assert _var(coll, spec, "btf_cookie") == 77


# -------------------------------------------------------------------------- auto-attach
def test_auto_attach_raw_tracepoints(rawtp: Any) -> None:
    _, coll = rawtp
    with coll.attach_all(programs=["on_sys_enter", "btf_sys_enter"]) as links:
        assert set(links) == {"on_sys_enter", "btf_sys_enter"}
        getppid()
    with link.attach_probe("rawtracepoint:sys_enter", coll.programs["on_sys_enter_other"]) as lk:
        assert lk.info().detail.name == "sys_enter"
        getppid()
    with link.attach_probe("rt:sys_enter", coll.programs["on_sys_enter"]):
        getppid()
    assert hits(coll) == [2 * N, N, 0, N]


def test_auto_attach_writable_section(rawtp: Any) -> None:
    _, coll = rawtp
    prog = coll.programs["on_test_finish"]
    assert prog.section == "raw_tp.w/bpf_test_finish"
    with link.attach_section(prog), _skb_program() as skb:
        with pytest.raises(KernelError):
            skb.test_run(bytes(64))


# ----------------------------------------------------------- fentry refused on the host
@pytest.mark.skipif(IN_VM, reason="the VM kernels load fentry programs")
def test_fentry_refusal_is_explained(bpf_obj: Any) -> None:
    if features.probe("tracing_programs").supported:
        pytest.skip("this kernel loads fentry programs")
    with pytest.raises(VerifierError) as caught:
        _load(bpf_obj, "tracing_fentry", ["open_entry"])
    text = str(caught.value)
    assert caught.value.errno == errno.EPERM
    assert "EPERM" in text and "open_entry" in text and "BPF trampoline" in text


# ------------------------------------------------------------------------------ iterators
# tracing_iter.bpf.o's programs and the iterator target each needs: a kernel may refuse one
# target (EPERM with an empty verifier log for iter/bpf_map_elem, seen on a 6.18 host) and load
# another, so each test marks the targets it needs and the fixture loads only their programs.
ITER_PROGRAMS = {"dump_task": "iter_task", "dump_elem": "iter_bpf_map_elem"}


@pytest.fixture
def iters(request: pytest.FixtureRequest, bpf_obj: Any) -> Iterator[Any]:
    marked = {name for mark in request.node.iter_markers("feature") for name in mark.args}
    programs = [prog for prog, target in ITER_PROGRAMS.items() if target in marked]
    assert programs, "mark the test with the iterator targets it needs: @pytest.mark.feature('iter_task')"
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("tracing_iter")), programs=programs) as coll:
        yield coll


def _task_lines(text: str) -> dict[int, tuple[int, str]]:
    lines = text.splitlines()
    assert lines[0] == "pid tgid comm"
    out = {}
    for line in lines[1:]:
        pid, tgid, comm = line.split(" ", 2)
        out[int(pid)] = (int(tgid), comm)
    return out


@pytest.mark.feature("iter_task")
def test_iter_task_reads_this_process(iters: Any) -> None:
    with link.iterate(iters.programs["dump_task"]) as it:
        tasks = _task_lines(it.read_all().decode())
        assert tasks[os.getpid()][0] == os.getpid()
        with open("/proc/self/comm") as f:
            assert tasks[os.getpid()][1] == f.read().strip()
        with it.open() as f1, it.open() as f2:  # two independent passes
            a, b = f1.read(), f2.read()
        assert _task_lines(a.decode()).keys() & _task_lines(b.decode()).keys() >= {os.getpid()}
        info = it.info()
        assert info.type == LinkType.ITER and info.detail.target == "task"


@pytest.mark.feature("iter_task")
@pytest.mark.skipif(not _kernel_at_least(6, 1), reason="task iterator parameters (tid/pid) need Linux 6.1")
def test_iter_task_of_one_process(iters: Any) -> None:
    with link.iterate(iters.programs["dump_task"], pid=os.getpid()) as it:
        tasks = _task_lines(it.read_all().decode())
        assert tasks and all(tgid == os.getpid() for tgid, _ in tasks.values())
        assert it.info().detail.pid == os.getpid()


@pytest.mark.feature("iter_task", "iter_bpf_map_elem")
def test_iter_map_elements(iters: Any) -> None:
    numbers = iters.maps["numbers"]
    for k in range(10):
        numbers[k] = k * k
    with link.iterate(iters.programs["dump_elem"], map=numbers) as it:
        pairs = dict(map(int, line.split()) for line in it.read_all().decode().splitlines())
        assert pairs == {k: k * k for k in range(10)}
        assert it.info().detail == link.IterInfo("bpf_map_elem", map_id=numbers.id)
    with pytest.raises(UsageError, match="pass map="):
        link.iterate(iters.programs["dump_elem"])
    with pytest.raises(UsageError, match="map= is for"):
        link.iterate(iters.programs["dump_task"], map=numbers)


@pytest.mark.feature("iter_task")
def test_iter_pinned_reads_as_file(iters: Any, pin_dir: Path) -> None:
    path = str(pin_dir / "tasks")
    with link.iterate(iters.programs["dump_task"]) as it:
        it.pin(path)
    try:
        # The pin is a readable file for any reader: cat runs one pass of the program.
        out = subprocess.run(["cat", path], capture_output=True, text=True, check=True, timeout=60 * SLOW).stdout
        tasks = _task_lines(out)
        assert os.getpid() in tasks
        with link.load_pinned_link(path) as again:
            assert isinstance(again, link.IterLink)
            assert again.info().detail.target == "task"
            assert os.getpid() in _task_lines(again.read_all().decode())
    finally:
        os.unlink(path)


@pytest.mark.feature("iter_task", "iter_bpf_map_elem")
def test_iter_auto_attach(iters: Any) -> None:
    with link.attach_section(iters.programs["dump_task"]) as it:
        assert os.getpid() in _task_lines(it.read_all().decode())
    with pytest.raises(UsageError, match="pass map="):
        link.attach_section(iters.programs["dump_elem"])


@pytest.mark.parametrize("prog", list(ITER_PROGRAMS))
def test_iterator_probe_agrees_with_a_real_program(bpf_obj: Any, prog: str) -> None:
    """The per-target probe (a minimal iter/TARGET program) answers what loading a real
    program of that target does on this kernel; its reason says what was loaded or refused."""
    result = features.probe(ITER_PROGRAMS[prog])
    try:
        with bpfkit.Collection(bpfkit.load_spec(bpf_obj("tracing_iter")), programs=[prog]):
            loaded = ""
    except BPFKitError as exc:
        loaded = str(exc)
    assert result.supported == (not loaded), (result, loaded)
    target = ITER_PROGRAMS[prog].removeprefix("iter_")
    assert f"iter/{target}" in result.reason and result.min_version in ("5.8", "5.9")


def test_iterator_probe_of_a_target_the_kernel_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    # A target no kernel declares, looked up for real in vmlinux BTF.
    monkeypatch.setitem(probes.ITER_TARGET_VERSIONS, "bpfkit_nowhere", "99.0")
    monkeypatch.setattr(probes, "_iter_ids", (None, {}))
    supported, reason = probes._iter_probe("bpfkit_nowhere")()
    assert not supported and reason.startswith("vmlinux BTF has no function bpf_iter_bpfkit_nowhere: no bpfkit_nowhere "
                                               "iterator in this kernel (Linux 99.0+")
    assert probes._iter_target_id("task") > 0  # the other targets' ids came from the same scan


def _as_nobody(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """``cmd`` run as user nobody (uid 65534, no capabilities), skipping where nobody cannot
    reach this interpreter (a checkout or Python under a 0700 /root)."""
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    if subprocess.run([*drop, sys.executable, "-c", "import bpfkit"], capture_output=True,
                      env=dict(os.environ, HOME="/"), cwd="/").returncode:
        pytest.skip(f"user nobody cannot run {sys.executable} with bpfkit (a directory on the way is not "
                    "searchable by others)")
    return subprocess.run([*drop, *cmd], capture_output=True, text=True, cwd="/", timeout=60 * SLOW,
                          env=dict(os.environ, HOME="/", PYTHONDONTWRITEBYTECODE="1"))


def test_cli_features_reports_iterator_targets() -> None:
    """`bpfkit features` lists each iterator target in its own group; as root here all load. A
    refusal is real without privileges: the kernel refuses the load (EPERM) before
    verification, with an empty log, as the kernel that refuses iter/bpf_map_elem does."""
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "features"], capture_output=True, text=True,
                          timeout=60 * SLOW)
    assert proc.returncode == 0, proc.stderr
    group = proc.stdout.split("\niterator targets:\n", 1)[1].split("\n\n")[0].splitlines()
    rows = {line.split()[0]: line.split()[1] for line in group}
    assert set(rows) == set(probes.ITERATORS) and rows["iter_task"] == "yes"
    proc = _as_nobody([sys.executable, "-m", "bpfkit.cli", "features", "--json", "iter_task", "iter_bpf_map_elem"])
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    for name in ("iter_task", "iter_bpf_map_elem"):
        assert table[name]["supported"] is False
        assert f"iter/{name.removeprefix('iter_')} program: EPERM" in table[name]["reason"]
        assert "empty verifier log: the kernel refuses it before verification" in table[name]["reason"]
    unknown = subprocess.run([sys.executable, "-m", "bpfkit.cli", "features", "iter_nope"], capture_output=True,
                             text=True, timeout=60 * SLOW)
    assert unknown.returncode == 2 and "unknown kernel feature 'iter_nope'" in unknown.stderr


# A plugin for the pytest runs below: the kernel refuses iter/bpf_map_elem and loads iter/task.
# Faked: no kernel that refuses one target and loads another can be produced on this host.
REFUSE_MAP_ELEM = """
from bpfkit.features import probes
p = probes.ITERATORS["iter_bpf_map_elem"]
probes.ITERATORS[p.name] = probes.Probe(p.name, p.group, p.min_version, p.what, p.how,
                                        lambda: (False, "FAKED: EPERM with an empty verifier log"))
"""


def test_suite_skips_what_a_refused_iterator_target_needs(tmp_path: Path) -> None:
    if os.environ.get("BPFKIT_REFUSE_MAP_ELEM_PLUGIN"):
        pytest.skip("already inside the run this test starts")
    (tmp_path / "refuse_map_elem.py").write_text(REFUSE_MAP_ELEM)
    env = dict(os.environ, BPFKIT_REFUSE_MAP_ELEM_PLUGIN="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    from integration.test_docs_examples import REPO, RUNNABLE

    docs = [f"integration/test_docs_examples.py::test_example_runs[{b.id}]" for b in RUNNABLE
            if "link.iterate(" in b.code]
    assert docs, "no runnable doc example iterates"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "refuse_map_elem", "-p", "no:cacheprovider", "-rs",
                           "-q", f"--basetemp={tmp_path / 'run'}", "integration/test_link_tracing.py", *docs,
                           "-k", "test_iter_ or test_example_runs"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600 * SLOW)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    why = "kernel lacks iter_bpf_map_elem: FAKED: EPERM with an empty verifier log"
    assert sum(why in line for line in skipped) >= 2, skipped  # test_iter_map_elements, test_iter_auto_attach
    assert any("this kernel lacks iter_bpf_map_elem: FAKED" in line for line in skipped), skipped  # the doc block
    assert " error" not in out.splitlines()[-1], out[-3000:]


# ------------------------------------------------------------------- VM: trampolines
def _trampoline_coll(bpf_obj: Any, programs: list[str], **variables: int) -> tuple[Any, Any]:
    if not features.probe("tracing_programs").supported:
        pytest.skip(f"no fentry here: {features.probe('tracing_programs').reason}")
    return _load(bpf_obj, "tracing_fentry", programs, **variables)


def _open_in(dirfd: int, n: int) -> list[int]:
    fds = []
    try:
        for _ in range(n):
            fds.append(os.open("probe-file", os.O_RDONLY, dir_fd=dirfd))
    finally:
        for fd in fds:
            os.close(fd)
    return fds


@pytest.fixture
def probe_dir() -> Iterator[int]:
    with tempfile.TemporaryDirectory() as d:
        Path(d, "probe-file").write_text("x")
        dirfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield dirfd
        finally:
            os.close(dirfd)


@pytest.mark.vm
def test_fentry_fexit_counts_args_and_return(bpf_obj: Any, probe_dir: int) -> None:
    spec, coll = _trampoline_coll(bpf_obj, ["open_entry", "open_exit"])
    with coll:
        with link.fentry(coll.programs["open_entry"]) as entry, link.fexit(coll.programs["open_exit"]) as exit_:
            fds = _open_in(probe_dir, N)
            assert _var(coll, spec, "entries") == N
            assert _var(coll, spec, "exits") == N
            assert _var(coll, spec, "last_dfd") == probe_dir
            assert _var(coll, spec, "last_ret") == fds[-1]
            info = entry.info()
            assert info.type == LinkType.TRACING
            assert info.detail.attach_type == AttachType.TRACE_FENTRY
            assert exit_.info().detail.attach_type == AttachType.TRACE_FEXIT
            if info.detail.target_btf_id:  # reported since about 6.0
                assert info.detail.target_btf_id == coll.programs["open_entry"].spec.attach_btf_id
            with pytest.raises(NotSupportedError, match="update of a tracing link"):
                entry.update(coll.programs["open_exit"])
        _open_in(probe_dir, 2)
        assert _var(coll, spec, "entries") == N and _var(coll, spec, "exits") == N


@pytest.mark.vm
def test_fentry_attach_twice_and_again(bpf_obj: Any, probe_dir: int) -> None:
    spec, coll = _trampoline_coll(bpf_obj, ["open_entry"])
    with coll:
        prog = coll.programs["open_entry"]
        with link.fentry(prog):
            with pytest.raises(KernelError, match="already attached|attached before"):
                link.fentry(prog)
        if _kernel_at_least(6, 1):  # re-attach after the link closed (about 6.0)
            with link.attach_tracing(prog):
                _open_in(probe_dir, 3)
            assert _var(coll, spec, "entries") == 3


@pytest.mark.vm
def test_fentry_cookie(bpf_obj: Any, probe_dir: int) -> None:
    if not _kernel_at_least(5, 19):
        pytest.skip("bpf_get_attach_cookie in fentry programs needs 5.19")
    spec, coll = _trampoline_coll(bpf_obj, ["open_entry_cookie"])
    with coll:
        with link.fentry(coll.programs["open_entry_cookie"], cookie=0xFEED):
            _open_in(probe_dir, 1)
        assert _var(coll, spec, "last_cookie") == 0xFEED


@pytest.mark.vm
def test_fentry_pin_and_auto_attach(bpf_obj: Any, probe_dir: int, pin_dir: Path) -> None:
    spec, coll = _trampoline_coll(bpf_obj, ["open_entry", "open_exit"])
    with coll:
        path = str(pin_dir / "open_entry")
        with link.attach_all(coll) as links:
            assert set(links) == {"open_entry", "open_exit"}
            links["open_entry"].pin(path)
        _open_in(probe_dir, 2)
        assert _var(coll, spec, "entries") == 2 and _var(coll, spec, "exits") == 0
        with link.load_pinned_link(path) as pinned:
            assert isinstance(pinned, link.TracingLink)
            pinned.unpin()
    # A fresh load: before about 6.0 a tracing program attaches once per load.
    spec, coll = _trampoline_coll(bpf_obj, ["open_entry", "open_exit"])
    with coll:
        with link.attach_probe("fexit:do_sys_openat2", coll.programs["open_exit"]):
            _open_in(probe_dir, 1)
        assert _var(coll, spec, "exits") == 1
        with pytest.raises(UsageError, match="loaded for 'do_sys_openat2'"):
            link.attach_probe("fentry:vfs_read", coll.programs["open_entry"])
        with pytest.raises(UsageError, match="not fexit"):
            link.attach_probe("fexit:do_sys_openat2", coll.programs["open_entry"])


@pytest.mark.vm
def test_set_attach_target_before_load(bpf_obj: Any, probe_dir: int) -> None:
    if not features.probe("tracing_programs").supported:
        pytest.skip(f"no fentry here: {features.probe('tracing_programs').reason}")
    spec = bpfkit.load_spec(bpf_obj("tracing_fentry"))
    spec.variables["target_tid"].value = threading.get_native_id()
    spec.programs["open_entry"].set_attach_target("no_such_function_xyz")
    with pytest.raises(NotFoundError, match="no_such_function_xyz"):
        bpfkit.Collection(spec, programs=["open_entry"])
    spec.programs["open_entry"].set_attach_target("do_sys_openat2")
    with bpfkit.Collection(spec, programs=["open_entry"]) as coll, link.fentry(coll.programs["open_entry"]):
        _open_in(probe_dir, 2)
        assert _var(coll, spec, "entries") == 2


def test_fentry_without_target_needs_one(bpf_obj: Any) -> None:
    spec = bpfkit.load_spec(bpf_obj("tracing_fentry"))
    with pytest.raises(UsageError, match=r"names no attach target.*set_attach_target"):
        bpfkit.Collection(spec, programs=["any_entry"])
    spec.programs["any_entry"].set_attach_target("no_such_module_xyz:do_sys_openat2")
    with pytest.raises(BPFKitError, match="no_such_module_xyz"):
        bpfkit.Collection(spec, programs=["any_entry"])


@pytest.mark.vm
def test_fentry_target_set_before_load_and_auto_attached(bpf_obj: Any, probe_dir: int) -> None:
    if not features.probe("tracing_programs").supported:
        pytest.skip(f"no fentry here: {features.probe('tracing_programs').reason}")
    spec = bpfkit.load_spec(bpf_obj("tracing_fentry"))
    spec.programs["any_entry"].set_attach_target("do_sys_openat2")
    with bpfkit.Collection(spec, programs=["any_entry"]) as coll, coll.attach_all() as links:
        assert set(links) == {"any_entry"}  # SEC("fentry") names no target, the program has one
        before = _var(coll, spec, "any_entries")
        _open_in(probe_dir, 3)
        assert _var(coll, spec, "any_entries") - before >= 3  # every thread's opens count


def _module_function() -> tuple[str, str, int] | None:
    """(module, function, module BTF id) of a traceable function in a loaded module with BTF."""
    from bpfkit._kernel import bpf as _kbpf
    from bpfkit._kernel import sysfs_btf as _sysfs_btf
    from bpfkit import kernel_btf as kbtf
    from bpfkit.btf.types import Func

    modules = _sysfs_btf.module_btf_names()
    if not modules:
        return None
    try:
        with open("/sys/kernel/tracing/available_filter_functions") as f:
            traceable = {}
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1].startswith("["):
                    traceable.setdefault(parts[1].strip("[]"), set()).add(parts[0])
    except OSError:
        return None
    for mod in modules:
        names = traceable.get(mod, set())
        btf = kbtf.module(mod)
        for t in btf.types[btf.first_id:]:
            if isinstance(t, Func) and t.name in names:
                with _kbpf.kernel_btf_fd(mod) as fd:
                    return mod, t.name, _kbpf.btf_info(fd)[0]
    return None


@pytest.mark.vm
def test_fentry_on_module_function(bpf_obj: Any) -> None:
    if not features.probe("tracing_programs").supported:
        pytest.skip(f"no fentry here: {features.probe('tracing_programs').reason}")
    found = _module_function()
    if found is None:
        pytest.skip("no loaded module with BTF has a traceable function")
    module, func, btf_id = found
    spec = bpfkit.load_spec(bpf_obj("tracing_fentry"))
    spec.programs["any_entry"].set_attach_target(f"{module}:{func}")
    with bpfkit.Collection(spec, programs=["any_entry"]) as coll, link.fentry(coll.programs["any_entry"]) as lk:
        detail = lk.info().detail
        if detail.target_obj_id:  # reported since about 6.0
            assert detail.target_obj_id == btf_id, f"{module}:{func}"
    # A bare name is looked up in vmlinux, then in the modules (as libbpf does).
    spec.programs["any_entry"].set_attach_target(func)
    with bpfkit.Collection(spec, programs=["any_entry"]) as coll, link.fentry(coll.programs["any_entry"]):
        pass


@pytest.mark.vm
def test_fmod_ret_replaces_return_value(bpf_obj: Any, probe_dir: int) -> None:
    """fmod_ret on security_file_open: a non-zero return skips the function and is its result,
    so this thread's open() fails with EACCES while attached (other threads are left alone)."""
    spec, coll = _trampoline_coll(bpf_obj, ["deny_open"], fmod_errno=errno.EACCES)
    with coll:
        with link.fmod_ret(coll.programs["deny_open"]) as lk:
            with pytest.raises(PermissionError) as caught:
                os.open("probe-file", os.O_RDONLY, dir_fd=probe_dir)
            assert lk.info().detail.attach_type == AttachType.MODIFY_RETURN
        assert caught.value.errno == errno.EACCES
        _open_in(probe_dir, 1)
        assert _var(coll, spec, "fmod_calls") == 1


def _bpf_lsm_active() -> str:
    """'' when the bpf LSM runs, else why not."""
    path = "/sys/kernel/security/lsm"
    if not os.path.exists(path):
        os.makedirs("/sys/kernel/security", exist_ok=True)
        subprocess.run(["mount", "-t", "securityfs", "securityfs", "/sys/kernel/security"], check=False)
    try:
        with open(path) as f:
            active = f.read().strip().split(",")
    except OSError as exc:
        return f"cannot read {path}: {exc}"
    if "bpf" not in active:
        return f"the bpf LSM is not active (lsm={','.join(active)}): needs CONFIG_BPF_LSM and bpf in lsm="
    return ""


@pytest.mark.vm
def test_lsm_file_open_denies(bpf_obj: Any, probe_dir: int) -> None:
    why = _bpf_lsm_active()
    if why:
        pytest.skip(why)
    spec, coll = _trampoline_coll(bpf_obj, ["lsm_file_open"])  # it denies with EACCES
    with coll:
        with link.lsm(coll.programs["lsm_file_open"]):
            with pytest.raises(PermissionError):
                _open_in(probe_dir, 1)
        _open_in(probe_dir, 1)
        assert _var(coll, spec, "lsm_calls") == 1
