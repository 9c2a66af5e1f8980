# SPDX-License-Identifier: Apache-2.0
"""``--set NAME=VALUE`` and ``--map-size MAP.FIELD=N``: the edits ``bpfkit attach`` and ``bpfkit
load`` make to an object's spec before loading it, as a libbpf tool sets its skeleton's
``.rodata`` knobs and map sizes between open and load."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # not typing's: importing typing costs ~1.5 ms of start-up, for annotations only
if TYPE_CHECKING:
    from typing import Any

    from ..collection import CollectionSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--set and --map-size (each repeatable)."""
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="set a const volatile knob or global variable before loading (repeatable), "
                             "typed through BTF: integers (0x.., negative), true/false, enum member names, "
                             "strings for char arrays, JSON for structs/arrays; 'hex:..' for raw bytes")
    parser.add_argument("--map-size", action="append", default=[], metavar="MAP.FIELD=N",
                        help="set a map's key_size, value_size or max_entries before loading (repeatable): "
                             "for objects that leave a size 0 for their user-space tool to fill in")


def apply(spec: CollectionSpec, args: argparse.Namespace) -> None:
    """The command line's --set items, then its --map-size items, applied to ``spec``."""
    apply_sets(spec, args.set)
    apply_map_sizes(spec, args.map_size)


def apply_map_sizes(spec: Any, items: list[str]) -> None:
    """--map-size MAP.FIELD=N: what a tool does with ``spec.maps[MAP].FIELD = N``."""
    if not items:
        return
    from ..btf.values import describe_value as _shown  # quoted and cut short: 5,000 digits show their start
    from ..errors import NotFoundError, UsageError
    from ..maps import SIZE_FIELDS

    for whole in items:
        item = _shown(whole)
        target, sep, text = whole.partition("=")
        name, dot, field = target.rpartition(".")
        if not sep or not dot or not name:
            raise UsageError(f"--map-size {item}: expected MAP.FIELD=N (FIELD: {', '.join(SIZE_FIELDS)})")
        if field not in SIZE_FIELDS:
            raise UsageError(f"--map-size {item}: FIELD must be one of {', '.join(SIZE_FIELDS)}, not {_shown(field)}")
        mspec = spec.maps.get(name)
        if mspec is None:
            raise NotFoundError(f"--map-size {item}: the object has no map {_shown(name)} "
                                f"(its maps: {', '.join(spec.maps) or 'none'})")
        if mspec.data is not None:
            raise UsageError(f"--map-size {item}: {name!r} holds global data, sized by its section "
                             "(--set changes its variables)")
        try:
            value = int(text, 0)  # also refuses more than 4,300 decimal digits
        except ValueError:
            raise UsageError(f"--map-size {item}: {_shown(text)} is not an integer (a u32: 0..4294967295)") from None
        if not 0 <= value < 1 << 32:
            raise UsageError(f"--map-size {item}: {_shown(value)} does not fit the kernel's u32 {field}")
        if getattr(mspec, field) != value and field != "max_entries":
            # The kernel checks BTF key/value types against the sizes: a new size drops them.
            mspec.btf_key_type_id = mspec.btf_value_type_id = 0
        setattr(mspec, field, value)


def apply_sets(spec: CollectionSpec, items: list[str]) -> None:
    """--set NAME=VALUE: what a tool does with ``spec.variables[NAME].set(...)`` before loading."""
    if not items:
        return
    from ..btf.values import describe_value as _shown  # quoted and cut short: 50,000 '[' show their start
    from ..errors import BPFKitError, NotFoundError, UsageError

    settable = sorted(n for n, v in spec.variables.items() if not v.static)
    for whole in items:
        item = _shown(whole)
        name, sep, text = whole.partition("=")
        if not sep or not name:
            raise UsageError(f"--set {item}: expected NAME=VALUE")
        var = spec.variables.get(name)
        if var is None:
            raise NotFoundError(f"--set {item}: the object has no variable {_shown(name)} "
                                f"(settable: {', '.join(settable) or 'none'})")
        if var.static:
            raise UsageError(f"--set {item}: {name!r} is a static variable (private to its source file, "
                             f"as libbpf's skeletons treat it); settable: {', '.join(settable) or 'none'}")
        try:
            if text.startswith("hex:"):
                try:
                    raw = bytes.fromhex(text[4:])
                except ValueError:
                    raise UsageError(f"{_shown(text[4:])} is not hex") from None
                var.set(raw)
            else:
                var.set_text(text)
        except BPFKitError as exc:
            raise exc.wrap(f"--set {item}")
