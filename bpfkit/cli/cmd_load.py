# SPDX-License-Identifier: Apache-2.0
"""``bpfkit load OBJ PIN_DIR``: load every program of an object and pin programs and maps,
like ``bpftool prog loadall OBJ PIN_DIR pinmaps PIN_DIR``."""

from __future__ import annotations

import argparse
import os

from . import spec_edits

TYPE_CHECKING = False  # not typing's: importing typing costs ~1.5 ms of start-up, for annotations only
if TYPE_CHECKING:
    from typing import Any


DESCRIPTION = (
    "Load every program of a BPF object (maps first, then programs), pin each program at "
    "PIN_DIR/<program> and each map at PIN_DIR/<map> (or --maps-dir), then exit; the pins keep "
    "them loaded. On any failure nothing is left pinned and the reason is printed (with the "
    "verifier log's tail; -v for the whole log)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="a BPF object file")
    parser.add_argument("pin_dir", metavar="PIN_DIR", help="bpffs directory to pin programs (and maps) in")
    parser.add_argument("--maps-dir", metavar="DIR", help="pin maps here instead of PIN_DIR")
    parser.add_argument("--program", "-p", action="append", metavar="NAME",
                        help="load only this program (repeatable; default: every auto-loaded program)")
    spec_edits.add_arguments(parser)
    parser.add_argument("--log-level", type=int, default=0, choices=(0, 1, 2),
                        help="verifier log level (0: only on failure)")


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
    spec_edits.apply(spec, args)
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
