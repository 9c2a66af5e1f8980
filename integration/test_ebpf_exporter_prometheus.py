# SPDX-License-Identifier: Apache-2.0
"""``bpfkit exporter`` as a drop-in for ebpf_exporter, proved with a real Prometheus.

bpfkit's own objects and configs in ebpf_exporter's format (bpf/eex_*.bpf.c with
integration/ebpf_exporter/eex_*.yaml, one per construct: a syscall-decoded counter, static_map with
and without allow_unknown over a key with padding, errno, a per-CPU array split by ``cpu``, exp2 /
exp2zero / linear / fixed histograms with their sum keys, a uprobe, UDP drops, string and regexp
decoders on comm, kaddrs with ksym) are put side by side as NAME.yaml and NAME.bpf.o in a temporary
directory and served by one ``bpfkit exporter``; Debian's Prometheus scrapes it every second. Each
test runs a workload with exactly known counts (integration/ebpf_exporter/eex_workload.c, built
with gcc) and reads the values back through Prometheus' HTTP API: every series exact, histogram
buckets computed here from the sizes written by ebpf_exporter's documented rules (its README,
"Histograms"), ``le`` strings as Go's client prints them. Every exposition fetched passes
``promtool check metrics``.

The objects count only the workload's process: each has a one-slot map ``eex_target`` that the test
fills with the workload's pid, found through the program ids the exporter reports in
``bpfkit_ebpf_program_info`` (by id, never by name system-wide), while the workload waits on stdin.
On exit (SIGTERM, SIGINT) those programs must be gone from the kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from conftest import bpf_ids_held_by, bpf_object, links_running
from tests.metrics_exposition import check_exposition

from .test_metrics_prometheus import PROMETHEUS, _free_port, _query, _stop, start_prometheus

pytestmark = pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK),
                                reason="needs Debian's prometheus package (scripts/setup.sh installs it)")

CONFIGS = Path(__file__).resolve().parent / "ebpf_exporter"
WORKLOAD = "eex_workload"


def _kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


# tp_btf/kfree_skb's drop reason argument came in 5.17.
UDP_OK = _kernel_at_least(5, 17)
HOST_CONFIGS = ("eex_syscalls", "eex_exits", "eex_percpu", "eex_writes", "eex_uprobe", "eex_comm") + (
    ("eex_udp",) if UDP_OK else ())


def _prepare(tmp: Path, names: tuple[str, ...]) -> None:
    """NAME.yaml and NAME.bpf.o side by side in ``tmp`` (as ebpf_exporter finds them), and the
    workload binary there too (eex_uprobe's section names it as ./eex_workload)."""
    for name in names:
        shutil.copy(CONFIGS / f"{name}.yaml", tmp / f"{name}.yaml")
        shutil.copy(bpf_object(name), tmp / f"{name}.bpf.o")
    if not (tmp / WORKLOAD).exists():
        gcc = shutil.which("gcc") or pytest.skip("needs gcc to build the workload")
        subprocess.run([gcc, "-O2", "-Wall", "-o", str(tmp / WORKLOAD), str(CONFIGS / f"{WORKLOAD}.c")],
                       check=True, capture_output=True, text=True)


class Output:
    """A process's merged stdout and stderr, drained by a thread (a full pipe would stall it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._drain, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _drain(self, stream: Any) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, what: str, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(what in line for line in self.lines):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self._cond.wait(0.5)  # the last lines
                    pytest.fail(f"no {what!r} from {proc.args!r} (exit {proc.poll()}):\n{self.text[-3000:]}")
                self._cond.wait(0.5)

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _start(cmd: list[str], cwd: Path, ready: str) -> tuple[subprocess.Popen[str], Output]:
    """``cmd`` started in ``cwd``, returned once a line of its output has ``ready``."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Output(proc)
    try:
        out.wait_for(ready, proc)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        raise
    return proc, out


def start_exporter(tmp: Path, names: tuple[str, ...], port: int, path: str = "/metrics") -> tuple[subprocess.Popen[str], Output]:
    """``bpfkit exporter`` serving ``names`` from ``tmp`` (its working directory) on
    http://127.0.0.1:PORT/PATH, returned once it says it serves there."""
    return _start([sys.executable, "-m", "bpfkit.cli", "exporter", "--config.dir", str(tmp), "--config.names",
                   ",".join(names), "--web.listen-address", f"127.0.0.1:{port}", "--web.telemetry-path", path],
                  tmp, f"http://127.0.0.1:{port}{path}")


def start_attach(tmp: Path, name: str, port: int) -> tuple[subprocess.Popen[str], Output]:
    """``bpfkit attach NAME.bpf.o --metrics 127.0.0.1:PORT --metrics-config NAME.yaml`` (the config
    in ebpf_exporter's format), returned once attached."""
    return _start([sys.executable, "-m", "bpfkit.cli", "attach", str(tmp / f"{name}.bpf.o"), "--metrics",
                   f"127.0.0.1:{port}", "--metrics-config", str(tmp / f"{name}.yaml")], tmp, "Ctrl-C or SIGTERM")


def scrape(port: int, path: str = "/metrics") -> str:
    """The exposition at 127.0.0.1:PORT, checked as Prometheus reads it (promtool and more)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        text: str = resp.read().decode()
    check_exposition(text)
    return text


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` in an exposition: (labels, value)."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == name]


def program_ids(text: str, config: str) -> set[int]:
    """The ids of config's programs, from the exporter's bpfkit_ebpf_program_info."""
    return {int(labels["id"]) for labels, _ in samples(text, "bpfkit_ebpf_program_info") if labels["config"] == config}


def fill_target(prog_ids: set[int], pid: int) -> int:
    """Write ``pid`` into the eex_target map of the programs ``prog_ids`` (found by their map ids,
    so only the maps of this test's objects); how many maps were filled."""
    from bpfkit.maps import Map
    from bpfkit.program import Program

    map_ids: set[int] = set()
    for prog_id in prog_ids:
        with Program.from_id(prog_id) as prog:
            map_ids.update(prog.info().map_ids)
    filled = 0
    for map_id in sorted(map_ids):
        with Map.from_id(map_id) as m:
            if m.name == "eex_target":
                m.update(0, pid)
                filled += 1
    return filled


def _sleeping(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] == "S"


def run_workload(tmp: Path, prog_ids: set[int], *args: str) -> None:
    """eex_workload ARGS, counted by the objects of ``prog_ids``: started, waited for until it sleeps
    in its read of stdin (nothing it did so far is counted), its pid written into their
    eex_target maps, then let go; it must exit 0 having written nothing."""
    proc = subprocess.Popen([str(tmp / WORKLOAD), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 30
        while not _sleeping(proc.pid):  # blocked in read(0): its syscalls from now on are the workload's
            assert time.monotonic() < deadline, "the workload never waited on stdin"
            time.sleep(0.01)
        assert fill_target(prog_ids, proc.pid) >= 1, f"no eex_target map among programs {prog_ids}"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and not out, f"workload {args} exited {proc.returncode}: {out!r} {err!r}"


def series(prom_port: int, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant query's answer: {labels without __name__, job and instance: value}."""
    found = {}
    for row in _query(prom_port, promql):
        labels = tuple(sorted((k, v) for k, v in row["metric"].items() if k not in ("__name__", "job", "instance")))
        found[labels] = float(row["value"][1])
    return found


def wait_series(prom_port: int, promql: str, want: dict[tuple[tuple[str, str], ...], float],
                timeout: float = 40.0) -> None:
    """Poll Prometheus until ``promql`` answers exactly ``want`` (every series, every value)."""
    deadline = time.monotonic() + timeout
    got: Any = None
    while time.monotonic() < deadline:
        try:
            got = series(prom_port, promql)
        except OSError as exc:
            got = f"Prometheus not answering: {exc}"
        if got == want:
            return
        time.sleep(0.5)
    raise AssertionError(f"{promql}:\n got  {got!r}\n want {want!r}")


def labels(**kv: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kv.items()))


@dataclasses.dataclass
class Served:
    tmp: Path
    exporter: subprocess.Popen[str]
    output: Output
    metrics_port: int
    prom_port: int

    def ids(self, *configs: str) -> set[int]:
        text = scrape(self.metrics_port)
        found = set().union(*(program_ids(text, c) for c in configs))
        assert found, f"no bpfkit_ebpf_program_info for {configs}:\n{text[:3000]}"
        return found

    def run(self, configs: tuple[str, ...], *args: str) -> None:
        run_workload(self.tmp, self.ids(*configs), *args)

    def expect(self, promql: str, want: dict[tuple[tuple[str, str], ...], float]) -> None:
        wait_series(self.prom_port, promql, want)


def _loaded(prog_ids: set[int]) -> list[int]:
    """Which of ``prog_ids`` are loaded."""
    from bpfkit.errors import KernelError
    from bpfkit.program import Program

    left = []
    for prog_id in prog_ids:
        try:
            with Program.from_id(prog_id):
                left.append(prog_id)
        except KernelError as exc:
            if exc.errno != errno.ENOENT:  # BPF_PROG_GET_FD_BY_ID: no program has that id (now)
                raise
    return left


def _assert_detached(prog_ids: set[int]) -> None:
    """Nothing of the exporter's left in the kernel: its programs (by id) and links to them."""
    assert prog_ids
    deadline = time.monotonic() + 10  # the kernel frees programs after an RCU grace period
    while _loaded(prog_ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _loaded(prog_ids), f"programs {_loaded(prog_ids)} still loaded after the exporter exited"
    assert not links_running(prog_ids, set())


@contextlib.contextmanager
def serving(tmp: Path, names: tuple[str, ...], attach: bool = False) -> Iterator[Served]:
    """``names`` served from ``tmp`` by ``bpfkit exporter`` (or, with ``attach``, the one config by
    ``bpfkit attach --metrics``) and scraped by Prometheus; on the way out both are stopped with
    SIGTERM, must exit 0, and the programs reported are gone from the kernel."""
    metrics_port, prom_port = _free_port(), _free_port()
    server = prom = None
    try:
        _prepare(tmp, names)
        server, output = start_attach(tmp, names[0], metrics_port) if attach else start_exporter(tmp, names, metrics_port)
        prom = start_prometheus(tmp, metrics_port, prom_port)
        served = Served(tmp, server, output, metrics_port, prom_port)
        ids = served.ids(*names)
        yield served
        _stop(prom, "prometheus")
        prom = None
        _stop(server, "bpfkit")
        server = None
        _assert_detached(ids)
    finally:
        for proc in (prom, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    tmp = Path(tempfile.mkdtemp(prefix="bpfkit-eex-"))
    try:
        with serving(tmp, HOST_CONFIGS) as s:
            yield s
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------- counters
def test_syscall_counter_and_ksym(served: Served) -> None:
    """eex_syscalls: uint+syscall names every syscall the workload made, exactly; kaddrs writes
    do_sys_openat2's address into the object and ksym names it back."""
    served.run(("eex_syscalls",), "getppid", "37")
    served.run(("eex_syscalls",), "open", str(served.tmp), "2", "1", "4")
    served.expect("ebpf_exporter_eex_syscalls_total", {
        labels(syscall="getppid"): 37, labels(syscall="openat"): 7, labels(syscall="close"): 4,
        labels(syscall="exit_group"): 2})
    served.expect("ebpf_exporter_eex_openat_by_function_total", {labels(function="do_sys_openat2"): 7})


def test_static_map_padding_errno(served: Served) -> None:
    """eex_exits: a key {u8; 3 bytes of padding; u32}; static_map marks an unknown input
    unknown:N, or with allow_unknown passes it as it is; errno names -ret (unknown:0 for none,
    as Go's unix.ErrnoName has no name for 0)."""
    served.run(("eex_exits",), "open", str(served.tmp), "5", "3", "6")
    served.expect("ebpf_exporter_eex_open_outcomes_total", {
        labels(outcome="unknown:2", errno="ENOENT"): 5, labels(outcome="unknown:2", errno="EISDIR"): 3,
        labels(outcome="positive", errno="unknown:0"): 6})
    served.expect("ebpf_exporter_eex_open_results_total", {
        labels(outcome="2", errno="ENOENT"): 5, labels(outcome="2", errno="EISDIR"): 3,
        labels(outcome="positive", errno="unknown:0"): 6})


def _possible_cpus() -> list[int]:
    """/sys/devices/system/cpu/possible ("0-3,8"): the CPUs a per-CPU map has a value for."""
    with open("/sys/devices/system/cpu/possible") as f:
        text = f.read().strip()
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_percpu_split_by_cpu(served: Served) -> None:
    """eex_percpu: a per-CPU array whose last label is cpu is served per CPU: the workload, pinned
    to one CPU and then (where this process may run on two) another, is counted on those CPUs'
    series; every other CPU's series is there with 0. The per-CPU hash without a cpu label adds
    the CPUs up."""
    allowed = sorted(os.sched_getaffinity(0))
    plan = {allowed[-1]: (25, 12)} | ({allowed[0]: (6, 1)} if len(allowed) > 1 else {})
    served.run(("eex_percpu",), "cpus", *(f"{cpu}:{n}:{m}" for cpu, (n, m) in plan.items()))
    want = {}
    for c in _possible_cpus():
        n, m = plan.get(c, (0, 0))
        want[labels(call="getppid", cpu=str(c))] = n
        want[labels(call="gettid", cpu=str(c))] = m
    served.expect("ebpf_exporter_eex_percpu_calls_total", want)
    served.expect("ebpf_exporter_eex_percpu_summed_calls_total", {
        labels(call="getppid"): sum(n for n, _ in plan.values()), labels(call="gettid"): sum(m for _, m in plan.values())})


def test_uprobe_counter(served: Served) -> None:
    """eex_uprobe: SEC("uprobe/./eex_workload:eex_tick"), resolved in the exporter's working
    directory, counts every call by its argument."""
    served.run(("eex_uprobe",), "ticks", "7:11", "9:3", "7:2")
    served.expect("ebpf_exporter_eex_ticks_total", {labels(arg="7"): 13, labels(arg="9"): 3})


def test_string_and_regexp_on_comm(served: Served) -> None:
    """eex_comm: the string decoder gives each comm; the regexp decoder keeps the comms a regexp
    matches (its first group, or the whole match) and drops the rest: eex-drop-b has no series;
    eexsum1 and eexsum2 both become eexsum, one series with their counts added up."""
    served.run(("eex_comm",), "comm", "eex-keep-a:5", "eex-drop-b:4", "eexkeep7:3", "eex-keep-zz:2", "eexsum1:6",
               "eexsum2:7")
    served.expect("ebpf_exporter_eex_comm_calls_total", {
        labels(comm="eex-keep-a"): 5, labels(comm="eex-drop-b"): 4, labels(comm="eexkeep7"): 3,
        labels(comm="eex-keep-zz"): 2, labels(comm="eexsum1"): 6, labels(comm="eexsum2"): 7})
    served.expect("ebpf_exporter_eex_comm_kept_calls_total", {
        labels(comm="a"): 5, labels(comm="eexkeep7"): 3, labels(comm="zz"): 2, labels(comm="eexsum"): 13})


@pytest.mark.skipif(not UDP_OK, reason="tp_btf/kfree_skb's drop reason needs 5.17")
def test_udp_drops_to_closed_port(served: Served) -> None:
    """eex_udp: datagrams to a UDP port nobody listens on are dropped with reason NO_SOCKET, each
    counted under its destination port."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sent = 9
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(sent):
            s.sendto(b"eex %d" % i, ("127.0.0.1", port))
    served.expect(f'ebpf_exporter_eex_udp_no_socket_drops_total{{port="{port}"}}', {labels(port=str(port)): sent})


# ----------------------------------------------------------------------------------- histograms
def go_float(x: float) -> str:
    """x as Go's strconv.FormatFloat(x, 'g', -1, 64) prints it, as client_golang prints ``le``:
    the shortest digits that read back as x; the %e form (two exponent digits at least) when the
    exponent is below -4 or at least 6 (ftoa.go: eprec = 6 for the shortest form)."""
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    parts = Decimal(repr(abs(x))).normalize().as_tuple()
    assert isinstance(parts.exponent, int)
    digits = "".join(map(str, parts.digits))
    point = len(digits) + parts.exponent  # how many digits come before the decimal point
    exp = point - 1
    if exp < -4 or exp >= 6:
        tail = "." + digits[1:] if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


# What bpf/eex_writes.bpf.c does with each write() size (its bucket, and what it adds to the sum key).
def _exp2_bucket(v: int) -> int:
    return 0 if v <= 1 else (v - 1).bit_length()  # the smallest i with v <= 2^i


def _observe(buckets: dict[int, int], key: int, last: int, add_to_sum: int) -> None:
    buckets[min(key, last)] = buckets.get(min(key, last), 0) + 1
    if add_to_sum:
        buckets[last + 1] = buckets.get(last + 1, 0) + add_to_sum


FIXED_KEYS = (1, 10, 100, 1000, 10000)


def bpf_exp2(sizes: list[int], last: int) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in sizes:
        _observe(b, _exp2_bucket(v), last, v)
    return b


def bpf_exp2zero(sizes: list[int], last: int) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in sizes:
        _observe(b, _exp2_bucket(v) + 1 if v else 0, last, v)
    return b


def bpf_linear(sizes: list[int], step: int, last: int) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in sizes:
        _observe(b, v // step, last, v // step)
    return b


def bpf_fixed(sizes: list[int]) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in sizes:
        _observe(b, next((k for k in FIXED_KEYS if v <= k), FIXED_KEYS[-1]), FIXED_KEYS[-1], v)
    return b


@dataclasses.dataclass
class Expected:
    buckets: dict[str, float]  # le as served -> cumulative count
    count: float
    sum: float


def ebpf_exporter_rules(kind: str, keys: dict[int, int], multiplier: float, first: int = 0, last: int = 0,
                        fixed: tuple[int, ...] = ()) -> Expected:
    """What ebpf_exporter serves for a histogram map's contents (its README, "Histograms", and
    exporter/histogram.go): buckets first..last (fixed: the bucket keys) cumulated, missing keys 0,
    le = 2^k x multiplier (exp2), 0 then 2^(k-1) x multiplier (exp2zero), k x multiplier (linear,
    fixed); _sum is the key after the last (last + 1; fixed: the last key + 1) x multiplier;
    _count the buckets' total; +Inf the same."""
    order = list(fixed) if kind == "fixed" else list(range(first, last + 1))
    bound: Callable[[int], float] = {
        "exp2": lambda k: math.exp2(k) * multiplier,
        "exp2zero": lambda k: 0.0 if k == 0 else math.exp2(k - 1) * multiplier,
        "linear": lambda k: k * multiplier,
        "fixed": lambda k: k * multiplier,
    }[kind]
    running = 0
    buckets: dict[str, float] = {}
    for k in order:
        running += keys.get(k, 0)
        buckets[go_float(bound(k))] = running
    buckets["+Inf"] = running
    return Expected(buckets, running, float(keys.get(order[-1] + 1, 0)) * multiplier)


def assert_histogram(served: Served, family: str, want: dict[tuple[tuple[str, str], ...], Expected]) -> None:
    """Every ``le`` bucket, _count and _sum of ``family`` for each label set, through Prometheus
    (_count first: once it is there, the buckets and sum of that scrape are too), and the same le
    strings in the exposition itself."""
    served.expect(f"{family}_count", {k: e.count for k, e in want.items()})
    served.expect(f"{family}_bucket", {tuple(sorted((*k, ("le", le)))): n for k, e in want.items()
                                       for le, n in e.buckets.items()})
    served.expect(f"{family}_sum", {k: e.sum for k, e in want.items()})
    text = scrape(served.metrics_port)
    for k, e in want.items():
        served_les = [s[0]["le"] for s in samples(text, f"{family}_bucket")
                      if tuple(sorted((n, v) for n, v in s[0].items() if n != "le")) == k]
        assert served_les == list(e.buckets), f"{family}{dict(k)}: le {served_les} in the exposition, want {list(e.buckets)}"


# fd 10 and fd 11 get different sizes: every exp2 bucket of 0..10 is reached or skipped on purpose,
# and sizes above 2^10 land in the last bucket while the sum keeps them whole.
SIZES = {10: [0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 100, 200, 1000, 1024, 1025, 5000],
         11: [7, 7, 64, 300, 300, 700, 65536]}


def test_histograms_by_ebpf_exporter_rules(served: Served) -> None:
    """eex_writes: the workload's write() sizes in exp2 (by fd, multiplier 0.001), exp2zero, linear
    (an array, multiplier 100), fixed (bucket_keys) and exp2 from bucket_min 3 histograms: every
    bucket, _count and _sum exactly as ebpf_exporter's rules give them for what the object stored."""
    served.run(("eex_writes",), "writes", *(f"{fd}:{','.join(map(str, sizes))}" for fd, sizes in SIZES.items()))
    everything = [v for sizes in SIZES.values() for v in sizes]
    cases = {
        "ebpf_exporter_eex_write_size_kilobytes": {
            labels(fd=str(fd)): ebpf_exporter_rules("exp2", bpf_exp2(sizes, 10), 0.001, 0, 10)
            for fd, sizes in SIZES.items()},
        "ebpf_exporter_eex_write_size_bytes": {
            (): ebpf_exporter_rules("exp2zero", bpf_exp2zero(everything, 12), 1.0, 0, 12)},
        "ebpf_exporter_eex_write_size_linear_bytes": {
            (): ebpf_exporter_rules("linear", bpf_linear(everything, 100, 10), 100.0, 0, 10)},
        "ebpf_exporter_eex_write_size_fixed_bytes": {
            (): ebpf_exporter_rules("fixed", bpf_fixed(everything), 1.0, fixed=FIXED_KEYS)},
        "ebpf_exporter_eex_write_size_from8_bytes": {
            (): ebpf_exporter_rules("exp2", bpf_exp2(everything, 8), 1.0, 3, 8)},
    }
    # The models' own sanity: the sums are the bytes written (linear: its sizes are in steps of 100
    # but 0..17 and 1025/5000/65536 are not, so its sum is the floor of each / 100, times 100).
    assert cases["ebpf_exporter_eex_write_size_bytes"][()].sum == sum(everything)
    assert cases["ebpf_exporter_eex_write_size_kilobytes"][labels(fd="11")].sum == sum(SIZES[11]) * 0.001
    assert cases["ebpf_exporter_eex_write_size_kilobytes"][labels(fd="10")].buckets["0.001"] == 2  # 0 and 1
    # bucket_min 3: the 5 sizes of 0..4 bytes are left out of the buckets and _count, not of _sum.
    from8 = cases["ebpf_exporter_eex_write_size_from8_bytes"][()]
    assert (from8.count, from8.sum, next(iter(from8.buckets))) == (len(everything) - 5, sum(everything), "8")
    for family, want in cases.items():
        assert_histogram(served, family, want)


# ---------------------------------------------------------------------------------- self-metrics
def test_self_metrics(served: Served) -> None:
    """bpfkit_enabled_configs has each config (label ``name``, as ebpf_exporter's
    ebpf_exporter_enabled_configs); bpfkit_ebpf_program_info each program of each
    config with its id, attached (bpfkit_ebpf_program_attached 1), and the ids are the programs
    the exporter process holds."""
    text = scrape(served.metrics_port)
    enabled = {s[0]["name"]: s[1] for s in samples(text, "bpfkit_enabled_configs")}
    assert enabled == {name: 1.0 for name in HOST_CONFIGS}
    info = samples(text, "bpfkit_ebpf_program_info")
    ids = {int(lb["id"]) for lb, _ in info}
    assert {lb["config"] for lb, _ in info} == set(HOST_CONFIGS)
    held, _ = bpf_ids_held_by(served.exporter.pid)
    assert ids <= held, f"program ids {ids - held} reported but not held by the exporter"
    by_config = {c: {lb["program"] for lb, _ in info if lb["config"] == c} for c in HOST_CONFIGS}
    assert by_config["eex_syscalls"] == {"eex_sys_enter", "eex_enter_openat"}
    assert by_config["eex_percpu"] == {"eex_enter_getppid", "eex_enter_gettid"}
    attached = {lb["id"]: v for lb, v in samples(text, "bpfkit_ebpf_program_attached")}
    assert attached == {str(i): 1.0 for i in ids}
    served.expect("bpfkit_enabled_configs", {labels(name=c): 1 for c in HOST_CONFIGS})
    assert [s for s in samples(text, "bpfkit_decoder_errors_total") if s[1]] == []


# ------------------------------------------------------------------------- bpfkit attach --metrics
def test_attach_serves_an_ebpf_exporter_config(tmp_path: Path) -> None:
    """``bpfkit attach OBJ --metrics ADDR --metrics-config NAME.yaml`` takes an ebpf_exporter config
    (told apart by its metrics: key) and serves the same families."""
    with serving(tmp_path, ("eex_comm",), attach=True) as s:
        s.run(("eex_comm",), "comm", "eex-keep-q:6", "other:2")
        s.expect("ebpf_exporter_eex_comm_kept_calls_total", {labels(comm="q"): 6})
        s.expect("ebpf_exporter_eex_comm_calls_total", {labels(comm="eex-keep-q"): 6, labels(comm="other"): 2})
        scrape(s.metrics_port)


# --------------------------------------------------------------------- config check, stop, errors
def _check(tmp: Path, names: str, *more: str) -> tuple[int, str]:
    """``bpfkit exporter --config.check`` on ``names`` in ``tmp``: (exit status, what it said)."""
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "exporter", "--config.dir", str(tmp), "--config.names",
                           names, "--config.check", *more], cwd=tmp, capture_output=True, text=True, timeout=120, check=False)
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said
    return proc.returncode, said


def test_config_check(tmp_path: Path) -> None:
    """--config.check: 0 for configs that load and attach; non-zero naming the problem for a
    config naming a map its object lacks, and for a malformed config (its file and line)."""
    _prepare(tmp_path, ("eex_percpu", "eex_comm"))
    rc, said = _check(tmp_path, "eex_percpu,eex_comm")
    assert rc == 0, said

    # A map the object lacks: eex_comm's object under a config that names eex_nothing_total.
    shutil.copy(tmp_path / "eex_comm.bpf.o", tmp_path / "eex_lacking.bpf.o")
    text = (tmp_path / "eex_comm.yaml").read_text().replace("eex_comm_kept_calls_total", "eex_nothing_total")
    (tmp_path / "eex_lacking.yaml").write_text(text)
    rc, said = _check(tmp_path, "eex_lacking")
    assert rc != 0 and "eex_nothing_total" in said and "eex_lacking" in said, said

    # A malformed config: an unknown bucket_type, named with its line.
    text = (CONFIGS / "eex_writes.yaml").read_text().replace("bucket_type: exp2zero", "bucket_type: exp3")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "exp3" in row)
    (tmp_path / "eex_badtype.yaml").write_text(text)
    shutil.copy(bpf_object("eex_writes"), tmp_path / "eex_badtype.bpf.o")
    rc, said = _check(tmp_path, "eex_badtype")
    assert rc != 0 and f"eex_badtype.yaml:{line}" in said and "exp3" in said, said


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stop_leaves_nothing_attached(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C or SIGTERM: the exporter exits 0 and its programs (the ids it reported) are gone.
    (Served on another --web.telemetry-path: only there.)"""
    _prepare(tmp_path, ("eex_percpu", "eex_uprobe"))
    port = _free_port()
    proc, out = start_exporter(tmp_path, ("eex_percpu", "eex_uprobe"), port, "/ebpf")
    try:
        with pytest.raises(urllib.error.HTTPError, match="404"):
            scrape(port)
        text = scrape(port, "/ebpf")
        ids = program_ids(text, "eex_percpu") | program_ids(text, "eex_uprobe")
        assert len(ids) == 3 and sorted(_loaded(ids)) == sorted(ids)
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out.text[-3000:]
    _assert_detached(ids)


# ------------------------------------------------------------------------------- VM kernels only
@pytest.mark.parametrize("config", [
    pytest.param("eex_kprobe", marks=pytest.mark.feature("kprobe_pmu")),
    pytest.param("eex_fentry", marks=pytest.mark.feature("tracing_programs")),
])
def test_kprobe_and_fentry_counters(tmp_path: Path, config: str) -> None:
    """eex_kprobe / eex_fentry: a kprobe and an fentry program on do_sys_openat2 count each open()
    of the workload, under the function kaddrs and ksym name (the host has neither kprobes nor
    BPF trampolines: these run in the VM kernels and skip here naming the feature)."""
    with serving(tmp_path, (config,)) as s:
        s.run((config,), "open", str(tmp_path), "2", "1", "3")
        s.expect(f"ebpf_exporter_{config}_calls_total", {labels(function="do_sys_openat2"): 6})
        scrape(s.metrics_port)


@pytest.mark.parametrize(("config", "feature", "named"), [
    ("eex_kprobe", "kprobe_pmu", "kprobe"),
    ("eex_fentry", "tracing_programs", "trampoline"),
])
def test_kprobe_and_fentry_refused_clearly(tmp_path: Path, config: str, feature: str, named: str) -> None:
    """Where the kernel lacks kprobes or BPF trampolines (this host), --config.check of those configs
    names the program and why, rather than serving nothing silently: as ebpf_exporter, a program
    that does not attach is a note (exit 0) and --config.strict makes it an error; an object that
    does not load (fentry without trampolines) is an error either way."""
    from bpfkit import features

    if features.probe(feature).supported:
        pytest.skip(f"this kernel has {feature}: test_kprobe_and_fentry_counters serves {config}")
    _prepare(tmp_path, (config,))
    rc, said = _check(tmp_path, config)
    assert f"{config}_openat2" in said and named in said, said
    assert rc == (0 if config == "eex_kprobe" else 1), said
    rc, said = _check(tmp_path, config, "--config.strict")
    assert rc != 0 and f"{config}_openat2" in said and named in said, said
