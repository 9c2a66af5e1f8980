# SPDX-License-Identifier: Apache-2.0
"""A real Prometheus (Debian's ``prometheus`` package) scrapes ``bpfkit attach --metrics`` every
second while this test makes known syscalls; Prometheus' HTTP API then answers with the counts
made and a histogram_quantile over the served histogram. Both processes are stopped with
SIGTERM and must exit cleanly; the temporary config and TSDB directory are removed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import start_attached
from tests.metrics_exposition import check_exposition

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PPID_CALLS = 37
PGID_ARG, PGID_CALLS = 100, 10  # log2 slot 6: (63, 127]

pytestmark = pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK),
                                reason="needs Debian's prometheus package (scripts/setup.sh installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _query(port: int, promql: str) -> list[Any]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as resp:
        answer = json.load(resp)
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


def _wait_for(port: int, promql: str, want: float | None, timeout: float = 40.0) -> float:
    """Poll until the query has one sample (equal to ``want`` when given); its value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = _query(port, promql)
        except OSError:
            last = "Prometheus not answering yet"
        if isinstance(last, list) and len(last) == 1:
            value = float(last[0]["value"][1])
            if want is None or value == want:
                return value
        time.sleep(0.5)
    raise AssertionError(f"{promql}: still {last!r} after {timeout} s")


def _stop(proc: subprocess.Popen[str], name: str) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"{name} did not exit within 30 s of SIGTERM:\n{out[-2000:]}") from None
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out[-3000:]}"
    return out


def start_prometheus(tmp: Path, metrics_port: int, prom_port: int, scrape: str = "") -> subprocess.Popen[str]:
    """Prometheus scraping 127.0.0.1:METRICS_PORT every second (``scrape``: more of the job's
    settings, indented by 4), its TSDB in ``tmp``; returned once the target is up."""
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: bpfkit\n    scrape_interval: 1s\n{scrape}"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(prom_port, 'up{job="bpfkit"}', 1)
    except BaseException:
        _stop(prom, "prometheus")
        raise
    return prom


def test_prometheus_scrapes_attach(bpf_obj: Any) -> None:
    metrics_port, prom_port = _free_port(), _free_port()
    tmp = Path(tempfile.mkdtemp(prefix="bpfkit-prom-"))
    attach = prom = None
    try:
        attach, seen = start_attached(
            [sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")), "--set", f"target_tgid={os.getpid()}",
             "--metrics", f"127.0.0.1:{metrics_port}"])
        assert any(f"metrics on http://127.0.0.1:{metrics_port}/metrics" in s for s in seen), "".join(seen)
        prom = start_prometheus(tmp, metrics_port, prom_port)

        for _ in range(PPID_CALLS):
            os.getppid()
        for _ in range(PGID_CALLS):
            try:
                os.getpgid(PGID_ARG)
            except OSError:
                pass  # no process 100: counted on entry all the same

        _wait_for(prom_port, 'bpfkit_metrics_demo_calls{kind="CALL_GETPPID"}', PPID_CALLS)
        _wait_for(prom_port, 'bpfkit_metrics_demo_calls{kind="CALL_GETPGID"}', PGID_CALLS)
        _wait_for(prom_port, "bpfkit_metrics_demo_totals_events", PPID_CALLS + PGID_CALLS)
        _wait_for(prom_port, "bpfkit_metrics_demo_pgid_hist_count", PGID_CALLS)
        median = _wait_for(prom_port, "histogram_quantile(0.5, bpfkit_metrics_demo_pgid_hist_bucket)", None)
        assert 63 < median <= 127  # every value is in the bucket (63, 127]; Prometheus interpolates inside it
        p90 = _wait_for(prom_port, "histogram_quantile(0.9, sum by (le) (bpfkit_metrics_demo_arg_hist_bucket))", None)
        assert 63 < p90 <= 127
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            check_exposition(resp.read().decode())  # what Prometheus scraped, parsed by its own promtool
    finally:
        outputs = []
        for proc, name in ((prom, "prometheus"), (attach, "bpfkit attach")):
            if proc is not None:
                outputs.append(_stop(proc, name))
        shutil.rmtree(tmp)
    assert outputs[-1].rstrip().endswith("detached")
    assert not tmp.exists()
