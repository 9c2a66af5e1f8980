# SPDX-License-Identifier: Apache-2.0
"""Certificates for the metrics endpoint's TLS tests, made by the openssl command (Debian's
openssl package): a CA, a server certificate for 127.0.0.1 and localhost, a client certificate
the CA signs, and one signed by another CA. Valid for a day."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

__all__ = ["HAVE_OPENSSL", "make_pki", "client_context"]

HAVE_OPENSSL = shutil.which("openssl") is not None


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-keyout", d / f"{name}.key", "-out", d / f"{name}.pem", "-subj", f"/CN={name}")


def _leaf(d: Path, name: str, ca: str, ext: str) -> None:
    (d / f"{name}.ext").write_text(ext + "\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}")
    _openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem", "-CAkey", d / f"{ca}.key",
             "-CAcreateserial", "-days", "1", "-out", d / f"{name}.pem", "-extfile", d / f"{name}.ext")


def make_pki(d: Path) -> Path:
    """ca.pem, server.pem/.key, client.pem/.key (signed by ca), stranger.pem/.key and server2.pem/.key (by
    other-ca), encrypted.key (server.key under a passphrase) in ``d``."""
    _ca(d, "ca")
    _ca(d, "other-ca")
    _leaf(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    _leaf(d, "client", "ca", "extendedKeyUsage=clientAuth")
    _leaf(d, "stranger", "other-ca", "extendedKeyUsage=clientAuth")
    _leaf(d, "server2", "other-ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    _openssl("ec", "-in", d / "server.key", "-out", d / "encrypted.key", "-aes256", "-passout", "pass:secret")
    return d


def client_context(pki: Path, cert: str | None = None, max_version: ssl.TLSVersion | None = None,
                   ca: str = "ca") -> ssl.SSLContext:
    """A client trusting ``ca``.pem, presenting ``cert`` (client, stranger) if given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki / f"{ca}.pem")
    if cert:
        ctx.load_cert_chain(pki / f"{cert}.pem", pki / f"{cert}.key")
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx
