# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach``: load an object, attach its programs, stay until Ctrl-C or SIGTERM.

    bpfkit attach prog.bpf.o                                   # every program whose section names a target
    bpfkit attach prog.bpf.o tracepoint:syscalls:sys_enter_openat --program handle_openat
    bpfkit attach prog.bpf.o uprobe:/bin/bash:readline --mode ioctl
    bpfkit attach opensnoop.bpf.o --events events --json      # print ring buffer records
    bpfkit attach execsnoop.bpf.o --events events:event --char-arrays args=strings
    bpfkit attach prog.bpf.o --pin /sys/fs/bpf/mytool          # pin links and maps, exit
    bpfkit attach prog.bpf.o -p handle_exec -p 'on_switch_btf|on_switch_raw'  # only these load
    bpfkit attach profile.bpf.o profile:hz:99 --stacks counts --output profile.svg   # a flame graph on exit

Programs named by -p/--program are the only ones loaded (libbpf's autoload); ``-p 'a|b'``
loads the first of a, b the kernel accepts (a tp_btf program, else its raw_tp twin).

SIGTERM is turned into the same clean exit as Ctrl-C: links are closed and tracefs probes
removed before the process ends.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import time

from . import argtypes
from .stop_signals import StopSignals

TYPE_CHECKING = False  # not typing's: importing typing costs ~1.5 ms of start-up, for annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

DESCRIPTION = """\
Load a BPF object and attach its programs: every program whose section names its target (kprobe/SYM,
tracepoint/GROUP/NAME, uprobe/BINARY:FUNC, ...) when no SPEC is given, else the one program
(--program) at the probe SPEC (kprobe:FN, kretprobe:FN, tracepoint:GROUP:NAME, uprobe:BINARY:FN,
uretprobe:BINARY:FN; a wildcard such as kprobe:vfs_* or uprobe:libc:str* is one
kprobe_multi/uprobe_multi link, or one perf event per match where the kernel has none;
uprobe.session:BINARY:FN and kprobe.session:FN run it on entry and return through one session link).
Stays until Ctrl-C or SIGTERM, then detaches cleanly.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", metavar="OBJ", help="compiled BPF object (.bpf.o)")
    parser.add_argument("spec", metavar="SPEC", nargs="*", default=[],
                        help="where to attach, in bpftrace's grammar (tracepoint:syscalls:sys_enter_openat, kprobe:FN, "
                             "uprobe:/path:FN, uprobe:libc:str*, xdp:IFACE, tc:IFACE:ingress, netkit:IFACE:peer); several allowed; "
                             "default: from the programs' section names")
    parser.add_argument("--program", "-p", metavar="NAME[|ALT...]", action="append", default=[],
                        help="load and attach only this program, the others are not loaded (repeatable; needed with "
                             "SPEC when the object has several, and then only one); 'a|b' is a group of alternatives: "
                             "the first the kernel loads is kept")
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
    parser.add_argument("--events", metavar="MAP[:TYPE]", action="append", default=[],
                        help="print the records of this ringbuf/perf_event_array map while attached, decoded as struct "
                             "TYPE (of the object's BTF, else its DWARF; default: --event-type) (repeatable)")
    parser.add_argument("--event-type", metavar="STRUCT", default="event",
                        help="struct that decodes --events records without a :TYPE (default: event; hex when the "
                             "object has none)")
    from .cmd_events import add_char_arrays_argument

    add_char_arrays_argument(parser)
    parser.add_argument("--json", action="store_true", help="--events records as one JSON object a line; status to stderr")
    from .cmd_load import add_spec_edit_arguments  # load's module: the one attach shares them with

    add_spec_edit_arguments(parser)
    parser.add_argument("--trace-pipe", action="store_true", help="print bpf_printk output (tracefs trace_pipe) while attached")
    parser.add_argument("--metrics", metavar="ADDR",
                        help="serve the object's BTF-typed hash and array maps as Prometheus metrics on http://ADDR/metrics "
                             "while attached (127.0.0.1:9435, or :9435 for every interface); needs bpfkit[metrics]")
    parser.add_argument("--otlp", metavar="ENDPOINT",
                        help="send the records of the --events maps (default: every ringbuf and perf_event_array map) as "
                             "OpenTelemetry log records to this OTLP/HTTP endpoint (http://HOST:4318); needs bpfkit[otlp]")
    parser.add_argument("--metrics-config", metavar="FILE",
                        help="YAML: which maps, metric names, help, counter/gauge, labels and their decoders (docs/metrics.md)")
    parser.add_argument("--metrics-web-config", metavar="FILE",
                        help="YAML, the Prometheus exporters' --web.config.file: TLS (tls_server_config) and basic "
                             "authentication (basic_auth_users, bcrypt hashes) for --metrics (docs/metrics.md)")
    parser.add_argument("--stacks", metavar="MAP",
                        help="on exit, write the stacks counted in MAP (key: struct with pid/tgid, user_stack_id, "
                             "kernel_stack_id/kern_stack_id, comm/name; value: a count, a time, or a struct's delta; "
                             "docs/stacks.md) to --output; MAP may be the stack-trace map: the counts map is then the "
                             "one keyed by stack ids")
    parser.add_argument("--stack-map", metavar="MAP",
                        help="the BPF_MAP_TYPE_STACK_TRACE map the ids index (default: the object's only one)")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="--stacks output, by suffix: .svg (flame graph), .pprof/.pb.gz (pprof), .folded, "
                             ".speedscope.json")


def _describe(lk: Any) -> str:
    what = getattr(lk, "description", "") or repr(lk)
    if type(lk).__name__ == "MultiPerfGroup":  # a wildcard without multi links: one perf event each
        ioctl = all(type(m).__name__ == "PerfEventIoctlLink" for m in lk)
        return f"{what} ({len(lk)} perf events, {'ioctl' if ioctl else 'link'})"
    return f"{what} ({getattr(lk, 'attached_by', 'link')})"  # the link class says how, else a bpf_link


def _program_groups(values: list[str]) -> list[tuple[str, ...]]:
    """``-p a -p 'b|c'`` as groups of alternatives: [("a",), ("b", "c")]."""
    from ..errors import UsageError

    groups = [tuple(part.strip() for part in value.split("|")) for value in values]
    for value, group in zip(values, groups):
        if not all(group):
            raise UsageError(f"--program {value!r}: a name, or names separated by '|' (alternatives)")
    return groups


def _selection(spec: Any, groups: list[tuple[str, ...]]) -> list[tuple[str, ...]] | None:
    """What Collection(programs=...) loads for these -p groups: without -p, everything, twins
    as alternatives (bpfkit.spec.twins). A struct_ops map named by -p brings its callbacks; one
    not named is not created."""
    if not groups:
        from ..spec.twins import load_selection

        return load_selection(spec)
    named = {name for group in groups for name in group}
    chosen = [g for g in groups if not (len(g) == 1 and g[0] in spec.maps and spec.maps[g[0]].struct_ops)]
    for name, mspec in spec.maps.items():
        if mspec.struct_ops is None:
            continue
        if name in named:
            mspec.struct_ops.autocreate = True
            chosen += [(p,) for p in mspec.struct_ops.programs.values() if p not in named]
            named |= set(mspec.struct_ops.programs.values())
        else:
            mspec.struct_ops.autocreate = False
    return chosen


def _check_one_group(groups: list[tuple[str, ...]]) -> None:
    from ..errors import UsageError

    if len(groups) > 1:
        raise UsageError(f"a SPEC attaches one program, and --program names {len(groups)} "
                         f"({', '.join('|'.join(g) for g in groups)}): attach them at their sections' targets "
                         "(no SPEC), or run one attach per program")


def _pick_program(coll: Any, groups: list[tuple[str, ...]]) -> tuple[str, Any]:
    """The one program a SPEC attaches: the one -p loaded (of its alternatives), or the
    object's only program."""
    from ..errors import UsageError

    _check_one_group(groups)
    programs = dict(coll.programs)
    if groups:
        return next((name, programs[name]) for name in groups[0] if name in programs)
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
            from .output import shown

            sys.stderr.write(f"\rattaching {done}/{total} {shown(what[:50])}\033[K")
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

    name, prog = _pick_program(coll, _program_groups(args.program))
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
    """Every program loaded (those --program named) where its section says, and the
    struct_ops maps, through bpfkit.attach.attach_all; returns the notes of the programs skipped."""
    from .. import attach

    wanted = None
    if args.program:  # the programs loaded of the groups, and the struct_ops maps named
        wanted = [n for group in _program_groups(args.program) for n in group
                  if n in coll.programs or n in coll.struct_ops_maps()]
    progress = _Progress()
    try:
        made = attach.attach_all(coll, mode=args.mode, pid=args.pid, cookie=args.cookie,
                                 programs=wanted, progress=progress, cgroup=args.cgroup, netkit=args.netkit)
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


def _summary(coll: Any, attached: dict[str, Any], pin_dir: str | None = None) -> list[str]:
    """The closing lines of ``attach``: struct_ops maps named as registered (with their kernel
    struct), the programs counted. With --pin: a map-only struct_ops (``.struct_ops``, no link)
    stays registered when its pin is removed (the kernel holds a registered map), so the line
    names the command that unregisters it; links detach once their pins are removed."""
    lines, links, programs = [], 0, 0
    for name, lk in attached.items():
        kind = type(lk).__name__
        if kind not in ("StructOpsLink", "StructOpsMapLink"):
            programs, links = programs + 1, links + 1
            continue
        ops = getattr(coll.maps.get(name), "struct_ops", None)
        line = f"registered struct_ops map {name} ({ops.kernel_type_name if ops is not None else 'struct_ops'})"
        if pin_dir and kind == "StructOpsMapLink":
            line += (f": no link, removing its pin leaves it registered; "
                     f"`bpfkit struct-ops unregister {lk.pinned_path}` unregisters it")
        elif pin_dir:
            links += 1
        lines.append(line)
    if pin_dir:
        if links:
            lines.append(f"{links} link(s) pinned under {pin_dir}; remove their pins to detach")
    else:
        what = f"{programs} program(s) attached" if programs else "registered"
        lines.append(f"{what}; Ctrl-C or SIGTERM to detach")
    return lines


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


def _event_formats(args: argparse.Namespace, spec: Any) -> dict[str, Any]:
    """--events MAP[:TYPE] -> the RecordFormat of each map's records (None: printed as hex),
    judged from the object before anything is loaded: a type named that neither its BTF nor its
    DWARF has is an error then, not after the programs are attached."""
    from .cmd_events import record_format_of

    formats = {}
    for value in args.events:
        type_name = value.partition(":")[2]
        formats[value] = record_format_of(spec.btf, type_name or args.event_type, f"--events {value}",
                                          named=bool(type_name) or args.event_type != "event")
    return formats


def _event_stream(args: argparse.Namespace, formats: dict[str, Any], coll: Any) -> Any:
    from .cmd_events import EventStream, char_arrays

    pairs = [(m, formats[value]) for value, m in zip(args.events, _events_maps(coll, args.events))]
    return EventStream(pairs, json_lines=args.json, char_arrays=char_arrays(args.char_arrays))


def _events_maps(coll: Any, names: list[str]) -> list[Any]:
    """The maps --events names (MAP or MAP:TYPE; for printing or --otlp), each one the object's."""
    from ..errors import UsageError

    maps = []
    for value in names:
        name = value.partition(":")[0]
        if name not in coll.maps:
            raise UsageError(f"--events {value}: no map {name!r} in the object (it has: {', '.join(coll.maps)})")
        maps.append(coll.maps[name])
    return maps


def _otlp_stream(args: argparse.Namespace, spec: Any, coll: Any, say: Any) -> tuple[Any, Any]:
    """The --events maps (or every ringbuf and perf_event_array map) read into OpenTelemetry
    log records, decoded through the BTF struct --event-type names."""
    from ..errors import UsageError
    from .cmd_events import EventStream

    try:
        from ..metrics.otlp import OtlpEvents, event_codec, otlp_exporter
    except ImportError as exc:
        raise UsageError(f"--otlp needs the OpenTelemetry SDK ({exc.name} is missing): pip install 'bpfkit[otlp]'") from None
    from ..metrics.plan import object_name

    names = args.events or [n for n, m in coll.maps.items() if m.type.name in ("RINGBUF", "PERF_EVENT_ARRAY")]
    if not names:
        raise UsageError(f"--otlp: {args.object} has no ringbuf or perf_event_array map to read records from")
    maps = _events_maps(coll, names)
    # MAP:TYPE names a map's record type; the others take --event-type (default event)
    codecs = {m.name: event_codec(spec.btf, value.partition(":")[2] or args.event_type,
                                  f"--events {value}" if value.partition(":")[2] else "--event-type")
              for value, m in zip(names, maps)}
    otlp = OtlpEvents(otlp_exporter(args.otlp), object_name=object_name(args.object))
    try:
        stream = EventStream([(m, None) for m in maps],
                             make_sink=lambda m, _fmt: otlp.sink(m.name, codecs[m.name], m.type.name == "PERF_EVENT_ARRAY"))
    except BaseException:
        otlp.close()
        raise
    types = ", ".join(sorted({c.type_name for c in codecs.values()}))
    say(f"sending records of {', '.join(n.partition(':')[0] for n in names)} ({types}) as OpenTelemetry logs to {args.otlp}")
    return stream, otlp


def _metrics_file(args: argparse.Namespace, option: str, path: str | None, needs: str,
                  import_loader: Callable[[], Callable[[str], Any]]) -> Any:
    """The file ``option`` names, read by the loader ``import_loader`` imports (None without it);
    it goes with --metrics, and needs the metrics extra's packages (``needs`` names them)."""
    from ..errors import UsageError

    if not path:
        return None
    if not args.metrics:
        raise UsageError(f"{option} needs --metrics ADDR (where to serve the metrics)")
    try:
        load = import_loader()
    except ImportError as exc:
        raise UsageError(f"{option} needs {needs} ({exc.name} is missing): pip install 'bpfkit[metrics]'") from None
    return load(path)


def _import_load_config() -> Callable[[str], Any]:
    from ..metrics.ebpf_exporter.config import load_metrics_config  # bpfkit's format or ebpf_exporter's

    return load_metrics_config


def _import_load_web_config() -> Callable[[str], Any]:
    from ..metrics.webconfig import load_web_config

    return load_web_config


def _metrics_config(args: argparse.Namespace) -> Any:
    return _metrics_file(args, "--metrics-config", args.metrics_config, "PyYAML", _import_load_config)


def _metrics_web_config(args: argparse.Namespace) -> Any:
    return _metrics_file(args, "--metrics-web-config", args.metrics_web_config, "PyYAML and bcrypt",
                         _import_load_web_config)


def _exporter_collector(args: argparse.Namespace, coll: Any, attached: dict[str, Any], say: Any) -> Any:
    """An ebpf_exporter config's collector (bpfkit.metrics.ebpf_exporter) over the loaded object."""
    from ..metrics.ebpf_exporter.collector import ProgramEntry
    from ..metrics.ebpf_exporter.run import collector_for

    cfg = args.metrics_config_loaded
    programs = [ProgramEntry(cfg.name, name, prog, name in attached) for name, prog in coll.programs.items()]
    collector = collector_for(cfg, coll.maps, programs)
    say(f"serving {len(cfg.map_names)} metric(s) of ebpf_exporter config {cfg.name}: {', '.join(cfg.map_names)}")
    return collector


def _metrics_server(args: argparse.Namespace, coll: Any, say: Any, attached: dict[str, Any]) -> tuple[Any, Any]:
    """Plan every map of the object (bpfkit.metrics) and serve them on --metrics ADDR; with an
    ebpf_exporter config, its metrics. (server, collector to close after it or None)"""
    from ..errors import UsageError
    from ..metrics.plan import internal_maps, object_name, plan_collection

    try:
        from ..metrics.collector import MapCollector
        from ..metrics.ebpf_exporter.config import ExporterConfig
        from ..metrics.server import MetricsServer, every_interface, parse_address, warn_every_interface
    except ImportError as exc:
        raise UsageError(f"--metrics needs the prometheus_client package ({exc.name} is missing): "
                         "pip install 'bpfkit[metrics]'") from None
    web = args.metrics_web_config_loaded
    if isinstance(args.metrics_config_loaded, ExporterConfig):
        collector = _exporter_collector(args, coll, attached, say)
        try:
            if every_interface(parse_address(args.metrics)[0]) and not (web is not None and web.authenticates):
                warn_every_interface(args.metrics)
            server = MetricsServer(args.metrics, [collector], web_config=web)
        except BaseException:
            collector.close()
            raise
        say(f"metrics on {server.url}")
        return server, collector
    if args.metrics_config_loaded is not None:
        from ..metrics.config import apply_config

        plans = apply_config(args.metrics_config_loaded, coll.maps, object_name(args.object))
    else:
        plans = plan_collection(coll.maps, object_name(args.object))
    if not getattr(args.metrics_config_loaded, "only_listed", False):
        served = {p.map.name for p in plans}
        for name, why in internal_maps(coll.maps, object_name(args.object)).items():
            if name not in served:
                print(f"bpfkit: note: metrics: map {name} not served: {why} (--metrics-config that names it serves it)",
                      file=sys.stderr)
    if not plans:
        raise UsageError(f"--metrics {args.metrics}: no map of {args.object} can be served (metrics come from "
                         "hash and array maps, per-CPU or not, with BTF-typed keys and numeric values)")
    for plan in plans:
        for why in plan.skipped:
            print(f"bpfkit: note: metrics: map {plan.map.name}: field {why} not served", file=sys.stderr)
    if every_interface(parse_address(args.metrics)[0]) and not (web is not None and web.authenticates):
        warn_every_interface(args.metrics)
    server = MetricsServer(args.metrics, [MapCollector(plans)], web_config=web)
    say(f"serving {len(plans)} map(s) as metrics on {server.url}: {', '.join(p.map.name for p in plans)}")
    return server, None


def _check_stacks_args(args: argparse.Namespace) -> None:
    from ..errors import UsageError

    if bool(args.stacks) != bool(args.output):
        raise UsageError("--stacks MAP and --output FILE go together" if args.stacks or args.output
                         else "--stack-map needs --stacks")
    if args.stack_map and not args.stacks:
        raise UsageError("--stack-map needs --stacks")
    if args.stacks:
        from .._files import check_output
        from ..profile import format_for

        format_for(args.output)  # an unknown suffix is refused before anything is loaded
        check_output(args.output, "profile")  # and a FIFO, a device, a missing directory
        if args.pin:
            raise UsageError("--stacks writes a profile when bpfkit attach exits: not with --pin")


def _stack_maps(args: argparse.Namespace, spec: Any) -> tuple[str, str]:
    """(counts map, stack-trace map) named in the object, checked before loading. --stacks
    names either: the counts map, or the stack-trace map (then the counts map is the one hash
    map keyed by a struct with stack ids: bpfkit.profile.keys). A stack-trace map left unsized
    (libbpf-tools' stackmap) gets the sizes its tool would give it (bpfkit.profile.stackmap)."""
    from ..errors import UsageError
    from ..profile.keys import counts_maps, counts_shape, key_summary
    from ..spec.consts import MapFlag, MapType
    from .output import shown

    if args.stacks not in spec.maps:
        raise UsageError(f"--stacks {args.stacks}: no map {args.stacks!r} in {args.object} "
                         f"(it has: {', '.join(spec.maps) or 'none'})")
    # Build-id stack maps hold (build id, offset) pairs, not addresses: not what --stacks names.
    traces = [n for n, m in spec.maps.items() if m.type == MapType.STACK_TRACE and not m.flags & MapFlag.STACK_BUILD_ID]
    keyed = counts_maps(spec.maps)
    stack_map = args.stack_map
    if args.stacks in traces:  # the stack-trace map: the counts map is found by its key
        if stack_map and stack_map != args.stacks:
            raise UsageError(f"--stacks {args.stacks} is a stack-trace map, and --stack-map names {stack_map}: "
                             "give --stacks the map that counts the stacks")
        if len(keyed) != 1:
            raise UsageError(f"--stacks {args.stacks}: a stack-trace map; {args.object} has {len(keyed)} hash maps "
                             f"keyed by a struct with stack ids ({', '.join(keyed) or 'none'}): name the one that counts "
                             f"the stacks, --stacks COUNTS --stack-map {args.stacks}")
        counts, stack_map = keyed[0], args.stacks
        print(shown(f"bpfkit: note: --stacks {args.stacks} is the stack-trace map: counting map {counts} "
                    f"(key {key_summary(spec.maps[counts])})"), file=sys.stderr)
    else:
        counts = args.stacks
        if counts_shape(spec.maps[counts]) is None:
            others = f"; the maps keyed so: {', '.join(keyed)}" if keyed else ""
            raise UsageError(f"--stacks {counts}: not a map of stack counts: a hash map whose key is a BTF struct with "
                             f"user_stack_id or kernel_stack_id (kern_stack_id) fields; its key is "
                             f"{key_summary(spec.maps[counts])}{others}")
    if stack_map:
        if stack_map not in traces:
            raise UsageError(f"--stack-map {stack_map}: not a BPF_MAP_TYPE_STACK_TRACE map of addresses in "
                             f"{args.object} (those are: {', '.join(traces) or 'none'}; build-id stack maps hold "
                             "(build id, offset) pairs)")
    elif len(traces) != 1:
        raise UsageError(f"--stacks {args.stacks}: {args.object} has {len(traces)} BPF_MAP_TYPE_STACK_TRACE maps "
                         f"({', '.join(traces) or 'none'}): name the one its stack ids index with --stack-map")
    else:
        stack_map = traces[0]
    _size_stack_map(args, spec.maps[stack_map], stack_map)
    return counts, stack_map


def _size_stack_map(args: argparse.Namespace, mspec: Any, name: str) -> None:
    """Sizes the object left 0 (and --map-size does not set) filled in, with a note."""
    from ..profile.stackmap import size_stack_map
    from .output import shown

    given = frozenset(item.partition("=")[0].partition(".")[2] for item in args.map_size
                      if item.partition("=")[0].partition(".")[0] == name)
    done = size_stack_map(mspec, keep=given)
    if done:
        print(shown(f"bpfkit: note: stack-trace map {name} is unsized in {args.object}: {'; '.join(done)} "
                    f"(--map-size {name}.FIELD=N sets another)"), file=sys.stderr)


def _write_stacks(args: argparse.Namespace, coll: Any, maps: tuple[str, str], seconds: float, say: Any) -> None:
    from ..profile import from_maps, write_profile

    prof = from_maps(coll.maps[maps[0]], coll.maps[maps[1]])
    prof.name = f"bpfkit attach {args.object}"
    prof.duration_ns = int(seconds * 1e9)
    fmt = write_profile(prof, args.output)
    unit = "samples" if prof.unit == "count" else f"{prof.unit} ({prof.sample_type})"
    say(f"wrote {args.output} ({fmt}): {len(prof.stacks)} stacks, total {prof.total} {unit}")


def run(args: argparse.Namespace) -> int:
    import bpfkit

    from ..errors import BPFKitError, UsageError
    from .output import shown

    status = sys.stderr if args.json else sys.stdout

    def say(msg: str) -> None:  # names in msg are the object's: printed visibly (bpfkit._visible)
        print(shown(msg), file=status, flush=True)

    # SIGTERM before the links exist must also unwind through the finally blocks below. The
    # console script's handler does (bpfkit.cli._exit_quietly), and holds a signal back while
    # a module is imported lazily: a KeyboardInterrupt inside a class's creation would come out
    # as RuntimeError. A library caller's main() gets a plain raise.
    from . import _exit_quietly, signals_are_quiet

    def early_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _exit_quietly if signals_are_quiet() else early_term)
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        from .cmd_load import apply_spec_edits

        pin_dir = None
        if args.pin:  # judged (resolved, on bpffs) before anything is loaded or created
            from .._kernel.bpffs import check_pin_dir

            pin_dir = check_pin_dir(args.pin, "--pin")
        args.metrics_config_loaded = _metrics_config(args)  # judged before anything is loaded
        args.metrics_web_config_loaded = _metrics_web_config(args)
        _check_stacks_args(args)
        spec = bpfkit.load_spec(args.object)
        if args.metrics_config_loaded is not None:
            from ..metrics.ebpf_exporter.config import ExporterConfig, prepare_spec

            if isinstance(args.metrics_config_loaded, ExporterConfig):
                prepare_spec(args.metrics_config_loaded, spec)  # its kaddr_<symbol> constants
        stack_maps = _stack_maps(args, spec) if args.stacks else None
        event_formats = _event_formats(args, spec) if args.events and not args.otlp else {}
        apply_spec_edits(spec, args)
        if pin_dir:
            try:
                _check_pin_names(pin_dir, spec)
            except BPFKitError as exc:
                raise exc.wrap(f"attach {args.object} --pin {pin_dir}")
        groups = _program_groups(args.program)
        if args.spec and len(groups) > 1:
            _check_one_group(groups)  # refused before anything is loaded
        with bpfkit.Collection(spec, programs=_selection(spec, groups)) as coll:
            for name, why in coll.not_loaded.items():
                print(shown(f"bpfkit: note: did not load program {name} (an alternative loaded instead): {why}"),
                      file=sys.stderr)
            attached: dict[str, Any] = {}
            stream = pipe = server = otlp = exporter = None
            started = time.monotonic()
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
                    print(shown(f"bpfkit: note: skipped program {name}: {reason}"), file=sys.stderr)
                if not attached:
                    raise UsageError(f"nothing to attach in {args.object}: give a SPEC and --program")
                for name, lk in attached.items():
                    say(f"attached {name}: {_describe(lk)}")
                if pin_dir:
                    _pin_all(pin_dir, coll, attached, say)
                    for line in _summary(coll, attached, pin_dir):
                        say(line)
                    return 0
                if args.otlp:
                    stream, otlp = _otlp_stream(args, spec, coll, say)
                elif args.events:
                    stream = _event_stream(args, event_formats, coll)
                if args.trace_pipe:
                    from .cmd_events import TracePipe

                    pipe = TracePipe()
                if args.metrics:
                    server, exporter = _metrics_server(args, coll, say, attached)
                with StopSignals() as stop:  # installed before the line that says we are ready
                    started = time.monotonic()  # the profile's duration: from here
                    for line in _summary(coll, attached):
                        say(line)
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
                closers = [c.close for c in (server, exporter, pipe, stream, otlp) if c is not None]  # otlp last: flushes
                for closer in closers:
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
            if stack_maps is not None:  # the processes sampled are read while the maps are still open
                _write_stacks(args, coll, stack_maps, time.monotonic() - started, say)
        say("detached")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
