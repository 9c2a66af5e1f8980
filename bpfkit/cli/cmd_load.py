# SPDX-License-Identifier: Apache-2.0
"""``bpfkit load OBJ PIN_DIR``: load every program of an object and pin programs and maps,
like ``bpftool prog loadall OBJ PIN_DIR pinmaps PIN_DIR``."""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False  # not typing's: importing typing costs ~1.5 ms of start-up, for annotations only
if TYPE_CHECKING:
    from typing import Any

    from ..collection import CollectionSpec

DESCRIPTION = """\
Load every program of a BPF object (maps first, then programs), pin each program at
PIN_DIR/<program> and each map at PIN_DIR/<map> (or --maps-dir), then exit; the pins keep them
loaded. On any failure nothing is left pinned and the reason is printed (with the verifier log's
tail; -v for the whole log).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="a BPF object file")
    parser.add_argument("pin_dir", metavar="PIN_DIR", help="bpffs directory to pin programs (and maps) in")
    parser.add_argument("--maps-dir", metavar="DIR", help="pin maps here instead of PIN_DIR")
    parser.add_argument("--program", "-p", action="append", metavar="NAME",
                        help="load only this program (repeatable; default: every auto-loaded program)")
    add_spec_edit_arguments(parser)
    parser.add_argument("--log-level", type=int, default=0, choices=(0, 1, 2),
                        help="verifier log level (0: only on failure)")


def add_spec_edit_arguments(parser: argparse.ArgumentParser) -> None:
    """--set and --map-size (each repeatable): the edits load and attach make to an object's spec
    before loading it, as a libbpf tool sets its skeleton's .rodata knobs and map sizes."""
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="set a const volatile knob or global variable before loading (repeatable), "
                             "typed through BTF: integers (0x.., negative), true/false, enum member names, "
                             "strings for char arrays, JSON for structs/arrays; 'hex:..' for raw bytes")
    parser.add_argument("--map-size", action="append", default=[], metavar="MAP.FIELD=N",
                        help="set a map's key_size, value_size or max_entries before loading (repeatable): "
                             "for objects that leave a size 0 for their user-space tool to fill in; "
                             "SECTION.value_size=N on a global-data section (.data.NAME) resizes its last "
                             "variable, an array, as libbpf's bpf_map__set_value_size (scx's RESIZE_ARRAY)")


def apply_spec_edits(spec: CollectionSpec, args: argparse.Namespace) -> None:
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
        if mspec.data is not None and field != "value_size":
            raise UsageError(f"--map-size {item}: {name!r} holds global data, sized by its section "
                             "(--set changes its variables; value_size resizes its last variable, an array)")
        try:
            value = int(text, 0)  # also refuses more than 4,300 decimal digits
        except ValueError:
            raise UsageError(f"--map-size {item}: {_shown(text)} is not an integer (a u32: 0..4294967295)") from None
        if not 0 <= value < 1 << 32:
            raise UsageError(f"--map-size {item}: {_shown(value)} does not fit the kernel's u32 {field}")
        if mspec.data is not None:
            # A global-data section: its last variable, an array, resized with it, as libbpf's
            # bpf_map__set_value_size does and scx's RESIZE_ARRAY uses (bpfkit.spec.resize).
            try:
                spec.set_value_size(name, value)
            except UsageError as exc:
                raise exc.wrap(f"--map-size {item}")
            continue
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


def _map_pin_path(maps_dir: str, name: str, mspec: Any) -> str:
    """maps_dir/<name>, checked. bpffs refuses dots in names ("reserved"); libbpf pins
    "x.rodata" as "x_rodata"."""
    from .._kernel import bpffs

    return bpffs.pin_path(maps_dir, name, "map", (mspec.kernel_name or name).replace(".", "_"))


def run(args: argparse.Namespace) -> int:
    import bpfkit

    from .._kernel import bpffs
    from ..errors import BPFKitError, KernelError
    from ..maps import PinType

    spec = bpfkit.load_spec(args.object)
    apply_spec_edits(spec, args)
    made_dirs: list[str] = []
    pinned: list[str] = []
    try:
        # Both directories are judged (resolved, on bpffs) before any part of them is created,
        # and every pin name from the object is checked before anything is loaded.
        pin_dir = bpffs.check_pin_dir(args.pin_dir, "PIN_DIR")
        maps_dir = bpffs.check_pin_dir(args.maps_dir, "--maps-dir") if args.maps_dir else pin_dir
        selected = args.program or [n for n, p in spec.programs.items() if p.autoload]
        for name in selected:
            if name in spec.programs:
                bpffs.pin_path(pin_dir, name, "program")
        for name, mspec in spec.maps.items():
            if mspec.pinning == PinType.BY_NAME:  # the Collection pins these at maps_dir/<name>
                bpffs.pin_path(maps_dir, name, "map pinned by name")
            else:
                _map_pin_path(maps_dir, name, mspec)
        try:
            bpffs.make_dirs(pin_dir, made_dirs)
            bpffs.make_dirs(maps_dir, made_dirs)
        except OSError as exc:
            raise KernelError(f"create {exc.filename or pin_dir}", exc.errno or 0) from None
        existing = set(os.listdir(maps_dir))
        options = bpfkit.LoadOptions(log_level=args.log_level)
        with bpfkit.Collection(spec, pin_dir=maps_dir, programs=args.program, options=options) as coll:
            # Maps pinned by name (LIBBPF_PIN_BY_NAME) are already in maps_dir; new ones count
            # as ours to remove if a later step fails.
            pinned += [os.path.join(maps_dir, n) for n in set(os.listdir(maps_dir)) - existing]
            for name, prog in coll.programs.items():
                path = bpffs.pin_path(pin_dir, name, "program")
                prog.pin(path)
                pinned.append(path)
            for name, m in coll.maps.items():
                if m.pinned_path:
                    continue
                path = _map_pin_path(maps_dir, name, m.spec)
                m.pin(path)
                pinned.append(path)
    except BaseException as exc:
        for path in reversed(pinned):
            try:
                os.unlink(path)
            except OSError:
                pass
        bpffs.remove_dirs(made_dirs)
        if isinstance(exc, BPFKitError):
            raise exc.wrap(f"load {args.object}") from None
        raise
    progs = ", ".join(coll.programs) or "none"
    print(f"loaded {len(coll.programs)} programs ({progs}) and {len(coll.maps)} maps; pinned under {pin_dir}")
    return 0
