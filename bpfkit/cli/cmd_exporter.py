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
                        help="load and attach the configs, then exit: 0 when every one attaches")
    parser.add_argument("--config.strict", dest="config_strict", action="store_true",
                        help="fail when a program of a config cannot be attached (default: note it, go on)")
    parser.add_argument("--web.listen-address", dest="listen", metavar="ADDR", default=":9435",
                        help="where to serve the metrics, HOST:PORT (default :9435, ebpf_exporter's port)")
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
        parse_address(args.listen, "--web.listen-address")  # refused before anything is loaded
        spans = [s for cfg in configs for s in cfg.spans]
        server = tracing = None
        with Exporter(configs, strict=args.config_strict, say=say if args.debug else None) as exp:
            try:
                if args.config_check:
                    say(f"{len(configs)} config(s) loaded, {exp.program_count} program(s) attached: "
                        f"{', '.join(c.name for c in configs)}")
                    return 0 if not exp.skipped else 1
                if spans:
                    tracing = _start_tracing(args, exp, say)
                if every_interface(parse_address(args.listen, "--web.listen-address")[0]) and not (
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
