# SPDX-License-Identifier: Apache-2.0
"""Sampling programs (SEC("perf_event")) on real counters: bpfkit.link.perf_event_sample.

bpf/sampling_count.bpf.c counts samples per CPU (``samples``, a per-CPU array), sums the sample
periods (``periods``) and counts samples per sampled process (``by_pid``, keyed by tgid). The
tests make the work themselves: a busy loop in this process, a busy child process, a child that
touches N new pages. This host has no hardware PMU (a VM: "PMU not available due to
virtualization"), so the hardware tests check the error message; where a PMU exists they sample
cycles for real.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import bpf_ids_held_by, links_running

from bpfkit import features, link
from bpfkit._kernel import perf as _perf
from bpfkit._kernel.cpus import online_cpus
from bpfkit.errors import NotSupportedError, UsageError

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
TIMEOUT = 900 if os.environ.get("BPFKIT_VM_KERNEL") else 60
SLOW = 20 if os.environ.get("BPFKIT_VM_KERNEL") else 1  # TCG emulation: wider windows


@pytest.fixture
def sampler(bpf_obj: Any) -> Iterator[Any]:
    import bpfkit

    spec = bpfkit.load_spec(str(bpf_obj("sampling_count")))
    with bpfkit.Collection(spec) as coll:
        yield coll


def _u64(raw: Any) -> int:
    return raw if isinstance(raw, int) else struct.unpack("<Q", bytes(raw)[:8])[0]


def per_cpu(coll: Any, name: str = "samples") -> list[int]:
    return [_u64(v) for v in coll.maps[name].lookup(0)]


def by_pid(coll: Any) -> dict[int, int]:
    out = {}
    for key, value in coll.maps["by_pid"].items():
        pid = key if isinstance(key, int) else struct.unpack("<I", bytes(key))[0]
        out[pid] = _u64(value)
    return out


@contextlib.contextmanager
def spinning(cpus: list[int]) -> Iterator[None]:
    """One busy child pinned to each of ``cpus``: a CPU left idle may see no cpu-clock
    samples at all (measured: 0 on an idle CPU of the 2-CPU host)."""
    children = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
                for cpu in cpus]
    try:
        yield
    finally:
        for child in children:
            child.kill()
            child.wait()


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class Child:
    """A Python child that waits for a line on stdin, then runs ``code`` and exits: the test
    attaches to its pid in between, so the child's work is all sampled."""

    def __init__(self, code: str) -> None:
        script = "import sys\nsys.stdin.readline()\n" + textwrap.dedent(code)
        self.proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def go(self) -> str:
        out, _ = self.proc.communicate("go\n", timeout=TIMEOUT)
        assert self.proc.returncode == 0
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def child_factory() -> Iterator[Any]:
    made: list[Child] = []

    def make(code: str) -> Child:
        made.append(Child(code))
        return made[-1]

    yield make
    for c in made:
        c.kill()


# ---------------------------------------------------------------------------- per CPU
def _need_perf_link(mode: str) -> None:
    if mode == "link" and not link.have_perf_link():
        pytest.skip(f"no perf_event bpf_link: {features.probe('perf_link').reason}")


@pytest.mark.parametrize("mode", ["link", "ioctl", "auto"])
def test_cpu_clock_frequency_on_every_cpu(sampler: Any, mode: str) -> None:
    _need_perf_link(mode)
    prog = sampler.programs["on_sample"]
    freq, seconds = 200, 0.6 * SLOW
    cpus = online_cpus()
    opened = time.monotonic()
    with link.perf_event_sample(prog, link.SoftwareEvent.CPU_CLOCK, freq=freq, mode=mode) as group:
        assert isinstance(group, link.LinkGroup) and len(group) == len(cpus)
        uses_link = mode == "link" or (mode == "auto" and link.have_perf_link())
        want = link.PerfEventLink if uses_link else link.PerfEventIoctlLink
        assert all(type(lk) is want for lk in group)
        assert "cpu-clock 200 Hz" in group.description
        with spinning(cpus):
            start = time.monotonic()
            busy(seconds)
            elapsed = time.monotonic() - start
    enabled = time.monotonic() - opened
    after = per_cpu(sampler)
    time.sleep(0.05)
    assert per_cpu(sampler) == after, "samples kept coming after close"
    # A CPU's cpu-clock event ticks for as long as it is enabled, spinning or not: at least
    # through the busy loop, at most from the group's opening to its close (starting and
    # stopping the spinners takes seconds on a loaded host: 381 samples seen for 0.6 s busy).
    for cpu in cpus:
        assert 0.3 * freq * elapsed < after[cpu] < 1.5 * freq * enabled + 5, (cpu, after, elapsed, enabled)
    assert by_pid(sampler).get(os.getpid(), 0) > 0  # the busy loop was sampled
    periods = per_cpu(sampler, "periods")
    # cpu-clock counts ns: the periods of one CPU add up to about the time it was sampled.
    assert all(0.3 * elapsed * 1e9 < p < 2 * elapsed * 1e9 for p, c in zip(periods, after) if c), periods


def test_link_info_names_the_software_event(sampler: Any) -> None:
    _need_perf_link("link")
    prog = sampler.programs["on_sample"]
    with link.perf_event_sample(prog, "page-faults", period=1000, cpu=0, mode="link") as lk:
        assert isinstance(lk, link.PerfEventLink)
        info = lk.info()
        assert info.type_name == "perf_event"
        detail = info.detail.detail if info.detail is not None else None
        if detail is not None:  # reported since 6.6
            assert (detail.type, detail.config) == (1, 2)


def test_one_cpu_only(sampler: Any) -> None:
    prog = sampler.programs["on_sample"]
    cpu = online_cpus()[-1]
    with link.perf_event_sample(prog, "cpu-clock", freq=500, cpu=cpu) as lk:
        assert not isinstance(lk, link.LinkGroup)
        with spinning([cpu]):
            busy(0.2 * SLOW)
    counts = per_cpu(sampler)
    assert counts[cpu] > 0 and sum(counts) == counts[cpu], counts


# --------------------------------------------------------------------------- per task
def test_task_clock_by_period_follows_one_process(sampler: Any, child_factory: Any) -> None:
    prog = sampler.programs["on_sample"]
    child = child_factory("import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n")
    period = 1_000_000  # 1 ms of the task's CPU time
    with link.perf_event_sample(prog, "task-clock", period=period, pid=child.pid) as lk:
        assert "pid" in lk.description
        busy(0.1)  # this process runs too: it must not be sampled
        child.go()
    seen = by_pid(sampler)
    assert set(seen) == {child.pid}, seen
    # ~300 ms of CPU time at 1 ms a sample (plus interpreter start-up and exit).
    assert 150 <= seen[child.pid] <= 2000 * SLOW, seen
    assert sum(per_cpu(sampler, "periods")) == period * seen[child.pid]  # a fixed period


def test_page_faults_by_period_one(sampler: Any, child_factory: Any) -> None:
    prog = sampler.programs["on_sample"]
    pages = 256
    child = child_factory(f"""
        import mmap
        m = mmap.mmap(-1, {pages} * mmap.PAGESIZE)
        for i in range({pages}):
            m[i * mmap.PAGESIZE] = 1
        m.close()
    """)
    with link.perf_event_sample(prog, link.SoftwareEvent.PAGE_FAULTS, period=1, pid=child.pid):
        child.go()
    seen = by_pid(sampler)
    assert set(seen) == {child.pid} and seen[child.pid] >= pages, seen


def test_inherit_follows_children_forked_after_attach(sampler: Any, child_factory: Any) -> None:
    prog = sampler.programs["on_sample"]
    child = child_factory("""
        import os, time
        pid = os.fork()
        if pid == 0:
            end = time.process_time() + 0.1
            while time.process_time() < end: pass
            os._exit(0)
        os.waitpid(pid, 0)
        print(pid)
    """)
    with link.perf_event_sample(prog, "task-clock", period=1_000_000, pid=child.pid, inherit=True):
        grandchild = int(child.go())
    seen = by_pid(sampler)
    assert seen.get(grandchild, 0) >= 20, (grandchild, seen)


# --------------------------------------------------------------------------- hardware
def test_hardware_cycles_or_a_clear_message(sampler: Any) -> None:
    prog = sampler.programs["on_sample"]
    pmu = features.probe("hardware_pmu")
    if pmu.supported:
        with link.perf_event_sample(prog, link.HardwareEvent.CPU_CYCLES, period=1_000_000):
            busy(0.2 * SLOW)
        assert sum(per_cpu(sampler)) > 0
        return
    assert "no hardware PMU (virtual machine?)" in pmu.reason
    first = online_cpus()[0]
    with pytest.raises(NotSupportedError) as info:
        link.perf_event_sample(prog, "cycles", period=1_000_000)
    text = str(info.value)
    assert f"hardware event cycles on CPU {first}" in text, text
    assert "no hardware PMU (virtual machine?)" in text and "ENOENT" in text, text
    with pytest.raises(NotSupportedError, match=r"hardware event instructions on pid \d+ is not supported: .*no hardware PMU"):
        link.perf_event_sample(prog, "hardware:instructions", freq=99, pid=os.getpid())


# ----------------------------------------------------------------------------- errors
def test_frequency_above_the_kernel_maximum(sampler: Any) -> None:
    prog = sampler.programs["on_sample"]
    limit = _perf.max_sample_rate()
    assert limit and limit > 0
    with pytest.raises(UsageError) as info:
        link.perf_event_sample(prog, "cpu-clock", freq=limit + 1)
    text = str(info.value)
    assert f"{limit + 1} Hz is above kernel.perf_event_max_sample_rate ({limit} Hz)" in text, text
    # The limit itself is accepted.
    with link.perf_event_sample(prog, "cpu-clock", freq=limit, cpu=0):
        pass


def test_failure_on_a_later_cpu_closes_the_earlier_ones(sampler: Any) -> None:
    prog = sampler.programs["on_sample"]
    absent = max(online_cpus()) + 1000  # perf_event_open: EINVAL (no such CPU)
    with pytest.raises(UsageError, match=f"CPU {absent} is not online"):
        link.perf_event_sample(prog, "cpu-clock", freq=1000, cpu=[*online_cpus(), absent])
    counts = per_cpu(sampler)
    busy(0.05)
    assert per_cpu(sampler) == counts  # the events made for the online CPUs are gone
    # (the autouse fixture checks no perf or bpf fd is left open)


def test_wrong_program_type() -> None:
    from bpfkit import asm
    from bpfkit._kernel.consts import ProgType
    from bpfkit.program import Program, ProgramSpec

    with Program(ProgramSpec("tp_prog", ProgType.TRACEPOINT, asm.return_imm(0))) as prog:
        with pytest.raises(UsageError, match="sampling needs a perf_event program"):
            link.perf_event_sample(prog, "cpu-clock", freq=99)


EMFILE_SCRIPT = """
import os, resource, sys, bpfkit
from bpfkit import link
from bpfkit.errors import KernelError
spec = bpfkit.load_spec(sys.argv[1])
with bpfkit.Collection(spec) as coll:
    link.have_perf_link()  # the cached feature probe needs fds: run it before the limit
    before = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    free = [i for i in range(10000) if i not in before]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Room for about one CPU's perf event and bpf_link (the lowest free fds), not for four
    # (in ioctl mode, before 5.15, an event is one fd).
    resource.setrlimit(resource.RLIMIT_NOFILE, (free[1] + 1, hard))
    try:
        link.perf_event_sample(coll.programs["on_sample"], "cpu-clock", freq=99, cpu=[0, 0, 0, 0])
    except KernelError as exc:
        print("ERROR", exc)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    after = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    print("LEAKED", sorted(set(after) - set(before)))
"""


def test_out_of_file_descriptors_half_way(bpf_obj: Any) -> None:
    # A real EMFILE, in a child so the limit cannot disturb this process.
    proc = subprocess.run([sys.executable, "-c", EMFILE_SCRIPT, str(bpf_obj("sampling_count"))],
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert "EMFILE" in lines["ERROR"], lines
    assert re.search(r"out of file descriptors after [123] perf event\(s\)", lines["ERROR"]), lines
    assert lines["LEAKED"] == "[]", lines


# -------------------------------------------------------------------------- probe specs
def test_attach_probe_specs(sampler: Any) -> None:
    prog = sampler.programs["on_sample"]
    with link.attach_probe("profile:hz:99", prog) as lk:
        assert len(lk) == len(online_cpus()) and "cpu-clock 99 Hz" in lk.description
    with link.attach_probe("interval:ms:10", prog) as lk:
        assert "every 10000000 on CPU" in lk.description
    with link.attach_probe("software:faults", prog) as lk:
        assert "faults every 100 on CPUs" in lk.description
    with link.attach_probe("s:cs:10", prog, pid=os.getpid()) as lk:
        assert lk.description == f"perf_event cs every 10 on pid {os.getpid()}"


def test_perf_event_section_is_never_auto_attached(sampler: Any) -> None:
    with link.attach_all(sampler) as links:
        assert len(links) == 0
        assert "perf_event_sample" in links.skipped["on_sample"]


def test_cli_attach_software_cpu_clock_until_sigint(bpf_obj: Any) -> None:
    obj = str(bpf_obj("sampling_count"))
    proc = subprocess.Popen([sys.executable, "-m", "bpfkit.cli", "attach", obj, "software:cpu-clock:100000",
                             "--program", "on_sample"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=ENV)
    lines = []
    try:
        assert proc.stdout
        for line in proc.stdout:
            lines.append(line)
            if "to detach" in line:
                break
        assert any("perf_event cpu-clock every 100000 on CPUs" in line for line in lines), lines
        progs, links = bpf_ids_held_by(proc.pid)  # the child's own, by id: names are shared
        busy(0.1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(lines) + out
    assert "detached" in out
    assert progs and links_running(progs, links) == []  # nothing of the child's stays attached
