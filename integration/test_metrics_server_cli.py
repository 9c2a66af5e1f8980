# SPDX-License-Identifier: Apache-2.0
"""``bpfkit attach --metrics`` with ``--metrics-web-config``: the warning for every interface,
basic authentication and TLS through the command, errors in the web config before anything is
loaded, and a real Prometheus (Debian's package) scraping over TLS with a password."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from conftest import start_attached
from integration.test_metrics_prometheus import PROMETHEUS, _free_port, _stop, _wait_for, start_prometheus
from tests.metrics_server_pki import HAVE_OPENSSL, client_context, make_pki

WARNING = "listens on every interface: the maps' metrics are reachable from other hosts"


def _attach(bpf_obj: Any, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc, seen = start_attached([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")),
                                 "--set", f"target_tgid={os.getpid()}", *extra])
    return proc, "".join(seen)


def _status(url: str, auth: str | None = None, ctx: Any = None) -> int:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            assert b"bpfkit_metrics_demo_" in resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_every_interface_warns(bpf_obj: Any) -> None:
    port = _free_port()
    proc, seen = _attach(bpf_obj, "--metrics", f":{port}")
    try:
        assert f"bpfkit: warning: --metrics :{port} {WARNING}" in seen, seen
        assert "--metrics-web-config FILE" in seen
        assert _status(f"http://127.0.0.1:{port}/metrics") == 200
    finally:
        _stop(proc, "bpfkit attach")
    proc, seen = _attach(bpf_obj, "--metrics", f"127.0.0.1:{_free_port()}")
    _stop(proc, "bpfkit attach")
    assert "warning" not in seen, seen


def test_password_over_every_interface(bpf_obj: Any, tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: {bcrypt.hashpw(b'pw', bcrypt.gensalt(rounds=4)).decode()}\n")
    port = _free_port()
    proc, seen = _attach(bpf_obj, "--metrics", f":{port}", "--metrics-web-config", str(web))
    try:
        assert "warning" not in seen, seen  # a password is required: nothing to warn about
        url = f"http://127.0.0.1:{port}/metrics"
        assert _status(url) == 401
        assert _status(url, "prometheus:nope") == 401
        assert _status(url, "prometheus:pw") == 200
    finally:
        _stop(proc, "bpfkit attach")


@pytest.mark.parametrize(("text", "message"), [
    ("tls_server_config:\n  cert_fil: a.pem\n", "web.yml:2: tls_server_config: unknown key 'cert_fil' (known: cert_file, key_file"),
    ("basic_auth_users:\n  prometheus: hunter2\n", "web.yml:2: basic_auth_users.prometheus: not a bcrypt hash"),
])
def test_web_config_errors_before_loading(bpf_obj: Any, tmp_path: Path, text: str, message: str) -> None:
    web = tmp_path / "web.yml"
    web.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")), "--metrics", "127.0.0.1:0",
                           "--metrics-web-config", str(web)], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and f"bpfkit: error: {tmp_path}/{message}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "attached" not in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", str(bpf_obj("metrics_demo")),
                           "--metrics-web-config", str(web)], check=False, capture_output=True, text=True, timeout=60)
    assert "--metrics-web-config needs --metrics ADDR" in proc.stderr, proc.stderr


@pytest.mark.skipif(not HAVE_OPENSSL or not os.access(PROMETHEUS, os.X_OK),
                    reason="needs the openssl command and Debian's prometheus package")
def test_prometheus_scrapes_over_tls_with_a_password(bpf_obj: Any) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bpfkit-prom-tls-"))
    attach = prom = None
    try:
        pki = make_pki(tmp)
        (tmp / "web.yml").write_text(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS12\n"
            f"basic_auth_users:\n  prometheus: {bcrypt.hashpw(b'scrape-pw', bcrypt.gensalt(rounds=10)).decode()}\n")
        metrics_port, prom_port = _free_port(), _free_port()
        attach, seen = _attach(bpf_obj, "--metrics", f"127.0.0.1:{metrics_port}", "--metrics-web-config", str(tmp / "web.yml"))
        assert f"metrics on https://127.0.0.1:{metrics_port}/metrics" in seen, seen
        assert _status(f"https://127.0.0.1:{metrics_port}/metrics", "prometheus:scrape-pw", client_context(pki)) == 200
        prom = start_prometheus(tmp, metrics_port, prom_port, f"    scheme: https\n    tls_config:\n      ca_file: {pki / 'ca.pem'}\n"
                                "    basic_auth:\n      username: prometheus\n      password: scrape-pw\n")
        for _ in range(5):
            os.getppid()
        _wait_for(prom_port, 'bpfkit_metrics_demo_calls{kind="CALL_GETPPID"}', 5)
    finally:
        for proc, name in ((prom, "prometheus"), (attach, "bpfkit attach")):
            if proc is not None:
                _stop(proc, name)
        shutil.rmtree(tmp)
