"""``bpfkit attach``: load an object, attach its programs, stay until Ctrl-C or SIGTERM.

    bpfkit attach prog.bpf.o                                   # every program whose section names a target
    bpfkit attach prog.bpf.o tracepoint:syscalls:sys_enter_openat --program handle_openat
    bpfkit attach prog.bpf.o uprobe:/bin/bash:readline --mode ioctl
    bpfkit attach opensnoop.bpf.o --events events --json      # print ring buffer records
    bpfkit attach prog.bpf.o --pin /sys/fs/bpf/mytool          # pin links and maps, exit

SIGTERM is turned into the same clean exit as Ctrl-C: links are closed and tracefs probes
removed before the process ends.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from typing import Any

from . import argtypes
from .stop_signals import StopSignals

HELP = "load an object, attach its programs, and stay attached until Ctrl-C/SIGTERM"
DESCRIPTION = (
    "Load a BPF object and attach its programs: every program whose section names its target "
    "(kprobe/SYM, tracepoint/GROUP/NAME, uprobe/BINARY:FUNC, ...) when no SPEC is given, else the "
    "one program (--program) at the probe SPEC (kprobe:FN, kretprobe:FN, tracepoint:GROUP:NAME, "
    "uprobe:BINARY:FN, uretprobe:BINARY:FN; a wildcard such as kprobe:vfs_* or uprobe:libc:str* is one "
    "kprobe_multi/uprobe_multi link, or one perf event per match where the kernel has none; "
    "uprobe.session:BINARY:FN and kprobe.session:FN run it on entry and return through one session link). Stays until "
    "Ctrl-C or SIGTERM, then detaches cleanly."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="compiled BPF object (.bpf.o)")
    parser.add_argument("spec", metavar="SPEC", nargs="*", default=[],
                        help="where to attach, in bpftrace's grammar (tracepoint:syscalls:sys_enter_openat, kprobe:FN, "
                             "uprobe:/path:FN, uprobe:libc:str*, xdp:IFACE, tc:IFACE:ingress, netkit:IFACE:peer); several allowed; "
                             "default: from the programs' section names")
    parser.add_argument("--program", "-p", metavar="NAME", help="the program to attach (needed with SPEC when the object has several)")
    parser.add_argument("--mode", choices=("auto", "link", "ioctl"), default="auto",
                        help="perf event attach: bpf_link (5.15+), PERF_EVENT_IOC_SET_BPF, or auto (default)")
    parser.add_argument("--pid", type=argtypes.pid, default=None, help="uprobes fire only in this process")
    parser.add_argument("--cookie", type=argtypes.u64, default=0,
                        help="bpf_get_attach_cookie() value, a u64 (5.15+)")
    parser.add_argument("--cgroup", metavar="PATH",
                        help="attach every cgroup program of the object (cgroup/connect4, cgroup_skb/egress, sockops, "
                             "cgroup/sysctl, cgroup/dev, ...) to this cgroup v2 directory")
    parser.add_argument("--netkit", metavar="IFACE",
                        help="attach every netkit/primary and netkit/peer program of the object to the netkit pair "
                             "whose primary device is IFACE (Linux 6.7+)")
    parser.add_argument("--pin", metavar="DIR", help="pin the links and maps under DIR (bpffs) and exit")
    parser.add_argument("--events", metavar="MAP", action="append", default=[],
                        help="print the records of this ringbuf/perf_event_array map while attached (repeatable)")
    parser.add_argument("--event-type", metavar="STRUCT", default="event",
                        help="BTF struct that decodes --events records (default: event; else hex)")
    parser.add_argument("--json", action="store_true", help="--events records as one JSON object a line; status to stderr")
    from .cmd_load import add_map_size_argument, add_set_argument

    add_map_size_argument(parser)
    add_set_argument(parser)
    parser.add_argument("--trace-pipe", action="store_true", help="print bpf_printk output (tracefs trace_pipe) while attached")


def _describe(lk: Any) -> str:
    what = getattr(lk, "description", "") or repr(lk)
    if type(lk).__name__ == "MultiPerfGroup":  # a wildcard without multi links: one perf event each
        ioctl = all(type(m).__name__ == "PerfEventIoctlLink" for m in lk)
        return f"{what} ({len(lk)} perf events, {'ioctl' if ioctl else 'link'})"
    how = {"PerfEventIoctlLink": "ioctl", "StructOpsMapLink": "map update, no link",
           "CgroupProgAttachment": "BPF_PROG_ATTACH, no link"}.get(type(lk).__name__, "link")
    return f"{what} ({how})"


def _pick_program(coll: Any, name: str | None) -> tuple[str, Any]:
    from ..errors import UsageError

    programs = dict(coll.programs)
    if name:
        if name not in programs:
            raise UsageError(f"no program {name!r} in the object (it has: {', '.join(programs) or 'none'})")
        return name, programs[name]
    if len(programs) == 1:
        return next(iter(programs.items()))
    raise UsageError(f"the object has {len(programs)} programs ({', '.join(programs)}): choose one with --program")


MAX_EXPANDED = 1000  # wildcard matches attached one perf event each (no multi links)


class _Progress:
    """``attaching 12/40 WHAT`` on stderr, only when it is a terminal and there are several
    (the total is the first step's)."""

    def __init__(self) -> None:
        self.on: bool | None = None

    def __call__(self, done: int, total: int, what: str = "") -> None:
        if self.on is None:
            self.on = total > 1 and sys.stderr.isatty()
        if self.on:
            sys.stderr.write(f"\rattaching {done}/{total} {what[:50]}\033[K")
            sys.stderr.flush()

    def done(self) -> None:
        if self.on:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _hinted(exc: Any, spec: Any) -> Any:
    """A NotFoundError for a missing symbol, reworded with a did-you-mean (the original
    message stays in the --verbose cause chain)."""
    from ..errors import NotFoundError, NotSupportedError
    from . import hints

    if isinstance(exc, NotSupportedError) and exc.feature == "kprobes":
        new: Any = NotSupportedError("kprobes", "")
        new.message = ("kprobes are not available: this kernel was built without CONFIG_KPROBES "
                       f"(no kprobe PMU, no kprobe_events); cannot attach {spec.text}")
        new.args = (new.message,)
        new.__cause__ = exc
        return new
    if not isinstance(exc, NotFoundError) or spec.is_wildcard:
        return exc
    if spec.kind in ("kprobe", "kretprobe") and "not found" in str(exc):
        new = NotFoundError(f"attach {spec.text}: {hints.kernel_symbol_hint(spec.function)}")
    elif spec.kind in ("uprobe", "uretprobe") and spec.function and "not found in" in str(exc):
        from .. import link

        try:
            exe = link.Executable(spec.binary)
            new = NotFoundError(f"attach {spec.text}: {hints.binary_symbol_hint(spec.function, exe.path, exe.symbols())}")
        except Exception:
            return exc
    else:
        return exc
    new.__cause__ = exc
    return new


def _attach_specs(args: argparse.Namespace, coll: Any, attached: dict[str, Any]) -> None:
    """Each SPEC through bpfkit.attach.attach_probe, the one attach path (a wildcard k/uprobe
    is one kprobe_multi/uprobe_multi link, or one perf event per match, at most MAX_EXPANDED,
    where the kernel has none or with --mode ioctl)."""
    from .. import attach
    from ..errors import BPFKitError
    from ..probespec import parse_probe

    name, prog = _pick_program(coll, args.program)
    specs = [parse_probe(text) for text in args.spec]
    progress = _Progress()
    try:
        for i, spec in enumerate(specs, 1):
            progress(i, len(specs), spec.text)
            key = name if len(specs) == 1 else f"{name}@{spec.text}"
            targets = _Progress()  # of this spec's targets: a wildcard's perf events, USDT sites
            try:
                attached[key] = attach.attach_probe(
                    spec, prog, mode=args.mode, pid=args.pid, cookie=args.cookie, max_perf_targets=MAX_EXPANDED,
                    progress=functools.partial(targets, what=spec.text))
            except BPFKitError as exc:
                raise _hinted(exc, spec)
            finally:
                targets.done()
    finally:
        progress.done()


def _attach_sections(args: argparse.Namespace, coll: Any, attached: dict[str, Any]) -> dict[str, str]:
    """Every program (or the one --program names) where its section says, and the struct_ops
    maps, through bpfkit.attach.attach_all; returns the notes of the programs skipped."""
    from .. import attach

    progress = _Progress()
    try:
        made = attach.attach_all(coll, mode=args.mode, pid=args.pid, cookie=args.cookie,
                                 programs=[args.program] if args.program else None, progress=progress,
                                 cgroup=args.cgroup, netkit=args.netkit)
    finally:
        progress.done()
    attached.update(made.links)
    # struct_ops callbacks run through the maps just registered: no note for those.
    return {name: why for name, why in made.skipped.items() if name not in made.callbacks}


def _link_pin_name(name: str, lk: Any = None) -> str:
    pin_name = name.replace("/", "_").replace(":", "_").replace("@", "_")
    if type(lk).__name__ == "StructOpsLink":
        pin_name += "_link"  # DIR/<map> is the struct_ops map's own pin
    return pin_name


def _link_kind(lk: Any) -> str:
    return "struct_ops map (registered)" if type(lk).__name__ == "StructOpsMapLink" else "link"


def _map_pin_name(name: str) -> str:
    return name.lstrip(".")


def _check_pin_names(directory: str, spec: Any) -> None:
    """Refuse, before anything is loaded, map and program names from the object that would
    not pin as one component of ``directory`` (docs/security.md)."""
    from .._kernel import bpffs

    for name in spec.programs:
        bpffs.pin_path(directory, name, "program", _link_pin_name(name))
    for name in spec.maps:
        bpffs.pin_path(directory, name, "map", _map_pin_name(name))


def _pin_all(directory: str, coll: Any, attached: dict[str, Any], say: Any) -> None:
    """Pin every link and map under ``directory`` (already checked to be on bpffs): all or
    nothing. On any failure the pins made here and the directories created are removed, so
    the links detach when the caller closes them."""
    from .._kernel import bpffs
    from ..errors import KernelError

    made_dirs: list[str] = []
    undo: list[Any] = []
    # A link's name is its program's (checked before loading), or program@SPEC, whose SPEC
    # ("uprobe:/bin/bash:readline") is the user's: only the derived pin name is judged.
    plan = [(_link_kind(lk) + f" {name}",
             bpffs.pin_path(directory, _link_pin_name(name, lk), f"link {name!r}: pin name"), lk)
            for name, lk in attached.items()]
    taken = {path for _, path, _ in plan}  # a map-only struct_ops registration pins its map
    for name, m in coll.maps.items():
        path = bpffs.pin_path(directory, name, "map", _map_pin_name(name))
        if not getattr(m, "pinned_path", None) and path not in taken:
            plan.append((f"map {name}", path, m))
    try:
        try:
            bpffs.make_dirs(directory, made_dirs)
        except OSError as exc:
            raise KernelError(f"create pin directory {exc.filename or directory}", exc.errno or 0) from None
        for _what, path, obj in plan:
            obj.pin(path)
            undo.append(obj)
    except BaseException:
        for obj in reversed(undo):
            try:
                obj.unpin()
            except Exception:
                pass
        bpffs.remove_dirs(made_dirs)
        raise
    for what, path, _ in plan:
        say(f"pinned {what} at {path}")


def _event_stream(args: argparse.Namespace, spec: Any, coll: Any) -> Any:
    from ..errors import UsageError
    from .cmd_events import EventStream
    from .output import record_format

    fmt = record_format(spec.btf, args.event_type)
    maps = []
    for name in args.events:
        if name not in coll.maps:
            raise UsageError(f"--events {name}: no map {name!r} in the object (it has: {', '.join(coll.maps)})")
        maps.append((coll.maps[name], fmt))
    return EventStream(maps, json_lines=args.json)


def run(args: argparse.Namespace) -> int:
    import bpfkit

    from ..errors import BPFKitError, UsageError

    status = sys.stderr if args.json else sys.stdout

    def say(msg: str) -> None:
        print(msg, file=status, flush=True)

    # SIGTERM before the links exist must also unwind through the finally blocks below.
    def early_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, early_term)
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        from .cmd_load import apply_map_sizes, apply_sets

        pin_dir = None
        if args.pin:  # judged (resolved, on bpffs) before anything is loaded or created
            from .._kernel.bpffs import check_pin_dir

            pin_dir = check_pin_dir(args.pin, "--pin")
        spec = bpfkit.load_spec(args.object)
        apply_sets(spec, args.set)
        apply_map_sizes(spec, args.map_size)
        if pin_dir:
            try:
                _check_pin_names(pin_dir, spec)
            except BPFKitError as exc:
                raise exc.wrap(f"attach {args.object} --pin {pin_dir}")
        with bpfkit.Collection(spec) as coll:
            attached: dict[str, Any] = {}
            stream = pipe = None
            try:
                if args.spec and args.cgroup:
                    raise UsageError("--cgroup attaches the object's cgroup programs by section: drop SPEC")
                if args.spec and args.netkit:
                    raise UsageError("--netkit attaches the object's netkit programs by section: drop SPEC "
                                     "(or give netkit:IFACE[:peer] as the SPEC)")
                if args.spec:
                    skipped: dict[str, str] = {}
                    _attach_specs(args, coll, attached)
                else:
                    skipped = _attach_sections(args, coll, attached)
                for name, reason in skipped.items():
                    print(f"bpfkit: note: skipped program {name}: {reason}", file=sys.stderr)
                if not attached:
                    raise UsageError(f"nothing to attach in {args.object}: give a SPEC and --program")
                for name, lk in attached.items():
                    say(f"attached {name}: {_describe(lk)}")
                if pin_dir:
                    _pin_all(pin_dir, coll, attached, say)
                    say(f"{len(attached)} link(s) pinned under {pin_dir}; remove the pins to detach")
                    return 0
                if args.events:
                    stream = _event_stream(args, spec, coll)
                if args.trace_pipe:
                    from .cmd_events import TracePipe

                    pipe = TracePipe()
                with StopSignals() as stop:  # installed before the line that says we are ready
                    say(f"{len(attached)} program(s) attached; Ctrl-C or SIGTERM to detach")
                    if stream is not None:
                        stream.run(stop)
                    else:
                        while not stop.wait():
                            pass
            finally:
                # A second Ctrl-C must not cut detaching short and leave tracefs probes behind.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                errors = []
                for closer in ([pipe.close] if pipe else []) + ([stream.close] if stream else []):
                    try:
                        closer()
                    except Exception as exc:
                        errors.append(exc)
                for name in reversed(list(attached)):
                    try:
                        attached[name].close()
                    except Exception as exc:  # keep closing the others
                        errors.append(exc)
                if errors:
                    raise errors[0]
        say("detached")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
