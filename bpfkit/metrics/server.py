# SPDX-License-Identifier: Apache-2.0
"""The /metrics endpoint on an address of the user's: the Prometheus text format (version 0.0.4)
of bpfkit's collectors (MapCollector.render, the fast path; any other prometheus_client
Collector through its generate_latest). No process or platform metrics of Python's are added.

Any peer that reaches the port must not be able to exhaust the process, so the server is one
thread running a selector loop (epoll) over non-blocking sockets, plus one thread that renders
(and one that checks bcrypt passwords when basic auth is on):

- at most ``max_connections`` connections; at the limit a new one evicts the connection without
  a whole request head nearest its timeout (a slow or idle one), or is closed at once when every
  connection is being answered. Idle connections cost an fd and a few hundred bytes, no thread.
- a request head (and the TLS handshake) must arrive within ``head_timeout`` seconds of the
  connection, or of the previous answer on a kept-alive one (``idle_timeout``); at most 8 KiB.
- an answer must be written within ``write_timeout`` seconds (a client that does not read).
- accept() failing for want of fds (EMFILE, ENFILE) evicts one idle connection and pauses
  accepting, 5 ms doubling to 1 s, instead of spinning on a listener that stays readable.
- the answer is rendered at most once every ``min_interval`` seconds; one render in flight is
  shared by every scrape that arrives meanwhile, and the answer is one bytes object written to
  every client through memoryviews. While a client is still being sent an answer older than the
  current one, no third is rendered (the current one is served): at most two answers in memory.
- at most 8 password checks wait for bcrypt; more get 503 (cached verdicts are not delayed).

A web config (bpfkit.metrics.webconfig) adds TLS and basic authentication; it is read again
when one of its files changes.
"""

from __future__ import annotations

import errno
import os
import queue
import selectors
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector, CollectorRegistry

from .._closing import ClosesOnExit
from ..errors import BPFKitError, KernelError, UsageError
from .collector import MapCollector

if TYPE_CHECKING:
    from .webconfig import WebConfig

__all__ = ["parse_address", "every_interface", "MetricsServer"]

MAX_HEAD = 8 << 10
_TLS_CHUNK = 16 << 10  # one TLS record: a retried SSL_write must be given the same bytes
_MAX_CHECKS = 8  # password checks queued for bcrypt; more get 503 (the verdicts already cached are not delayed)
_HANDSHAKE, _HEAD, _WAIT, _WRITE, _LINGER = range(5)
# A connection that ends with request bytes still unread (a POST's body) would be reset by
# close(2) (RFC 9112 9.6: the client may lose the answer): the answer's end is sent with
# shutdown(SHUT_WR) and what the client still sends is read and dropped until it closes,
# for at most these seconds and bytes.
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 1 << 20


def parse_address(text: str, option: str = "--metrics") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every interface) or ``[V6]:PORT`` -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UsageError(f"{option} {text!r}: not HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:9435 or :9435; 0: any free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port_text)


def _listen(address: str, option: str, host: str, port: int) -> socket.socket:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except OSError as exc:
        raise UsageError(f"{option} {address}: cannot resolve {host!r}: {exc.strerror or exc}") from None
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise KernelError(f"{option} {address}: listen on {host} port {port}", exc.errno or errno.EINVAL) from None


SD_LISTEN_FDS_START = 3  # sd_listen_fds(3): the first socket systemd passes is fd 3


def systemd_socket(address: str, option: str = "--metrics") -> socket.socket:
    """``fd://N``: the N-th listening socket systemd passed (socket activation: sd_listen_fds(3),
    LISTEN_FDS sockets from fd 3 when LISTEN_PID is this process), as ebpf_exporter takes
    ``--web.listen-address fd://0``. The variables are removed, so children do not take them."""
    text = address.removeprefix("fd://")
    if not text.isdigit():
        raise UsageError(f"{option} {address!r}: fd://N takes the number of a socket systemd passed (fd://0: the first)")
    index = int(text)
    pid, count = os.environ.get("LISTEN_PID", ""), os.environ.get("LISTEN_FDS", "")
    if pid != str(os.getpid()) or not count.isdigit() or index >= int(count):
        raise UsageError(f"{option} {address}: no socket {index} from systemd (LISTEN_FDS={count or 'unset'}, "
                         f"LISTEN_PID={pid or 'unset'}, this process {os.getpid()}): start it from a .socket unit")
    for var in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(var, None)
    sock = socket.socket(fileno=SD_LISTEN_FDS_START + index)
    if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()
        raise UsageError(f"{option} {address}: systemd's socket {index} is not a listening stream socket "
                         "(ListenStream= in the .socket unit)")
    os.set_inheritable(sock.fileno(), False)
    return sock


def every_interface(host: str) -> bool:
    """Whether listening on ``host`` accepts connections from other machines' reach on every interface."""
    return host in ("0.0.0.0", "::", "")


class _Conn:
    __slots__ = ("sock", "state", "buf", "deadline", "out", "body", "keep_alive", "head_only", "want", "lingered")

    def __init__(self, sock: socket.socket, state: int, deadline: float) -> None:
        self.sock = sock
        self.state = state
        self.buf = b""
        self.deadline = deadline
        self.out: list[memoryview] = []
        self.body: bytes | None = None  # the rendered answer this connection holds, if any
        self.keep_alive = False
        self.head_only = False  # a HEAD request: the answer without its body
        self.want = selectors.EVENT_READ
        self.lingered = 0  # bytes read and dropped after the last answer


class _Worker:
    """One thread running jobs in order; each result goes back to the loop through ``done``."""

    def __init__(self, name: str, done: Callable[[Callable[[object], None], object], None]) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], Callable[[object], None]] | None] = queue.SimpleQueue()
        self._done = done
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object], then: Callable[[object], None]) -> None:
        self._jobs.put((job, then))

    def _run(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, then = item
            try:
                result: object = job()
            except Exception as exc:  # handed to the loop, which answers 500 with it
                result = exc
            self._done(then, result)

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)


class MetricsServer(ClosesOnExit):
    """Serves ``collectors`` on http://HOST:PORT/metrics (``path``; and /) until :meth:`close`; one
    render at a time (the maps are read by one thread). ``web_config``
    (:func:`bpfkit.metrics.webconfig.load_web_config`) adds TLS and basic authentication."""

    def __init__(self, address: str, collectors: Iterable[Collector], *, option: str = "--metrics",
                 web_config: WebConfig | None = None, max_connections: int = 256, head_timeout: float = 10.0,
                 idle_timeout: float = 60.0, write_timeout: float = 30.0, min_interval: float = 1.0,
                 path: str = "/metrics") -> None:
        host, port = parse_address(address, option) if not address.startswith("fd://") else ("", 0)
        if not path.startswith("/") or any(c in path for c in "?# \r\n"):
            raise UsageError(f"{path!r}: the metrics path must start with / and hold no ?, #, space or line break")
        self.path = path
        self.collectors = list(collectors)
        self._others = CollectorRegistry(auto_describe=False)
        self._has_others = False
        for c in self.collectors:
            if not isinstance(c, MapCollector):
                self._others.register(c)
                self._has_others = True
        self._lock = threading.Lock()
        self.max_connections = max_connections
        self.head_timeout, self.idle_timeout, self.write_timeout = head_timeout, idle_timeout, write_timeout
        self.min_interval = min_interval
        self._web = web_config
        self._tls = web_config.tls if web_config is not None else None
        self._auth = web_config.auth if web_config is not None else None
        self._web_checked = time.monotonic()
        self._web_failed: str | None = None  # the last reload error said (said once)
        if address.startswith("fd://"):
            self._listener = systemd_socket(address, option)
        else:
            self._listener = _listen(address, option, host, port)
        self._listener.setblocking(False)
        bound = self._listener.getsockname()
        self.host = host if not address.startswith("fd://") else str(bound[0]) if isinstance(bound, tuple) else host
        self.port = int(bound[1]) if isinstance(bound, tuple) else 0
        self._conns: dict[int, _Conn] = {}
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._done: queue.SimpleQueue[tuple[Callable[[object], None], object]] = queue.SimpleQueue()
        self._accept_at = 0.0  # while accepting is paused: when it resumes
        self._backoff = 0.0
        self._body: bytes | None = None
        self._body_at = -1e9
        self._rendering = False
        self._waiting: list[_Conn] = []
        self.renders = 0  # how many times the answer was rendered (tests, and a figure for docs)
        self._closed = False
        self._bug_said = False
        self._renderer = _Worker("bpfkit-metrics-render", self._finished)
        self._checker: _Worker | None = None
        if self._auth is not None:
            self._checker = _Worker("bpfkit-metrics-auth", self._finished)
        self._checking = 0  # password checks queued or running
        self._thread = threading.Thread(target=self._serve, name="bpfkit-metrics", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._tls is not None else 'http'}://{host}:{self.port}{self.path}"

    def render(self) -> bytes:
        """What a scrape answers (rendered now)."""
        with self._lock:
            text = "".join(c.render() for c in self.collectors if isinstance(c, MapCollector)).encode()
            return text + generate_latest(self._others) if self._has_others else text

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake()
        self._thread.join(timeout=5)
        self._renderer.stop()
        if self._checker is not None:
            self._checker.stop()

    # -- the loop (one thread: every _Conn is touched by it alone) --

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full: the loop has a wake-up pending anyway
            pass

    def _finished(self, then: Callable[[object], None], result: object) -> None:
        self._done.put((then, result))
        self._wake()

    def _serve(self) -> None:
        try:
            while not self._closed:
                now = time.monotonic()
                timeout = min((c.deadline for c in self._conns.values() if c.state != _WAIT), default=now + 60) - now
                if self._accept_at:
                    timeout = min(timeout, self._accept_at - now)
                for key, mask in self._sel.select(max(timeout, 0.0)):
                    try:
                        if key.data is None:
                            self._accept()
                        elif key.data == "wake":
                            self._drain_wake()
                        else:
                            self._step(key.data, mask)
                    except Exception as exc:  # a bug must not stop every later scrape: said once, served on
                        self._bug(exc)
                self._expire()
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._sel.close()
            self._listener.close()
            self._wake_r.close()
            self._wake_w.close()

    def _bug(self, exc: Exception) -> None:
        if not self._bug_said:
            self._bug_said = True
            print(f"bpfkit: warning: metrics server: {type(exc).__name__}: {exc} (serving on)", file=sys.stderr)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass
        while True:
            try:
                then, result = self._done.get_nowait()
            except queue.Empty:
                return
            try:
                then(result)
            except Exception as exc:
                self._bug(exc)

    def _expire(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.state != _WAIT and c.deadline <= now]:
            self._close(conn)
        if self._accept_at and now >= self._accept_at:
            self._accept_at = 0.0
            self._sel.register(self._listener, selectors.EVENT_READ, None)

    def _accept(self) -> None:
        for _ in range(64):  # a burst, then the other connections get their turn
            try:
                sock, _addr = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR):
                    continue  # that connection is gone; the next may be fine
                # Out of fds (or memory): the pending connection stays queued, so the listener
                # stays readable; accepting again at once would spin. Free an idle fd, pause.
                self._evict()
                self._backoff = min(max(self._backoff * 2, 0.005), 1.0)
                self._accept_at = time.monotonic() + self._backoff
                self._sel.unregister(self._listener)
                return
            self._backoff = 0.0
            self._reload()
            if len(self._conns) >= self.max_connections and not self._evict():
                sock.close()  # every connection is being answered: no room
                continue
            self._open(sock)

    def _reload(self) -> None:
        """The web config and its certificates again when a file changed (checked at most once
        a second, on a new connection), as exporter-toolkit rereads them: certificates rotate
        without a restart. A config that no longer loads is said once; the last good one stays."""
        now = time.monotonic()
        if self._web is None or now - self._web_checked < 1.0:
            return
        self._web_checked = now
        if not self._web.stale():
            return
        from .webconfig import load_web_config

        try:
            web = load_web_config(self._web.path)
        except BPFKitError as exc:
            if str(exc) != self._web_failed:
                self._web_failed = str(exc)
                print(f"bpfkit: warning: metrics web config not reloaded: {exc} (serving with the previous one)", file=sys.stderr)
            return
        self._web_failed = None
        if web.auth is not None and self._auth is not None and web.auth.users == self._auth.users:
            web.auth = self._auth  # the same users: the verdicts cached stay right
        self._web, self._tls, self._auth = web, web.tls, web.auth
        if self._auth is not None and self._checker is None:
            self._checker = _Worker("bpfkit-metrics-auth", self._finished)

    def _open(self, raw: socket.socket) -> None:
        raw.setblocking(False)
        deadline = time.monotonic() + self.head_timeout
        try:
            sock = self._tls.wrap_socket(raw, server_side=True, do_handshake_on_connect=False) if self._tls else raw
        except OSError:
            raw.close()
            return
        conn = _Conn(sock, _HANDSHAKE if self._tls else _HEAD, deadline)
        self._conns[sock.fileno()] = conn
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _evict(self) -> bool:
        """Close the connection without a request head nearest its timeout, if any: a slow or
        idle one (a kept-alive connection, whose timeout is longer, goes after new ones)."""
        idle = [c for c in self._conns.values() if c.state in (_HANDSHAKE, _HEAD, _LINGER)]
        if not idle:
            return False
        self._close(min(idle, key=lambda c: c.deadline))
        return True

    def _close(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock.fileno(), None) is None:
            return
        if conn.state != _WAIT:
            self._sel.unregister(conn.sock)
        conn.out = []
        conn.body = None
        conn.sock.close()

    def _watch(self, conn: _Conn, events: int) -> None:
        if conn.state == _WAIT:
            return
        if events != conn.want:
            conn.want = events
            self._sel.modify(conn.sock, events, conn)

    def _step(self, conn: _Conn, mask: int) -> None:
        try:
            if conn.state == _HANDSHAKE:
                self._handshake(conn)
            elif conn.state == _HEAD:
                self._read(conn)
            elif conn.state == _WRITE:
                self._write(conn)
            elif conn.state == _LINGER:
                self._linger(conn)
        except Exception:  # a TLS alert, a bug: that connection ends, the server goes on
            self._close(conn)

    def _handshake(self, conn: _Conn) -> None:
        assert isinstance(conn.sock, ssl.SSLSocket)
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            return self._watch(conn, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            return self._watch(conn, selectors.EVENT_WRITE)
        conn.state = _HEAD
        self._watch(conn, selectors.EVENT_READ)
        self._read(conn)

    def _read(self, conn: _Conn) -> None:
        while b"\r\n\r\n" not in conn.buf:
            if len(conn.buf) > MAX_HEAD:
                return self._answer(conn, "431 Request Header Fields Too Large", b"request head over 8 KiB\n", close=True)
            try:
                data = conn.sock.recv(MAX_HEAD + 1 - len(conn.buf))
            except (BlockingIOError, ssl.SSLWantReadError):
                return self._watch(conn, selectors.EVENT_READ)
            except ssl.SSLWantWriteError:
                return self._watch(conn, selectors.EVENT_WRITE)
            except OSError:  # reset by the peer, a TLS alert
                return self._close(conn)
            if not data:
                return self._close(conn)
            conn.buf += data
        head, _, conn.buf = conn.buf.partition(b"\r\n\r\n")
        self._request(conn, head)

    def _request(self, conn: _Conn, head: bytes) -> None:
        self._reload()  # kept-alive connections see a changed password too
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                return self._answer(conn, "400 Bad Request", b"malformed header line\n", close=True)
            headers[name.lower()] = value.strip()
        if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1"):
            return self._answer(conn, "400 Bad Request", b"not an HTTP/1.x request line\n", close=True)
        method, target, version = parts
        connection = headers.get(b"connection", b"").lower()
        conn.keep_alive = connection == b"keep-alive" if version == b"HTTP/1.0" else connection != b"close"
        if b"content-length" in headers or b"transfer-encoding" in headers:
            conn.keep_alive = False  # a body is not read: the connection ends after the answer
        conn.head_only = method == b"HEAD"
        if method not in (b"GET", b"HEAD"):
            return self._answer(conn, "405 Method Not Allowed", b"GET or HEAD\n", [("Allow", "GET, HEAD")])
        auth = headers.get(b"authorization")
        header = auth.decode("latin-1") if auth is not None else None
        if self._auth is not None:
            verdict = self._auth.cached(header)
            if verdict is None and self._checker is not None:
                if self._checking >= _MAX_CHECKS:  # bcrypt's queue is full: ~0.1 s of CPU each
                    return self._answer(conn, "503 Service Unavailable", b"too many password checks at once\n",
                                        [("Retry-After", "1")])
                self._checking += 1
                self._park(conn)
                check = self._auth.check
                self._checker.submit(lambda: check(header), lambda ok: self._authorized(conn, ok is True, target))
                return
            if not verdict:
                return self._unauthorized(conn)
        self._route(conn, target)

    def _park(self, conn: _Conn) -> None:
        """The connection waits for a worker: not watched, no deadline until its answer starts."""
        self._sel.unregister(conn.sock)
        conn.state = _WAIT

    def _unpark(self, conn: _Conn) -> bool:
        if self._conns.get(conn.sock.fileno()) is not conn:
            return False
        conn.state = _WRITE
        conn.want = selectors.EVENT_WRITE
        self._sel.register(conn.sock, conn.want, conn)
        return True

    def _authorized(self, conn: _Conn, ok: bool, target: bytes) -> None:
        self._checking -= 1
        if not self._unpark(conn):
            return
        if ok:
            self._route(conn, target)
        else:
            self._unauthorized(conn)

    def _unauthorized(self, conn: _Conn) -> None:
        self._answer(conn, "401 Unauthorized", b"Unauthorized\n", [("WWW-Authenticate", 'Basic realm="bpfkit metrics"')])

    def _route(self, conn: _Conn, target: bytes) -> None:
        if target.partition(b"?")[0] not in (b"/", self.path.encode()):
            return self._answer(conn, "404 Not Found", f"bpfkit serves {self.path}\n".encode())
        now = time.monotonic()
        body = self._body
        if body is not None and now - self._body_at < self.min_interval:
            return self._scraped(conn, body)
        if not self._rendering and body is not None and any(
                c.body is not None and c.body is not body for c in self._conns.values()):
            # A client is still being sent an older answer: a render now would make three.
            return self._scraped(conn, body)
        if conn.state != _WAIT:
            self._park(conn)
        self._waiting.append(conn)
        if not self._rendering:
            self._rendering = True
            self._renderer.submit(self._render_job, self._rendered)

    def _render_job(self) -> object:
        started = time.monotonic()
        body = self.render()
        return started, body

    def _rendered(self, result: object) -> None:
        self._rendering = False
        self.renders += 1
        waiting, self._waiting = self._waiting, []
        if isinstance(result, tuple):
            self._body_at, self._body = result
        for conn in waiting:
            if not self._unpark(conn):
                continue
            if isinstance(result, tuple):
                self._scraped(conn, result[1])
            else:
                why = str(result) if isinstance(result, BPFKitError) else f"{type(result).__name__}: {result}"
                self._answer(conn, "500 Internal Server Error", f"bpfkit: reading the maps failed: {why}\n".encode(), close=True)

    def _scraped(self, conn: _Conn, body: bytes) -> None:
        conn.body = body  # before _answer: an answer written at once lets go of it there
        self._answer(conn, "200 OK", body, [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)])

    def _answer(self, conn: _Conn, status: str, body: bytes, headers: Iterable[tuple[str, str]] = (), *,
                close: bool = False) -> None:
        if close:
            conn.keep_alive = False
        lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers),
                 f"Connection: {'keep-alive' if conn.keep_alive else 'close'}", "", ""]
        conn.out = [memoryview("\r\n".join(lines).encode("latin-1"))]
        if not conn.head_only:
            conn.out.append(memoryview(body))
        conn.state = _WRITE
        conn.deadline = time.monotonic() + self.write_timeout
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        tls = isinstance(conn.sock, ssl.SSLSocket)
        while conn.out:
            view = conn.out[0]
            try:
                sent = conn.sock.send(view[:_TLS_CHUNK] if tls else view)
            except (BlockingIOError, ssl.SSLWantWriteError):
                return self._watch(conn, selectors.EVENT_WRITE)
            except ssl.SSLWantReadError:
                return self._watch(conn, selectors.EVENT_READ)
            except OSError:  # EPIPE, ECONNRESET: the client left
                return self._close(conn)
            if sent == len(view):
                conn.out.pop(0)
            else:
                conn.out[0] = view[sent:]
        conn.body = None
        if not conn.keep_alive:
            return self._end(conn)
        conn.state = _HEAD
        conn.deadline = time.monotonic() + self.idle_timeout
        self._watch(conn, selectors.EVENT_READ)
        if b"\r\n\r\n" in conn.buf:  # a pipelined request
            self._read(conn)


    def _end(self, conn: _Conn) -> None:
        """The answer is out and the connection ends: a lingering close (see _LINGER_SECONDS)."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client left already
            return self._close(conn)
        conn.buf = b""
        conn.lingered = 0
        conn.state = _LINGER
        conn.deadline = time.monotonic() + _LINGER_SECONDS
        self._watch(conn, selectors.EVENT_READ)
        self._linger(conn)

    def _linger(self, conn: _Conn) -> None:
        while conn.lingered < _LINGER_BYTES:
            try:
                data = conn.sock.recv(64 << 10)
            except BlockingIOError:
                return
            except OSError:
                break
            if not data:
                break
            conn.lingered += len(data)
        self._close(conn)


def warn_every_interface(address: str, option: str = "--metrics") -> None:
    """The start-up warning for an address that listens on every interface."""
    print(f"bpfkit: warning: {option} {address} listens on every interface: the maps' metrics are reachable from "
          "other hosts; restrict it (127.0.0.1:PORT, a firewall) or require TLS client certificates or a password "
          "with --metrics-web-config FILE (docs/metrics.md)", file=sys.stderr)

