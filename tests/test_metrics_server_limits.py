# SPDX-License-Identifier: Apache-2.0
"""The metrics endpoint against peers that try to exhaust it (issue 35, item 3): idle
connections, a request head that never ends, clients that never read the answer, and a process
out of file descriptors. No BPF: the server serves prometheus_client collectors of the test's."""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from bpfkit.metrics.server import MetricsServer


class Counting:
    """A collector whose every collect() is counted: one render, one call."""

    def __init__(self, help_text: str = "renders so far") -> None:
        self.calls = 0
        self.help_text = help_text

    def collect(self) -> Iterable[Metric]:
        self.calls += 1
        family = GaugeMetricFamily("test_renders", self.help_text)
        family.add_metric([], self.calls)
        yield family


def _scrape(url: str, timeout: float = 5.0) -> tuple[int, bytes, float]:
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read(), time.monotonic() - start


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection within ``within`` seconds (EOF or reset)."""
    ready, _, _ = select.select([sock], [], [], within)
    if not ready:
        return False
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.fixture
def many_fds() -> Iterator[None]:
    """Room for 2 x 300 sockets in this process (the default soft limit of 1,024 has it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024 <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1024), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_idle_connections_hold_no_thread_and_a_scrape_still_answers(many_fds: None) -> None:
    before = threading.active_count()
    with MetricsServer("127.0.0.1:0", [Counting()]) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(300)]
        try:
            time.sleep(0.5)  # the server has accepted what it will
            assert threading.active_count() - before <= 3  # the loop and the render thread
            status, body, took = _scrape(server.url)
            assert status == 200 and b"test_renders 1.0" in body
            assert took < 2.0
            # At the limit (256), each new connection evicted the oldest still without a head.
            assert len(server._conns) <= server.max_connections
        finally:
            for s in idle:
                s.close()


def test_a_request_head_must_arrive_in_time() -> None:
    with MetricsServer("127.0.0.1:0", [Counting()], head_timeout=0.5) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as slow:
            slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line
            assert _closed_by_peer(slow, 3.0)
        with socket.create_connection(("127.0.0.1", server.port)) as big:
            big.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 9000 + b"\r\n\r\n")
            big.settimeout(3)
            assert big.recv(100).startswith(b"HTTP/1.1 431 ")


def test_a_client_that_does_not_read_is_dropped() -> None:
    big = Counting("x" * (8 << 20))
    with MetricsServer("127.0.0.1:0", [big], write_timeout=0.5) as server, socket.socket() as reader:
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(("127.0.0.1", server.port))
        reader.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.monotonic() + 5
        while server._conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server._conns  # 8 MB never read: closed once write_timeout passed


def test_keep_alive_head_and_errors() -> None:
    import http.client

    with MetricsServer("127.0.0.1:0", [Counting()]) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for _ in range(3):  # one connection, three answers
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            assert resp.status == 200 and b"test_renders" in resp.read()
        conn.request("HEAD", "/")
        resp = conn.getresponse()
        assert resp.status == 200 and int(resp.headers["Content-Length"]) > 0 and resp.read() == b""
        conn.request("GET", "/other")
        resp = conn.getresponse()
        assert resp.status == 404 and resp.read() == b"bpfkit serves /metrics\n"
        conn.request("POST", "/metrics", body=b"x")
        resp = conn.getresponse()
        assert resp.status == 405 and resp.headers["Allow"] == "GET, HEAD"
        resp.read()
        conn.close()
        assert server.renders == 1  # four scrapes within min_interval: one render


def test_an_unread_body_does_not_reset_the_answer() -> None:
    """The server ends a connection whose request body it does not read: close(2) with those bytes
    unread would send a reset, and the client would lose the answer (RFC 9112 9.6; the CI saw
    ECONNRESET reading a 405). The body here is larger than one read of the request head."""
    with MetricsServer("127.0.0.1:0", [Counting()]) as server:
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                client.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n" + b"b" * 65536)
                time.sleep(0.1)  # answered and ended by now
                client.settimeout(5)
                answer = b""
                while chunk := client.recv(4096):
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 405 ") and answer.endswith(b"GET or HEAD\n")
        deadline = time.monotonic() + 5
        while server._conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server._conns  # each lingered until the client closed


CHILD = textwrap.dedent("""
    import os, resource, signal, sys, time
    from prometheus_client.core import GaugeMetricFamily
    from bpfkit.metrics.server import MetricsServer

    class Big:
        calls = 0

        def collect(self):
            Big.calls += 1
            family = GaugeMetricFamily("test_big", "x" * int(sys.argv[1]))
            family.add_metric([], 1)
            yield family

    server = MetricsServer("127.0.0.1:0", [Big()])
    held = []
    if sys.argv[2] == "exhaust":  # every fd taken by something else than the server
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        signal.signal(signal.SIGUSR1, lambda *_: [os.close(held.pop()) for _ in range(8)])
    print(server.port, flush=True)
    sys.stdin.read()
    print(Big.calls, flush=True)  # renders
    server.close()
""")


def _child(body_size: int, mode: str = "") -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(body_size), mode or "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _finish(proc: subprocess.Popen[str]) -> int:
    out, _ = proc.communicate("", timeout=30)
    assert proc.returncode == 0
    return int(out.split()[-1])


def test_slow_readers_share_one_answer() -> None:
    """40 clients ask and never read an 8 MB answer: the server's memory grows by about one or
    two answers, not forty (issue 35 measured 37 MB -> 516 MB before)."""
    body = 8 << 20
    proc, port = _child(body)
    clients = []
    try:
        base = _status(proc.pid, "VmRSS")
        for _ in range(40):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(s)
            time.sleep(0.05)  # spread over two seconds: past min_interval
        time.sleep(1.5)
        grown = _status(proc.pid, "VmHWM") - base
        assert grown < 10 * body, f"grew {grown >> 20} MiB for 40 readers of an {body >> 20} MiB answer"
    finally:
        for s in clients:
            s.close()
        renders = _finish(proc)
    assert renders <= 2, renders


def test_out_of_fds_does_not_spin_and_recovers() -> None:
    """accept() failing with EMFILE leaves the connection queued and the listener readable: the
    server must back off (issue 35: 75% of a CPU spinning) and accept again once fds are free."""
    proc, port = _child(10, "exhaust")
    clients = []
    try:
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(s)
        time.sleep(0.5)
        cpu = _cpu_seconds(proc.pid)
        time.sleep(3.0)
        spent = _cpu_seconds(proc.pid) - cpu
        print(f"{spent:.2f} s of CPU in 3 s while out of fds")
        assert spent < 0.15, f"{spent:.2f} s of CPU in 3 s while out of fds"
        os.kill(proc.pid, signal.SIGUSR1)  # the child frees 8 fds
        clients[0].settimeout(5)
        assert clients[0].recv(100).startswith(b"HTTP/1.1 200 ")  # queued meanwhile, answered now
        status, body, _ = _scrape(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and b"test_big 1.0" in body
    finally:
        for s in clients:
            s.close()
        _finish(proc)
