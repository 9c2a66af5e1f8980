# SPDX-License-Identifier: Apache-2.0
"""Shared pytest plumbing: markers that skip with a reason naming what is missing.

    @pytest.mark.root                  needs root (CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN)
    @pytest.mark.feature("uprobe_pmu") needs a kernel feature, judged by bpfkit's own probe
    @pytest.mark.vm                    runs only inside a VM kernel (integration/vm.py)
    @pytest.mark.vm("6.1")             ... and only on that VM kernel
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
BPF_DIR = REPO / "bpf"
BPF_OUT = BPF_DIR / ".output"


def package_dir() -> Path:
    """The directory of the bpfkit being tested: the checkout's bpfkit/, or an installed wheel's
    when the suite runs from a copy of the checkout without it (scripts/wheel-legs.sh)."""
    import bpfkit

    return Path(bpfkit.__file__).resolve().parent


def source_path(rel: str) -> Path:
    """The checkout's file REL ("bpfkit/sections.py", "bpf/Makefile") where this run has it:
    bpfkit/'s in the bpfkit being tested (package_dir()), the rest in the checkout."""
    top, _, rest = rel.partition("/")
    return (package_dir() / rest if rest else package_dir()) if top == "bpfkit" else REPO / rel


def checkout_relative(path: Path) -> str:
    """PATH as the checkout names it ("bpfkit/elf/reader.py"), wherever source_path found it."""
    package = package_dir()
    return (path.relative_to(package.parent) if path.is_relative_to(package) else path.relative_to(REPO)).as_posix()


def console_script(name: str = "bpfkit") -> str:
    """The console script ``name`` of the bpfkit being tested: the one installed beside the
    running interpreter (the checkout's venv, or the venv of an installed wheel:
    scripts/wheel-legs.sh), never a path inside the checkout."""
    return os.path.join(os.path.dirname(sys.executable), name)


def bpf_ids_held_by(pid: int) -> tuple[set[int], set[int]]:
    """(program ids, link ids) of the bpf objects process ``pid`` holds fds of, from
    /proc/PID/fdinfo (its ``prog_id:`` and ``link_id:`` lines): what a command the test started
    made, known apart from every other BPF user's objects (another copy of the suite running
    the same example, Cilium, systemd's cgroup programs) without looking at names."""
    progs: set[int] = set()
    links: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                text = f.read()
        except OSError:  # closed meanwhile
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "prog_id":
                progs.add(int(value))
            elif key == "link_id":
                links.add(int(value))
    return progs, links


def links_running(progs: set[int], links: set[int]) -> list[tuple[str, object]]:
    """(program name, LinkInfo) of the system's links that are one of ``links`` or run one of
    ``progs``: ids a test's own command held or reported, never names other users share."""
    from bpfkit import link
    from bpfkit.program import Program

    found: list[tuple[str, object]] = []
    for info in link.iter_links():
        if info.id not in links and info.program_id not in progs:
            continue
        try:
            with Program.from_id(info.program_id) as prog:
                name = prog.name
        except Exception:  # noqa: BLE001 - a program that went away meanwhile
            name = "?"
        found.append((name, info))
    return found


def compile_bytecode() -> None:
    """Write bpfkit's .pyc files: the tests start many `python -m bpfkit.cli` processes, and
    with PYTHONDONTWRITEBYTECODE set (as on the CI host) each would compile every module
    again (about 0.1 s here, seconds in an emulated VM). Harmless where the tree is read-only
    (a VM guest: integration/vm.py compiles on the host before booting)."""
    import compileall

    compileall.compile_dir(str(package_dir()), quiet=2, workers=0)


def pytest_sessionstart(session: pytest.Session) -> None:
    # A run started in the background by a non-interactive shell (`scripts/wheel-legs.sh &`)
    # inherits SIGINT ignored (POSIX: asynchronous lists ignore it without job control), and an
    # ignored signal stays ignored across exec: the tools the tests interrupt with SIGINT would
    # never see it. Python's own handler is reset to the default in the children instead.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    compile_bytecode()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") and os.geteuid() != 0:
        pytest.skip("needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)")
    vm = item.get_closest_marker("vm")
    if vm is not None:
        running = os.environ.get("BPFKIT_VM_KERNEL")
        if not running:
            pytest.skip("needs a VM kernel: run through integration/vm.py")
        if vm.args and running not in vm.args:
            pytest.skip(f"needs VM kernel {' or '.join(vm.args)} (this is {running})")
    for mark in item.iter_markers("feature"):
        from bpfkit import features

        for name in mark.args:
            result = features.probe(name)
            if not result.supported:
                pytest.skip(f"kernel lacks {name}: {result.reason}")


_fuzz_seed: list[int] = []


def fuzz_seed() -> int:
    """The seed of this run's fuzz cases (tests/test_fuzz_elf.py): $BPFKIT_FUZZ_SEED, else a
    fresh random one, shown in pytest's header so a failing run can be replayed."""
    if not _fuzz_seed:
        given = os.environ.get("BPFKIT_FUZZ_SEED", "").strip()
        _fuzz_seed.append(int(given, 0) if given else int.from_bytes(os.urandom(4), "little"))
    return _fuzz_seed[0]


def pytest_report_header(config: pytest.Config) -> list[str]:
    import bpfkit

    n = fuzz_seed()
    # Which bpfkit runs: the checkout's, or an installed wheel's (scripts/wheel-legs.sh).
    return [f"bpfkit fuzz seed: {n} (replay with BPFKIT_FUZZ_SEED={n})", f"bpfkit {bpfkit.__version__} from {bpfkit.__file__}"]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    # Also in -q runs (no header): the seed of a run that fuzzed.
    if _fuzz_seed:
        n = _fuzz_seed[0]
        terminalreporter.write_line(f"bpfkit fuzz seed: {n} (replay with BPFKIT_FUZZ_SEED={n})")


_built = False


def bpf_object(name: str) -> Path:
    """Path of bpf/.output/NAME.bpf.o, building bpf/ once per session (a no-op when current)."""
    global _built
    if not _built:
        proc = subprocess.run(["make", "-s", "-C", str(BPF_DIR)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"building bpf/ failed:\n{proc.stderr[-3000:]}")
        _built = True
    path = BPF_OUT / f"{name}.bpf.o"
    if not path.exists():
        pytest.fail(f"{path} was not built (is bpf/{name}.bpf.c there?)")
    return path


@contextlib.contextmanager
def congestion_control_names() -> Iterator[None]:
    """The TCP congestion-control names the tests register (bpfkit_reno, bpfkit_reno2, ...) to
    the caller alone: the kernel keeps them machine-wide (one tcp_congestion_ops list), so two
    copies of the suite take turns (an flock on one file of the machine's temporary directory)."""
    import fcntl
    import tempfile

    with open(os.path.join(tempfile.gettempdir(), "bpfkit-tests-tcp-congestion.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def bpf_obj():
    """``bpf_obj("minimal")`` -> Path of the compiled object."""
    return bpf_object


@pytest.fixture
def sleeper() -> Iterator[int]:
    """The pid of a `sleep 300` (a target for probes' pid filters), killed after the test."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def start_attached(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    """Start a ``bpfkit attach`` command (stdout and stderr merged) and read its lines until it
    says it is attached (``... Ctrl-C or SIGTERM to detach``); fails with its output if it
    ends first. The caller stops it (SIGTERM) and reads the rest."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if "Ctrl-C or SIGTERM" in line:
            return proc, seen
    proc.wait()
    pytest.fail(f"{' '.join(cmd[:4])} ... exited {proc.returncode} before attaching:\n{''.join(seen)[-3000:]}")
