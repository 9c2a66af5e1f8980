# SPDX-License-Identifier: Apache-2.0
"""``fd://N`` listen addresses (bpfkit.metrics.server.systemd_socket): the metrics endpoint on a
socket systemd passed (socket activation, sd_listen_fds(3)), as ebpf_exporter takes
``--web.listen-address fd://0``. The child is started the way systemd starts it: the listening
socket at fd 3, LISTEN_FDS=1 and LISTEN_PID its own pid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request

import pytest

pytest.importorskip("prometheus_client")

from bpfkit.errors import UsageError
from bpfkit.metrics.server import systemd_socket

CHILD = """\
import sys, time
from prometheus_client.core import GaugeMetricFamily
from bpfkit.metrics.server import MetricsServer

class One:
    def collect(self):
        g = GaugeMetricFamily("activated", "served on systemd's socket")
        g.add_metric([], 1)
        yield g

server = MetricsServer("fd://0", [One()], option="--web.listen-address")
print("serving", server.port, flush=True)
sys.stdin.read()
server.close()
"""


def test_serves_on_the_socket_systemd_passed() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def at_fd_3() -> None:
        os.dup2(listener.fileno(), 3)

    proc = subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -c "$1"', sys.executable, CHILD],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=at_fd_3, pass_fds=(listener.fileno(), 3))  # 3: kept after the dup2
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line == f"serving {port}\n", line + (proc.stderr.read() if proc.stderr else "")
        listener.close()  # only the child holds it now
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert "activated 1.0" in answer.read().decode()
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("address, env, says", [
    ("fd://x", {}, r"fd://N takes the number of a socket systemd passed"),
    ("fd://0", {}, r"no socket 0 from systemd \(LISTEN_FDS=unset, LISTEN_PID=unset"),
    ("fd://1", {"LISTEN_FDS": "1", "LISTEN_PID": "self"}, r"no socket 1 from systemd \(LISTEN_FDS=1"),
    ("fd://0", {"LISTEN_FDS": "1", "LISTEN_PID": "1"}, r"LISTEN_PID=1, this process"),
])
def test_no_socket_from_systemd(monkeypatch: pytest.MonkeyPatch, address: str, env: dict[str, str], says: str) -> None:
    for var in ("LISTEN_FDS", "LISTEN_PID"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, str(os.getpid()) if value == "self" else value)
    with pytest.raises(UsageError, match=says):
        systemd_socket(address, "--web.listen-address")
