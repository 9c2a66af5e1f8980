# SPDX-License-Identifier: Apache-2.0
"""The /metrics endpoint on an address of the user's: a threading WSGI server answering with
the Prometheus text format (version 0.0.4) of bpfkit's collectors (MapCollector.render, the
fast path; any other prometheus_client Collector through its generate_latest). No process or
platform metrics of Python's are added."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector, CollectorRegistry

from .._closing import ClosesOnExit
from ..errors import KernelError, UsageError
from .collector import MapCollector

__all__ = ["parse_address", "MetricsServer"]


def parse_address(text: str, option: str = "--metrics") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every interface) or ``[V6]:PORT`` -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UsageError(f"{option} {text!r}: not HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:9435 or :9435; 0: any free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port_text)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # no line on stderr per scrape


class MetricsServer(ClosesOnExit):
    """Serves ``collectors`` on http://HOST:PORT/metrics (and /) until :meth:`close`; one
    scrape at a time (the maps are read by one thread)."""

    def __init__(self, address: str, collectors: Iterable[Collector], *, option: str = "--metrics") -> None:
        host, port = parse_address(address, option)
        self.collectors = list(collectors)
        self._others = CollectorRegistry(auto_describe=False)
        for c in self.collectors:
            if not isinstance(c, MapCollector):
                self._others.register(c)
        self._lock = threading.Lock()
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        except OSError as exc:
            raise UsageError(f"{option} {address}: cannot resolve {host!r}: {exc.strerror or exc}") from None

        class Server(ThreadingMixIn, WSGIServer):
            daemon_threads = True
            address_family = family

        try:
            self._httpd = make_server(host, port, self._app, Server, handler_class=_Quiet)
        except OSError as exc:
            raise KernelError(f"{option} {address}: listen on {host} port {port}", exc.errno or errno.EINVAL) from None
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="bpfkit-metrics", daemon=True)
        self._thread.start()
        self.host = host
        self.port = int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def render(self) -> bytes:
        """What a scrape answers."""
        with self._lock:
            text = "".join(c.render() for c in self.collectors if isinstance(c, MapCollector)).encode()
            return text + generate_latest(self._others)

    def _app(self, environ: dict[str, Any], start: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start("404 Not Found", [("Content-Type", "text/plain")])
            return [b"bpfkit serves /metrics\n"]
        body = self.render()
        start("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4), ("Content-Length", str(len(body)))])
        return [body]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

