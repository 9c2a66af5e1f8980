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

from ..errors import NotSupportedError, UsageError
from . import probes as _probes

__all__ = ["FeatureResult", "probe", "require", "names", "probe_all", "describe", "groups", "clear_cache"]


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


def names() -> list[str]:
    """Every feature name, grouped as ``bpfkit features`` prints them."""
    order = {group: i for i, group in enumerate(_probes.GROUPS)}
    return [p.name for p in sorted(_probes.REGISTRY.values(), key=lambda p: order[p.group])]


def groups() -> tuple[str, ...]:
    return _probes.GROUPS


def _lookup(name: str) -> _probes.Probe:
    try:
        return _probes.REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown kernel feature {name!r} (bpfkit.features.names() lists them)") from None


def describe(name: str) -> FeatureInfo:
    p = _lookup(name)
    return FeatureInfo(p.name, p.group, p.min_version, p.what, p.how)


def probe(name: str) -> FeatureResult:
    """Whether the running kernel has feature ``name`` (definite answers cached per process)."""
    with _lock:
        cached = _cache.get(name)
        if cached is not None:
            return cached
        p = _lookup(name)
        outcome = _probes.run(name)
        supported, reason = outcome
        result = FeatureResult(name, supported, reason, p.min_version)
        if _probes.is_definite(outcome):
            _cache[name] = result
        return result


def require(name: str) -> FeatureResult:
    """Raise NotSupportedError (with the probe's reason and the minimum version) unless the
    kernel has ``name``."""
    result = probe(name)
    if not result.supported:
        raise NotSupportedError(describe(name).what, result.reason, result.min_version)
    return result


def probe_all() -> dict[str, FeatureResult]:
    """Every feature's result, in :func:`names` order."""
    return {name: probe(name) for name in names()}


def clear_cache() -> None:
    """Forget cached answers (tests; a process that gained capabilities)."""
    with _lock:
        _cache.clear()
