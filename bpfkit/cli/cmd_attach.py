"""``bpfkit attach``: load an object, attach its programs, stay until Ctrl-C or SIGTERM.

    bpfkit attach prog.bpf.o                                   # every program whose section names a target
    bpfkit attach prog.bpf.o tracepoint:syscalls:sys_enter_openat --program handle_openat
    bpfkit attach prog.bpf.o uprobe:/bin/bash:readline --mode ioctl

SIGTERM is turned into the same clean exit as Ctrl-C: links are closed and tracefs probes
removed before the process ends.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

HELP = "load an object, attach its programs, and stay attached until Ctrl-C/SIGTERM"
DESCRIPTION = (
    "Load a BPF object and attach its programs: every program whose section names its target "
    "(kprobe/SYM, tracepoint/GROUP/NAME, uprobe/BINARY:FUNC, ...) when no SPEC is given, else the "
    "one program (--program) at the probe SPEC (kprobe:FN, kretprobe:FN, tracepoint:GROUP:NAME, "
    "uprobe:BINARY:FN, uretprobe:BINARY:FN). Stays until Ctrl-C or SIGTERM, then detaches cleanly."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="compiled BPF object (.bpf.o)")
    parser.add_argument("spec", metavar="SPEC", nargs="?",
                        help="where to attach (tracepoint:syscalls:sys_enter_openat, kprobe:FN, uprobe:/path:FN); "
                             "default: from the programs' section names")
    parser.add_argument("--program", "-p", metavar="NAME", help="the program to attach (needed with SPEC when the object has several)")
    parser.add_argument("--mode", choices=("auto", "link", "ioctl"), default="auto",
                        help="perf event attach: bpf_link (5.15+), PERF_EVENT_IOC_SET_BPF, or auto (default)")
    parser.add_argument("--pid", type=int, default=None, help="uprobes fire only in this process")


def _describe(lk: Any) -> str:
    what = getattr(lk, "description", "") or repr(lk)
    how = "ioctl" if type(lk).__name__ == "PerfEventIoctlLink" else "link"
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


class _Stop:
    """SIGINT/SIGTERM handlers that just record the signal, so detaching runs in order."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0
        self._old: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.signum = signum
        self.event.set()

    def __enter__(self) -> "_Stop":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handler)
        return self

    def wait(self) -> int:
        while not self.event.wait(3600):
            pass
        return self.signum

    def __exit__(self, *exc: object) -> None:
        for sig, prev in self._old.items():
            signal.signal(sig, prev)


def run(args: argparse.Namespace) -> int:
    import bpfkit
    from .. import link
    from ..errors import UsageError

    # SIGTERM before the links exist must also unwind through the finally blocks below.
    def early_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, early_term)
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        spec = bpfkit.load_spec(args.object)
        with bpfkit.Collection(spec) as coll:
            if args.spec:
                name, prog = _pick_program(coll, args.program)
                attached: dict[str, Any] = {name: link.attach_probe(args.spec, prog, mode=args.mode, pid=args.pid)}
                skipped: dict[str, str] = {}
            else:
                links = link.attach_all(coll, mode=args.mode, pid=args.pid,
                                        programs=[args.program] if args.program else None)
                attached, skipped = dict(links), links.skipped
            try:
                for name, reason in skipped.items():
                    print(f"bpfkit: note: skipped program {name}: {reason}", file=sys.stderr)
                if not attached:
                    raise UsageError(f"nothing to attach in {args.object}: give a SPEC and --program")
                for name, lk in attached.items():
                    print(f"attached {name}: {_describe(lk)}")
                with _Stop() as stop:  # installed before the line that says we are ready
                    print(f"{len(attached)} program(s) attached; Ctrl-C or SIGTERM to detach", flush=True)
                    stop.wait()
            finally:
                # A second Ctrl-C must not cut detaching short and leave tracefs probes behind.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                errors = []
                for name in reversed(list(attached)):
                    try:
                        attached[name].close()
                    except Exception as exc:  # keep closing the others
                        errors.append(exc)
                if errors:
                    raise errors[0]
        print("detached", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
