# SPDX-License-Identifier: Apache-2.0
"""``bpfkit exporter``: ebpf_exporter's command, flags and config directory, served by bpfkit.

    bpfkit exporter --config.dir examples --config.names biolatency,timers
    bpfkit exporter --config.dir /etc/ebpf_exporter --config.names udp-drops --web.listen-address 127.0.0.1:9435
    bpfkit exporter --config.dir examples --config.names biolatency --config.check

Each name is DIR/NAME.yaml, in ebpf_exporter's format, with its object DIR/NAME.bpf.o beside it
(docs/metrics.md, "For ebpf_exporter users").
"""

from __future__ import annotations

import argparse
import signal
import sys

from .stop_signals import StopSignals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DESCRIPTION = """\
Serve ebpf_exporter configs as ebpf_exporter does, with its flags: each of --config.names is
DIR/NAME.yaml in ebpf_exporter's format with its object DIR/NAME.bpf.o beside it; the objects are
loaded, their programs attached by section, and the maps the configs name served as
ebpf_exporter_<name> metrics on --web.listen-address (:9435) until Ctrl-C or SIGTERM.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config.dir", dest="config_dir", metavar="DIR", required=True,
                        help="the directory of the configs (NAME.yaml) and their objects (NAME.bpf.o)")
    parser.add_argument("--config.names", dest="config_names", metavar="NAMES", required=True,
                        help="comma-separated names of the configs to load (biolatency,timers)")
    parser.add_argument("--config.check", dest="config_check", action="store_true",
                        help="load and attach the configs, then exit: 0 when every config loads (with "
                             "--config.strict: and every program attaches)")
    parser.add_argument("--config.strict", dest="config_strict", action="store_true",
                        help="fail when a program of a config cannot be attached (default: note it, go on)")
    parser.add_argument("--web.listen-address", dest="listen", metavar="ADDR", default=":9435",
                        help="where to serve the metrics, HOST:PORT (default :9435, ebpf_exporter's port), or fd://N "
                             "for the N-th socket systemd passed (socket activation)")
    parser.add_argument("--web.telemetry-path", dest="telemetry_path", metavar="PATH", default="/metrics",
                        help="the path the metrics are served on (default /metrics)")
    parser.add_argument("--web.config.file", dest="web_config", metavar="FILE", default=None,
                        help="TLS and basic authentication, in the Prometheus exporter toolkit's format "
                             "(as bpfkit attach --metrics-web-config)")
    parser.add_argument("--otlp", metavar="ENDPOINT", default=None,
                        help="send the configs' tracing: spans to this OTLP/HTTP endpoint (http://127.0.0.1:4318); "
                             "default: OpenTelemetry's variables as ebpf_exporter reads them "
                             "(OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)")
    parser.add_argument("--debug", action="store_true", help="say each program attached")
    parser.add_argument("--btf.path", dest="btf_path", metavar="FILE", default=None,
                        help="a BTF file (or an ELF with .BTF) to resolve CO-RE relocations against instead of the "
                             "running kernel's (ebpf_exporter's --btf.path)")
    # ebpf_exporter's other flags, taken so its service units start unchanged.
    parser.add_argument("--log.no-timestamps", dest="log_no_timestamps", action="store_true",
                        help="accepted for ebpf_exporter's units: bpfkit writes no timestamps")
    parser.add_argument("--config.skip-cache-size", dest="skip_cache_size", metavar="N", type=int, default=0,
                        help="accepted for ebpf_exporter's units: bpfkit bounds its decoders' caches itself "
                             "(65,536 keys a metric)")
    parser.add_argument("--capabilities.keep", dest="capabilities_keep", metavar="CAPS", default="all",
                        help="accepted for ebpf_exporter's units; bpfkit keeps the process's capabilities, and says "
                             "so when CAPS is not 'all'")


def _configs(args: argparse.Namespace) -> Any:
    from ..errors import UsageError

    try:
        from ..metrics.ebpf_exporter.config import load_config_dir
    except ImportError as exc:
        raise UsageError(f"bpfkit exporter needs PyYAML ({exc.name} is missing): pip install 'bpfkit[metrics]'") from None
    names = [n.strip() for n in args.config_names.split(",") if n.strip()]
    return load_config_dir(args.config_dir, names)


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from . import _exit_quietly, signals_are_quiet

    def say(msg: str) -> None:
        print(msg, flush=True)

    def early_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _exit_quietly if signals_are_quiet() else early_term)
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        configs = _configs(args)  # every config judged before anything is loaded
        if args.capabilities_keep.strip().lower() != "all":
            print(f"bpfkit: note: --capabilities.keep {args.capabilities_keep}: bpfkit does not drop capabilities; "
                  "run it with only those it needs (systemd's CapabilityBoundingSet=, a container's cap_drop)",
                  file=sys.stderr)
        web = None
        if args.web_config:
            from ..metrics.webconfig import load_web_config

            web = load_web_config(args.web_config)
        try:
            from ..metrics.ebpf_exporter.run import Exporter
            from ..metrics.server import MetricsServer, every_interface, parse_address, warn_every_interface
        except ImportError as exc:
            raise UsageError(f"bpfkit exporter needs prometheus_client ({exc.name} is missing): "
                             "pip install 'bpfkit[metrics]'") from None
        activated = args.listen.startswith("fd://")  # a socket systemd passed (socket activation)
        if not activated:
            parse_address(args.listen, "--web.listen-address")  # refused before anything is loaded
        spans = [s for cfg in configs for s in cfg.spans]
        server = tracing = None
        with Exporter(configs, strict=args.config_strict, say=say if args.debug else None,
                      kernel_btf=args.btf_path) as exp:
            try:
                if args.config_check:
                    say(f"{len(configs)} config(s) loaded, {exp.program_count} program(s) attached: "
                        f"{', '.join(c.name for c in configs)}")
                    return 0  # as ebpf_exporter: a program that did not attach is a note (--config.strict: an error)
                if spans:
                    tracing = _start_tracing(args, exp, say)
                if not activated and every_interface(parse_address(args.listen, "--web.listen-address")[0]) and not (
                        web is not None and web.authenticates):
                    warn_every_interface(args.listen)
                server = MetricsServer(args.listen, [exp.collector], option="--web.listen-address", web_config=web,
                                       path=args.telemetry_path)
                with StopSignals() as stop:
                    say(f"serving {len(configs)} config(s) ({exp.program_count} program(s) attached) on {server.url}; "
                        "Ctrl-C or SIGTERM to stop")
                    while not stop.wait():
                        pass
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut detaching short
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                for closer in (server, tracing):
                    if closer is not None:
                        closer.close()
        say("detached")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _start_tracing(args: argparse.Namespace, exp: Any, say: Any) -> Any:
    """The configs' ``tracing:`` spans, read from their ring buffers and sent over OTLP/HTTP to
    --otlp, else where OpenTelemetry's environment variables say (as ebpf_exporter: by default
    http://localhost:4318; OTEL_TRACES_EXPORTER=none for no spans)."""
    from ..errors import UsageError

    try:
        from ..metrics.ebpf_exporter.tracing import endpoint_from_env, start_tracing, traces_endpoint
    except ImportError as exc:
        raise UsageError(f"the configs' tracing: spans need opentelemetry-sdk ({exc.name} is missing): "
                         "pip install 'bpfkit[otlp]'") from None
    endpoint = traces_endpoint(args.otlp) if args.otlp else endpoint_from_env()
    if endpoint is None:
        print("bpfkit: note: OTEL_TRACES_EXPORTER=none: the configs' tracing: spans are not read", file=sys.stderr)
        return None
    tracing = start_tracing(exp, endpoint, say)
    exp.collector.tracing = tracing
    return tracing
