# SPDX-License-Identifier: Apache-2.0
"""What the running kernel can do, asked once per process.

    from bpfkit import features
    features.probe("perf_link")       # FeatureResult(name, supported, reason, min_version)
    features.require("uprobe_multi")  # raises NotSupportedError naming the version that has it
    features.probe_all()              # {name: FeatureResult} for every known feature

Every probe is a small conclusive experiment (bpfkit.features.probes): load the smallest program
of a type, create the smallest map, hand the kernel deliberately invalid fds and tell EBADF
("I know this and went looking for the fd") from EINVAL ("I don't know this"), load a tiny
hand-made BTF blob, read the PMU files in sysfs. Probes close every fd and remove every tracefs
entry they make. The kernel's definite answers (including a refusal, EPERM) are cached for the
life of the process (capabilities dropped later do not change them); a probe that failed for a
passing reason (EINTR, EAGAIN, ENOMEM, EBUSY, an unexpected errno) reports "unsupported" with
an "inconclusive" reason and is asked again next time. docs/features.md lists the features.
"""

from __future__ import annotations

import _thread  # threading.RLock() makes a _thread.RLock; importing threading costs ~0.7 ms of start-up
import dataclasses
import sys

from ..errors import NotSupportedError, UsageError
from . import _btf_kinds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import probes as _probes_mod

__all__ = ["FeatureResult", "probe", "require", "names", "probe_all", "probe_many", "describe", "groups", "clear_cache"]


@dataclasses.dataclass(frozen=True)
class FeatureResult:
    """The answer for one feature. ``reason`` names the errno or file that decided it;
    ``min_version`` is the first Linux release that has the feature."""

    name: str
    supported: bool
    reason: str
    min_version: str

    def __bool__(self) -> bool:
        return self.supported


@dataclasses.dataclass(frozen=True)
class FeatureInfo:
    """What a feature is and how it is probed (for tables and docs)."""

    name: str
    group: str
    min_version: str
    what: str
    how: str


_cache: dict[str, FeatureResult] = {}
_lock = _thread.RLock()
_name_locks: dict[str, _thread.RLock] = {}


def _run(name: str) -> _btf_kinds.Outcome:
    """probes.run(name). bpfkit.features.probes is imported on first use: defining its ~120
    probes costs ~1.4 ms, which loading an object does without (it asks only the BTF-kind
    probes: the same probes, run from _btf_kinds while nothing has imported probes; once it is
    imported, its run is the one used, as tests replace it)."""
    if name in _btf_kinds.KINDS and f"{__name__}.probes" not in sys.modules:
        return _btf_kinds.run(name)
    from . import probes

    return probes.run(name)


def _min_version(name: str) -> str:
    """The feature's first release (UsageError for an unknown name)."""
    kind = _btf_kinds.KINDS.get(name)
    return kind[0] if kind is not None else _lookup(name).min_version


def names() -> list[str]:
    """Every feature name, grouped as ``bpfkit features`` prints them."""
    from . import probes  # imported on first use (see _run)

    order = {group: i for i, group in enumerate(probes.GROUPS)}
    return [p.name for p in sorted(probes.REGISTRY.values(), key=lambda p: order[p.group])]


def groups() -> tuple[str, ...]:
    from . import probes  # imported on first use (see _run)

    return probes.GROUPS


def _lookup(name: str) -> _probes_mod.Probe:
    from . import probes  # imported on first use (see _run)

    found = probes.find(name)  # a REGISTRY feature or an iterator target (iter_task)
    if found is None:
        raise UsageError(f"unknown kernel feature {name!r} (bpfkit.features.names() lists them; "
                         "iterator targets are iter_TARGET, e.g. iter_task)")
    return found


def describe(name: str) -> FeatureInfo:
    p = _lookup(name)
    return FeatureInfo(p.name, p.group, p.min_version, p.what, p.how)


def probe(name: str) -> FeatureResult:
    """Whether the running kernel has feature ``name`` (definite answers cached per process)."""
    with _lock:
        cached = _cache.get(name)
        if cached is not None:
            return cached
        min_version = _min_version(name)
        name_lock = _name_locks.get(name)
        if name_lock is None:
            name_lock = _name_locks[name] = _thread.RLock()
    # One lock per feature while its probe runs, not the cache's: a probe that sleeps in the
    # kernel (a tracefs write waits for the kernel's event_mutex) holds up only callers of the
    # same feature.
    with name_lock:
        cached = _cache.get(name)
        if cached is not None:
            return cached
        outcome = _run(name)
        supported, reason = outcome
        result = FeatureResult(name, supported, reason, min_version)
        if _btf_kinds.is_definite(outcome):
            with _lock:
                _cache[name] = result
        return result


def probe_many(wanted: list[str]) -> dict[str, FeatureResult]:
    """:func:`probe` of each name, as ``{name: result}`` in the order given. The probes that
    sleep in the kernel (probes.BACKGROUND) run in a second thread while this one runs the
    rest; each probe is independent of the others, so the answers are the ones :func:`probe`
    gives one by one."""
    from . import probes  # imported on first use (see _run)

    for name in wanted:
        _lookup(name)
    results: dict[str, FeatureResult] = {}
    background = [n for n in dict.fromkeys(wanted) if n in probes.BACKGROUND]
    done = _thread.allocate_lock()
    failed: list[BaseException] = []

    def work() -> None:
        try:
            for n in background:
                results[n] = probe(n)
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)
        finally:
            done.release()

    if background:
        done.acquire()
        _thread.start_new_thread(work, ())
    try:
        for name in wanted:
            if name not in probes.BACKGROUND and name not in results:
                results[name] = probe(name)
    finally:
        with done:  # returns once the background thread has finished
            pass
    if failed:
        raise failed[0]
    return {name: results[name] for name in wanted}


def require(name: str) -> FeatureResult:
    """Raise NotSupportedError (with the probe's reason and the minimum version) unless the
    kernel has ``name``."""
    result = probe(name)
    if not result.supported:
        raise NotSupportedError(describe(name).what, result.reason, result.min_version)
    return result


def probe_all() -> dict[str, FeatureResult]:
    """Every feature's result, in :func:`names` order."""
    return probe_many(names())


def clear_cache() -> None:
    """Forget cached answers (tests; a process that gained capabilities)."""
    with _lock:
        _cache.clear()
