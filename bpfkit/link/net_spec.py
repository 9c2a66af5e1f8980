"""Attaching at a network probe spec: ``xdp:IFACE`` and ``tc:IFACE:ingress|egress``.

The CLI's attach command parses its argument with :func:`bpfkit.probespec.parse_probe` and,
for these two kinds, calls :func:`attach_network`, which returns a Link like every other
attach function.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ._net import NetAttachMode
from .tc import ClsBpfLink, TcxLink, tc
from .xdp import XdpLink, XdpMode, XdpNetlinkLink, xdp

__all__ = ["NETWORK_KINDS", "attach_network"]

NETWORK_KINDS = frozenset({"xdp", "tc"})


def attach_network(
    program: Any,
    spec: Any,
    *,
    mode: NetAttachMode | str = NetAttachMode.AUTO,
    xdp_mode: XdpMode | str | None = XdpMode.AUTO,
    netns: Any = None,
) -> "XdpLink | XdpNetlinkLink | TcxLink | ClsBpfLink":
    """Attach ``program`` where ``spec`` says: a parsed :class:`bpfkit.probespec.ProbeSpec` of
    kind ``xdp`` (``.iface``) or ``tc`` (``.iface``, ``.direction``), or its text.

    ``mode`` (auto/link/netlink), ``xdp_mode`` (XDP only) and ``netns`` are passed on to
    :func:`bpfkit.link.xdp` / :func:`bpfkit.link.tc`.
    """
    if isinstance(spec, str):
        from ..probespec import parse_probe

        spec = parse_probe(spec)
    kind = getattr(spec, "kind", None)
    if kind == "xdp":
        return xdp(spec.iface, program, mode=mode, xdp_mode=xdp_mode, netns=netns)
    if kind == "tc":
        if XdpMode.of(xdp_mode) != XdpMode.AUTO:
            raise UsageError(f"xdp_mode= applies to xdp specs, not {spec}")
        return tc(spec.iface, program, spec.direction, mode=mode, netns=netns)
    raise UsageError(f"{spec} is not a network attach point: expected xdp:IFACE or tc:IFACE:ingress|egress")
