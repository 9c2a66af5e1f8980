# SPDX-License-Identifier: Apache-2.0
"""TLS and basic authentication of the metrics endpoint, configured by an exporter-toolkit web
config (``--metrics-web-config``), against real clients: Python's ssl module and urllib, with a
CA, server and client certificates made by the openssl command for each test."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from bpfkit.errors import BPFKitError, UsageError
from bpfkit.metrics.server import MetricsServer
from bpfkit.metrics.webconfig import WebConfig, load_web_config
from tests.metrics_server_pki import HAVE_OPENSSL, client_context, make_pki

pytestmark = pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl command (Debian's openssl)")


class One:
    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("test_up", "always 1")
        family.add_metric([], 1)
        yield family


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _config(d: Path, text: str) -> WebConfig:
    path = d / "web.yml"
    path.write_text(text)
    return load_web_config(str(path))


_client = client_context


def _get(url: str, ctx: ssl.SSLContext | None = None, auth: tuple[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url)
    if auth is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _refused(url: str, ctx: ssl.SSLContext) -> bool:
    try:
        _get(url, ctx)
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return True
    return False


def test_tls_scrape_with_a_real_client(pki: Path) -> None:
    web = _config(pki, "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n")  # relative to the file
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert server.url.startswith("https://127.0.0.1:")
        status, _, body = _get(server.url, _client(pki))
        assert status == 200 and b"test_up 1.0" in body
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # not a ClientHello
            try:
                assert b"test_up" not in plain.recv(4096)
            except ConnectionResetError:  # the handshake failed: closed with the request unread
                pass


def test_client_certificate_required(pki: Path) -> None:
    web = _config(pki, f"tls_server_config:\n  cert_file: {pki}/server.pem\n  key_file: {pki}/server.key\n"
                       f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki}/ca.pem\n")
    assert web.authenticates
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert _refused(server.url, _client(pki))  # no client certificate
        assert _refused(server.url, _client(pki, "stranger"))  # signed by another CA
        status, _, body = _get(server.url, _client(pki, "client"))
        assert status == 200 and b"test_up 1.0" in body


@pytest.mark.parametrize(("auth", "served"), [
    ("NoClientCert", {None: True, "client": True, "stranger": True}),  # no certificate asked for
    ("VerifyClientCertIfGiven", {None: True, "client": True, "stranger": False}),
])
def test_client_auth_types(pki: Path, auth: str, served: dict[str | None, bool]) -> None:
    ca = f"  client_ca_file: {pki}/ca.pem\n" if auth != "NoClientCert" else ""
    web = _config(pki, f"tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: {auth}\n{ca}")
    assert not web.authenticates
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        for cert, ok in served.items():
            assert _refused(server.url, _client(pki, cert)) is not ok, cert


def test_min_version_tls13(pki: Path) -> None:
    web = _config(pki, "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS13\n")
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert _refused(server.url, _client(pki, max_version=ssl.TLSVersion.TLSv1_2))
        assert _get(server.url, _client(pki))[0] == 200


@pytest.mark.parametrize("prefix", ["$2y$", "$2b$", "$2a$"])
def test_basic_auth(pki: Path, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", prefix, 1)
    web = _config(pki, f"tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                       f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    checks = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda pw, h: checks.append(pw) or real(pw, h))  # counted, not replaced
    ctx = _client(pki)
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        status, headers, body = _get(server.url, ctx)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic") and b"test_up" not in body
        status, headers, body = _get(server.url, ctx, ("prometheus", "wrong"))
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic") and b"test_up" not in body
        assert _get(server.url, ctx, ("nobody", "s3cret"))[0] == 401
        for _ in range(3):
            status, _, body = _get(server.url, ctx, ("prometheus", "s3cret"))
            assert status == 200 and b"test_up 1.0" in body
        assert checks == [b"wrong", b"s3cret", b"s3cret"]  # each verdict computed once, then cached


def test_basic_auth_over_plain_http() -> None:
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    from bpfkit.metrics.webconfig import parse_web_config

    web = parse_web_config(f"basic_auth_users:\n  u: {hashed}\n", "web.yml")
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert server.url.startswith("http://")
        assert _get(server.url)[0] == 401
        assert _get(server.url, auth=("u", "pw"))[0] == 200
        assert _get(server.url, auth=("u", "pw2"))[0] == 401


def test_a_flood_of_wrong_passwords_does_not_delay_a_known_one() -> None:
    """Each unknown password costs a bcrypt check (~0.1 s at cost 10) on one thread: at most 8
    wait for it, the rest get 503 at once, and a password already verified is answered from the
    cache meanwhile (issue 35: bound what a peer can make the server spend)."""
    import time

    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=10)).decode()
    from bpfkit.metrics.webconfig import parse_web_config

    web = parse_web_config(f"basic_auth_users:\n  u: {hashed}\n", "web.yml")
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert _get(server.url, auth=("u", "pw"))[0] == 200  # verified once, then cached
        flood = []
        for i in range(30):
            s = socket.create_connection(("127.0.0.1", server.port))
            token = base64.b64encode(f"u:wrong{i}".encode()).decode()
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n\r\n".encode())
            flood.append(s)
        start = time.monotonic()
        assert _get(server.url, auth=("u", "pw"))[0] == 200
        assert time.monotonic() - start < 0.5
        codes = []
        for s in flood:
            s.settimeout(10)
            codes.append(s.recv(4096).split(b" ")[1])
            s.close()
        assert codes.count(b"401") <= 12 and codes.count(b"503") >= 18, codes


def test_web_config_reloaded_when_it_changes(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A new password takes effect without a restart (checked at most once a second, on a new
    connection or request); a file that no longer loads is said once and the last good one stays."""
    import time

    def users(password: bytes) -> str:
        return f"basic_auth_users:\n  u: {bcrypt.hashpw(password, bcrypt.gensalt(rounds=4)).decode()}\n"

    path = tmp_path / "web.yml"
    path.write_text(users(b"one"))
    with MetricsServer("127.0.0.1:0", [One()], web_config=load_web_config(str(path))) as server:
        assert _get(server.url, auth=("u", "one"))[0] == 200
        path.write_text(users(b"two"))
        time.sleep(1.1)
        assert _get(server.url, auth=("u", "two"))[0] == 200
        assert _get(server.url, auth=("u", "one"))[0] == 401
        path.write_text("basic_auth_users:\n  u: plaintext\n")
        time.sleep(1.1)
        assert _get(server.url, auth=("u", "two"))[0] == 200
        time.sleep(1.1)
        assert _get(server.url, auth=("u", "two"))[0] == 200
    err = capfd.readouterr().err
    assert err.count("bpfkit: warning: metrics web config not reloaded: ") == 1, err
    assert f"{path}:2: basic_auth_users.u: not a bcrypt hash" in err and "(serving with the previous one)" in err


def test_certificate_rotated_without_a_restart(pki: Path, tmp_path: Path) -> None:
    import time

    for name in ("server.pem", "server.key"):
        shutil.copy(pki / name, tmp_path / name)
    web = _config(tmp_path, "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n")
    with MetricsServer("127.0.0.1:0", [One()], web_config=web) as server:
        assert _get(server.url, _client(pki))[0] == 200
        for name in ("server.pem", "server.key"):  # replaced by rename, as cert-manager and kubelet do
            shutil.copy(pki / name.replace("server", "server2"), tmp_path / f"{name}.new")
            os.rename(tmp_path / f"{name}.new", tmp_path / name)
        time.sleep(1.1)
        assert _refused(server.url, _client(pki))  # the new certificate: the old CA does not vouch for it
        assert _get(server.url, _client(pki, ca="other-ca"))[0] == 200


HASH = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"


@pytest.mark.parametrize(("text", "message"), [
    ("tls_server_config:\n  cert_fil: a.pem\n",
     "web.yml:2: tls_server_config: unknown key 'cert_fil' (known: cert_file, key_file, client_ca_file, client_auth_type, "
     "min_version, max_version, prefer_server_cipher_suites)"),
    ("basic_auth_user:\n  a: b\n", "web.yml:1: the file: unknown key 'basic_auth_user' (known: tls_server_config, basic_auth_users)"),
    ("rate_limit:\n  burst: 1\n", "web.yml:1: rate_limit: not supported by bpfkit's metrics server"),
    ("tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "web.yml:2: tls_server_config.cipher_suites: not supported by bpfkit's metrics server"),
    ("basic_auth_users:\n  prometheus: secret\n", "web.yml:2: basic_auth_users.prometheus: not a bcrypt hash"),
    ("basic_auth_users:\n  prometheus: [1]\n", "web.yml:2: basic_auth_users.prometheus: not a string"),
    ("basic_auth_users: &a\n  x: *a\n", "web.yml:2: YAML aliases (*name) are not allowed in a web config"),
    ("basic_auth_users:\n  <<: {a: b}\n", "web.yml:2: basic_auth_users: merge keys (<<) are not allowed"),
    ("a: " + "[" * 50 + "]" * 50 + "\n", "web.yml:1: nested deeper than a web config can be"),
    ("tls_server_config: [\n", "web.yml:2: not valid YAML"),
    ("tls_server_config:\n  cert_file: server.pem\n",
     "web.yml: tls_server_config: TLS needs both cert_file and key_file (missing: key_file)"),
    ("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS11\n",
     "web.yml:4: tls_server_config.min_version: 'TLS11' is not one of TLS12, TLS13 (TLS10 and TLS11 are not offered"),
    ("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
     "web.yml: tls_server_config.client_auth_type: RequireAndVerifyClientCert needs client_ca_file"),
    ("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: RequireAnyClientCert\n"
     "  client_ca_file: ca.pem\n", "web.yml: tls_server_config.client_auth_type: RequireAnyClientCert accepts a client certificate "
                                   "without verifying it"),
    ("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_ca_file: ca.pem\n",
     "web.yml: tls_server_config: client_ca_file is set but client_auth_type is NoClientCert"),
    ("tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n",
     "web.yml: tls_server_config: cert_file {pki}/server.key and key_file {pki}/server.key: not a certificate and its private key"),
    ("tls_server_config:\n  cert_file: server.pem\n  key_file: encrypted.key\n",  # refused, not prompted for on the terminal
     "not a certificate and its private key in PEM (the key is encrypted: bpfkit reads unencrypted keys only)"),
    ("tls_server_config:\n  cert_file: nope.pem\n  key_file: server.key\n", "cert_file {pki}/nope.pem: no such file"),
    ("tls_server_config:\n  cert_file: /dev/zero\n  key_file: server.key\n", "cert_file /dev/zero is a character device"),
])
def test_web_config_errors(pki: Path, text: str, message: str) -> None:
    with pytest.raises(BPFKitError) as err:
        _config(pki, text)
    assert str(err.value).startswith(f"{pki}/" + message.format(pki=pki)) or message.format(pki=pki) in str(err.value), str(err.value)


def test_web_config_file_itself(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match=r"web config .*fifo is a FIFO, not a regular file"):
        load_web_config(str(tmp_path / "fifo"))
    empty = tmp_path / "empty.yml"
    empty.write_text("basic_auth_users:\n")  # exporter-toolkit: empty means no authentication
    web = load_web_config(str(empty))
    assert web.tls is None and web.auth is None and not web.authenticates
    assert HASH  # the docs' example hash is well formed
    assert load_web_config(str(_write(tmp_path, f"basic_auth_users:\n  p: {HASH}\n"))).authenticates


def _write(d: Path, text: str) -> Path:
    path = d / "w.yml"
    path.write_text(text)
    return path
