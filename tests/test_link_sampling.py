# SPDX-License-Identifier: Apache-2.0
"""bpfkit.link.sampling without a kernel: event names, rate checks, targets, probe specs and the
error messages (integration/test_link_sampling.py runs the real thing)."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from bpfkit._kernel.consts import HARDWARE_EVENT_NAMES, SOFTWARE_EVENT_NAMES, PerfHwId, PerfSwId, PerfType
from bpfkit.errors import KernelError, KernelPermissionError, NotSupportedError, UsageError
from bpfkit import attach
from bpfkit.link import sampling
from bpfkit.probespec import HARDWARE_EVENTS, SOFTWARE_EVENTS, parse_probe


@pytest.mark.parametrize(
    "event, want",
    [
        (sampling.SoftwareEvent.CPU_CLOCK, (PerfType.SOFTWARE, 0, "cpu-clock")),
        (sampling.HardwareEvent.CACHE_MISSES, (PerfType.HARDWARE, 3, "cache-misses")),
        ("page-faults", (PerfType.SOFTWARE, 2, "page-faults")),
        ("software:cs", (PerfType.SOFTWARE, 3, "cs")),
        ("hardware:cycles", (PerfType.HARDWARE, 0, "cycles")),
        ("branch-misses", (PerfType.HARDWARE, 5, "branch-misses")),
        ((1, 1), (PerfType.SOFTWARE, 1, "task-clock")),
        ((8, 0x3C), (8, 0x3C, "raw event type 8 config 0x3c")),
    ],
)
def test_resolve_event(event: Any, want: tuple[int, int, str]) -> None:
    ev = sampling.resolve_event(event)
    assert (ev.type, ev.config, ev.name) == want


def test_resolve_event_refuses_unknown_names() -> None:
    with pytest.raises(UsageError, match="unknown perf event 'bogus'"):
        sampling.resolve_event("bogus")
    with pytest.raises(UsageError, match="software:NAME or hardware:NAME"):
        sampling.resolve_event("firmware:cycles")
    with pytest.raises(UsageError, match="unknown perf event 'software:cycles'"):
        sampling.resolve_event("software:cycles")
    with pytest.raises(UsageError, match="not a perf event"):
        sampling.resolve_event(3.5)  # type: ignore[arg-type]


def test_one_table_of_event_names() -> None:
    assert SOFTWARE_EVENTS is SOFTWARE_EVENT_NAMES and HARDWARE_EVENTS is HARDWARE_EVENT_NAMES
    assert all(isinstance(v, PerfSwId) for v in SOFTWARE_EVENT_NAMES.values())
    assert all(isinstance(v, PerfHwId) for v in HARDWARE_EVENT_NAMES.values())
    assert not set(SOFTWARE_EVENT_NAMES) & set(HARDWARE_EVENT_NAMES)  # a bare name is unambiguous
    assert sampling.resolve_event("hardware:cycles").is_hardware
    assert not sampling.resolve_event("cpu-clock").is_hardware


def test_period_xor_freq(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling._perf, "max_sample_rate", lambda: 1000)
    assert sampling._check_rate(5, None) == (5, False)
    assert sampling._check_rate(None, 1000) == (1000, True)
    with pytest.raises(UsageError, match="exactly one of period"):
        sampling._check_rate(None, None)
    with pytest.raises(UsageError, match="exactly one of period"):
        sampling._check_rate(1, 1)
    with pytest.raises(UsageError, match="period must be a positive integer"):
        sampling._check_rate(0, None)
    with pytest.raises(UsageError, match=r"1001 Hz is above kernel.perf_event_max_sample_rate \(1000 Hz\)"):
        sampling._check_rate(None, 1001)


def test_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "online_cpus", lambda: [0, 1, 3])
    assert sampling._targets(None, None) == [(-1, 0), (-1, 1), (-1, 3)]
    assert sampling._targets(1, None) == [(-1, 1)]
    assert sampling._targets([0, 3], None) == [(-1, 0), (-1, 3)]
    assert sampling._targets(None, 42) == [(42, -1)]
    assert sampling._targets(1, 42) == [(42, 1)]
    with pytest.raises(UsageError, match="cpu must be a CPU number"):
        sampling._targets(-1, None)
    with pytest.raises(UsageError, match="pid must be a process id"):
        sampling._targets(None, -5)
    assert sampling._cpu_list([0, 1, 2, 3, 6, 8, 9]) == "0-3,6,8-9"


def _error(err: int, ev: str = "cycles", pid: int = -1, cpu: int = 1, value: int = 1000, is_freq: bool = False,
           opened: int = 1) -> Exception:
    from bpfkit.errors import kernel_error

    return sampling._open_error(kernel_error("perf_event_open", err, "x"), sampling.resolve_event(ev), pid, cpu,
                                value, is_freq, opened)


def test_error_no_hardware_pmu() -> None:
    for err in (errno.ENOENT, errno.EOPNOTSUPP):
        exc = _error(err)
        assert isinstance(exc, NotSupportedError)
        assert "hardware event cycles on CPU 1" in str(exc) and "no hardware PMU (virtual machine?)" in str(exc)
    assert "on pid 7" in str(_error(errno.ENOENT, pid=7, cpu=-1))


def test_error_permission_names_paranoid(monkeypatch: pytest.MonkeyPatch) -> None:
    # Root here has CAP_PERFMON, so the kernel never says EACCES: the errno is made up.
    monkeypatch.setattr(sampling._perf, "paranoid", lambda: 3)
    exc = _error(errno.EACCES, ev="cpu-clock")
    assert isinstance(exc, KernelPermissionError)
    assert "kernel.perf_event_paranoid is 3" in str(exc) and "CAP_PERFMON" in str(exc)


def test_error_rate_lowered_by_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel lowers perf_event_max_sample_rate by itself: EINVAL after our check passed.
    monkeypatch.setattr(sampling._perf, "max_sample_rate", lambda: 500)
    exc = _error(errno.EINVAL, ev="cpu-clock", value=800, is_freq=True)
    assert isinstance(exc, UsageError) and "above kernel.perf_event_max_sample_rate (500 Hz)" in str(exc)


def test_error_out_of_fds() -> None:
    exc = _error(errno.EMFILE, ev="cpu-clock", opened=3)
    assert isinstance(exc, KernelError) and "out of file descriptors after 3 perf event(s)" in str(exc)


@pytest.mark.parametrize(
    "text, pid, want",
    [
        ("profile:hz:99", None, dict(event=PerfSwId.CPU_CLOCK, freq=99)),
        ("profile:ms:10", None, dict(event=PerfSwId.CPU_CLOCK, period=10_000_000)),
        ("interval:s:1", None, dict(event=PerfSwId.CPU_CLOCK, period=1_000_000_000, cpu=0)),
        ("interval:hz:5", 9, dict(event=PerfSwId.CPU_CLOCK, freq=5, pid=9)),
        ("software:page-faults:1", None, dict(period=1)),
        ("s:faults", None, dict(period=100)),
        ("hardware:cache-misses:1000", 4, dict(period=1000, pid=4)),
        ("h:branch-misses", None, dict(period=100_000)),
    ],
)
def test_probe_specs(monkeypatch: pytest.MonkeyPatch, text: str, pid: int | None, want: dict[str, Any]) -> None:
    calls: list[dict[str, Any]] = []
    # Mocks: the kernel calls are replaced to see the arguments the sampling kind's record
    # (bpfkit.link.sampling.KIND, which bpfkit.attach reads) derives from the spec.
    monkeypatch.setattr(sampling, "online_cpus", lambda: [0, 1])
    monkeypatch.setattr(sampling, "perf_event_sample", lambda prog, event, **kw: calls.append(dict(kw, event=event)))
    spec = parse_probe(text)
    attach.attach_probe(spec, 0, pid=pid)
    (call,) = calls
    for key, value in want.items():
        assert call[key] == value, (key, call)
    if "event" not in want:
        assert call["event"].name == spec.event


def test_perf_event_sections_point_at_the_api() -> None:
    assert "bpfkit.link.perf_event_sample" in attach._NEVER_AUTO["perf_event"]
    from bpfkit import link

    assert link.perf_event_sample is sampling.perf_event_sample
