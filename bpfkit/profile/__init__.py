# SPDX-License-Identifier: Apache-2.0
"""Profiles: stacks counted by BPF programs, symbolized, written for the tools people read
them with (docs/stacks.md): folded stacks (flamegraph.pl, inferno), pprof (go tool pprof,
Parca, Pyroscope), speedscope JSON, and a self-contained interactive SVG flame graph."""

from __future__ import annotations

from .collect import LOST_STACK, from_maps, stack_key_fields
from .formats import FORMATS, format_for, from_folded, save, to_folded, to_speedscope, write_profile
from .keys import CountsShape, counts_maps, counts_shape
from .model import KERNEL_SUFFIX, Profile
from .stackmap import size_stack_map

__all__ = ["Profile", "from_maps", "stack_key_fields", "write_profile", "format_for", "to_folded", "from_folded",
           "to_speedscope", "save", "FORMATS", "KERNEL_SUFFIX", "LOST_STACK", "counts_maps", "counts_shape",
           "CountsShape", "size_stack_map"]
