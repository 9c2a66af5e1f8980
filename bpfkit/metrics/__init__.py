# SPDX-License-Identifier: Apache-2.0
"""Maps as Prometheus metrics (``bpfkit attach --metrics``), and events as OpenTelemetry logs
(docs/metrics.md). Needs the ``metrics`` extra (prometheus_client, PyYAML)."""

from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "MapCollector": "bpfkit.metrics.collector",
    "MapMetrics": "bpfkit.metrics.plan",
    "plan_map": "bpfkit.metrics.plan",
    "plan_collection": "bpfkit.metrics.plan",
    "MetricsServer": "bpfkit.metrics.server",
    "parse_address": "bpfkit.metrics.server",
}
__all__ = list(_LAZY)
__getattr__ = lazy_getattr(__name__, _LAZY, globals())
