# SPDX-License-Identifier: Apache-2.0
"""The metrics endpoint's TLS and basic authentication (``bpfkit attach --metrics-web-config
FILE``), configured as the Prometheus exporters configure theirs (exporter-toolkit's
``--web.config.file``, docs/web-configuration.md there): a YAML file with ``tls_server_config``
(cert_file, key_file, client_ca_file, client_auth_type, min_version, max_version) and
``basic_auth_users`` (user: bcrypt hash). Keys the exporters know but bpfkit does not implement
are refused by name, as are unknown keys, so a file never silently means less than it says.

Passwords are checked with bcrypt (slow by design: ~100 ms at cost 10), then the verdict is
cached under an HMAC of (user, hash, password) with a per-process key, as exporter-toolkit
caches it, so a scrape costs a dictionary lookup."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import ssl
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._files import read_regular
from ..errors import UsageError

if TYPE_CHECKING:
    import yaml

__all__ = ["WebConfig", "BasicAuth", "load_web_config", "parse_web_config"]

# A web config is a few hundred bytes; certificates and keys a few KiB (a CA bundle ~200 KiB).
CONFIG_LIMIT = 64 << 10
PEM_LIMIT = 4 << 20
_MAX_DEPTH = 8  # the deepest valid key is tls_server_config.client_allowed_sans[0]

_TLS_KEYS = ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version",
             "prefer_server_cipher_suites")
# exporter-toolkit's keys bpfkit does not implement: named, so the error says "not supported", not "unknown".
_TLS_UNSUPPORTED = ("cert", "key", "client_ca", "client_allowed_sans", "cipher_suites", "curve_preferences")
_TOP_KEYS = ("tls_server_config", "basic_auth_users")
_TOP_UNSUPPORTED = ("http_server_config", "rate_limit")
_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
# Go's tls.ClientAuthType names. The two that take a certificate without verifying it cannot be
# expressed with OpenSSL through Python's ssl module (and exporter-toolkit calls them insecure).
_CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
_CLIENT_AUTH_REFUSED = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# $2a$, $2b$ (OpenBSD, Python's bcrypt) and $2y$ (PHP, htpasswd -B): the same algorithm for
# passwords of valid UTF-8; cost 04..31; 22 characters of salt and 31 of hash.
_BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
# A fixed hash ("fakepassword", as exporter-toolkit's) checked for unknown users, so that the
# time a wrong answer takes does not say whether the user exists.
_DECOY = b"$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"
_CACHE_SIZE = 256


@dataclass
class BasicAuth:
    """``basic_auth_users``: checks ``Authorization: Basic ...`` headers."""

    users: dict[str, bytes]
    _key: bytes = field(default_factory=lambda: os.urandom(32), repr=False)
    # Verdicts: the right passwords apart, so that a flood of wrong ones cannot push them out.
    _good: OrderedDict[bytes, bool] = field(default_factory=OrderedDict, repr=False)
    _bad: OrderedDict[bytes, bool] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _cache_key(self, user: bytes, password: bytes) -> bytes:
        stored = self.users.get(user.decode("utf-8", "surrogateescape"), _DECOY)
        return hmac.new(self._key, b"\0".join((user, stored, password)), hashlib.sha256).digest()

    def cached(self, header: str | None) -> bool | None:
        """The verdict on an Authorization header if it is known without bcrypt: False for a
        missing or malformed one, the cached verdict, or None (call :meth:`check`)."""
        creds = _credentials(header)
        if creds is None:
            return False
        key = self._cache_key(*creds)
        with self._lock:
            for cache in (self._good, self._bad):
                if key in cache:
                    cache.move_to_end(key)
                    return cache[key]
        return None

    def check(self, header: str | None) -> bool:
        """Whether the header names a user and the password of its hash (bcrypt, then cached)."""
        import bcrypt

        creds = _credentials(header)
        if creds is None:
            return False
        user, password = creds
        name = user.decode("utf-8", "surrogateescape")
        stored = self.users.get(name)
        # bcrypt reads the first 72 bytes of a password (Go's x/crypto and htpasswd do the
        # same); bcrypt>=5 raises on longer ones instead of truncating.
        ok = bcrypt.checkpw(password[:72], stored if stored is not None else _DECOY) and stored is not None
        key = self._cache_key(user, password)
        with self._lock:
            cache = self._good if ok else self._bad
            cache[key] = ok
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)
        return ok


def _credentials(header: str | None) -> tuple[bytes, bytes] | None:
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


@dataclass
class WebConfig:
    """A parsed web config: an SSL context for the server side (None: plain HTTP) and the
    basic-auth users (None: no authentication)."""

    path: str
    tls: ssl.SSLContext | None = None
    auth: BasicAuth | None = None
    client_certs_required: bool = False
    files: list[str] = field(default_factory=list)  # what was read: the file, certificates, keys
    _seen: tuple[tuple[int, ...] | None, ...] = ()
    _read_at = 0.0

    @property
    def authenticates(self) -> bool:
        """Whether every request must prove who sent it (a password or a verified client certificate)."""
        return self.auth is not None or self.client_certs_required

    def stale(self) -> bool:
        """Whether a file read changed since (stat: inode, size, mtime, ctime; a renamed or
        re-linked certificate as Kubernetes and cert-manager swap them counts). A file changed
        within 2 s of being read may have changed after the read: it is read once more."""
        if not self.files:
            return False
        return _stats(self.files) != self._seen or any(
            st is not None and st[3] / 1e9 > self._read_at - 2 for st in self._seen)


def load_web_config(path: str) -> WebConfig:
    """Read and check ``path`` (a regular file of at most 64 KiB), load its certificates."""
    data = read_regular(path, "web config", CONFIG_LIMIT)
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    read_at = time.time()
    config = parse_web_config(text, path)
    config.files.insert(0, path)
    config._seen, config._read_at = _stats(config.files), read_at
    return config


def _stats(paths: list[str]) -> tuple[tuple[int, ...] | None, ...]:
    out: list[tuple[int, ...] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_dev, st.st_ino, st.st_size, max(st.st_mtime_ns, st.st_ctime_ns)))
    return tuple(out)


def parse_web_config(text: str, path: str) -> WebConfig:
    import yaml

    root = _compose(text, path)
    config = WebConfig(path)
    if root is None:
        return config
    top = _mapping(root, path, "", _TOP_KEYS, _TOP_UNSUPPORTED)
    if "basic_auth_users" in top:
        node = top["basic_auth_users"][1]
        users: dict[str, bytes] = {}
        if not (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
            for name, (_key, value) in _mapping(node, path, "basic_auth_users", None, ()).items():
                hashed = _string(value, path, f"basic_auth_users.{name}")
                if not _BCRYPT.fullmatch(hashed):
                    raise UsageError(f"{_where(path, value)}basic_auth_users.{name}: not a bcrypt hash ($2y$, $2b$ or $2a$, "
                                     "cost 04-31, 53 characters of salt and hash; e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)")
                users[name] = hashed.encode()
        config.auth = BasicAuth(users) if users else None
    if "tls_server_config" in top:
        node = top["tls_server_config"][1]
        if not (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
            tls = _mapping(node, path, "tls_server_config", _TLS_KEYS, _TLS_UNSUPPORTED)
            if tls:
                config.tls, config.client_certs_required = _tls_context(tls, path, config.files)
    return config


Entries = dict[str, tuple["yaml.Node", "yaml.Node"]]


def _tls_context(tls: Entries, path: str, files: list[str]) -> tuple[ssl.SSLContext, bool]:
    base = os.path.dirname(os.path.abspath(path))
    where = f"{path}: tls_server_config"

    def text(key: str, default: str = "") -> str:
        return _string(tls[key][1], path, f"tls_server_config.{key}") if key in tls else default

    def file(key: str) -> str:
        name = text(key)
        return name if not name else os.path.join(base, name)  # relative to the config, as exporter-toolkit

    cert, key = file("cert_file"), file("key_file")
    files += [f for f in (cert, key, file("client_ca_file")) if f]
    if not cert or not key:
        raise UsageError(f"{where}: TLS needs both cert_file and key_file (missing: {'cert_file' if not cert else 'key_file'})")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_COMPRESSION
    for name in ("min_version", "max_version"):
        value = text(name)
        if value and value not in _VERSIONS:
            refused = " (TLS10 and TLS11 are not offered: RFC 8996 deprecates them)" if value in ("TLS10", "TLS11") else ""
            raise UsageError(f"{_where(path, tls[name][1])}tls_server_config.{name}: {value!r} is not one of "
                             f"{', '.join(_VERSIONS)}{refused}")
    ctx.minimum_version = _VERSIONS[text("min_version", "TLS12")]
    ctx.maximum_version = _VERSIONS[text("max_version", "TLS13")]
    if ctx.minimum_version > ctx.maximum_version:
        raise UsageError(f"{where}: min_version {text('min_version')} is above max_version {text('max_version')}")
    if "prefer_server_cipher_suites" in tls:
        node = tls["prefer_server_cipher_suites"][1]
        if node.tag != "tag:yaml.org,2002:bool":
            raise UsageError(f"{_where(path, node)}tls_server_config.prefer_server_cipher_suites: not true or false")
        if node.value.lower() in ("false", "no", "off"):
            ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    _load_chain(ctx, cert, key, where)
    auth = text("client_auth_type", "NoClientCert")
    if auth in _CLIENT_AUTH_REFUSED:
        raise UsageError(f"{where}.client_auth_type: {auth} accepts a client certificate without verifying it; bpfkit "
                         "does not offer it: use RequireAndVerifyClientCert with client_ca_file")
    if auth not in _CLIENT_AUTH:
        raise UsageError(f"{where}.client_auth_type: {auth!r} is not one of {', '.join(_CLIENT_AUTH)}")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    ca = file("client_ca_file")
    if ca and auth == "NoClientCert":
        raise UsageError(f"{where}: client_ca_file is set but client_auth_type is NoClientCert "
                         "(RequireAndVerifyClientCert makes clients prove who they are)")
    if auth != "NoClientCert":
        if not ca:
            raise UsageError(f"{where}.client_auth_type: {auth} needs client_ca_file (the CA that signs client certificates)")
        pem = read_regular(ca, "client_ca_file", PEM_LIMIT)
        try:
            ctx.load_verify_locations(cadata=pem.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise UsageError(f"{where}.client_ca_file {ca}: no CA certificate in it ({_ssl_reason(exc)})") from None
    return ctx, auth == "RequireAndVerifyClientCert"


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, where: str) -> None:
    """load_cert_chain reads paths itself: the files are read here (regular files, bounded) and
    handed over through memfds, so a FIFO or /dev/zero named in the config cannot hang or fill
    memory, and an encrypted key fails instead of prompting on the terminal."""
    pems = [read_regular(cert, "cert_file", PEM_LIMIT), read_regular(key, "key_file", PEM_LIMIT)]
    fds = []
    try:
        for pem in pems:
            fd = os.memfd_create("bpfkit-web-config", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, pem)
        ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}", password=_no_password)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise UsageError(f"{where}: cert_file {cert} and key_file {key}: not a certificate and its private key in PEM "
                         f"({_ssl_reason(exc)})") from None
    finally:
        for fd in fds:
            os.close(fd)


def _no_password() -> bytes:
    raise ValueError("the key is encrypted: bpfkit reads unencrypted keys only")


def _ssl_reason(exc: BaseException) -> str:
    """OpenSSL's reason ("PEM lib", "key values mismatch"), without "[SSL] " and "(_ssl.c:NNN)"."""
    reason = getattr(exc, "reason", None) or (exc.args[-1] if exc.args else str(exc))
    return re.sub(r"^\[\w+\] | \(_ssl\.c:\d+\)$", "", str(reason))


def _where(path: str, node: yaml.Node) -> str:
    return f"{path}:{node.start_mark.line + 1}: "


def _compose(text: str, path: str) -> yaml.Node | None:
    """The YAML node tree, refusing aliases (no web config needs them; they are how YAML bombs
    grow) and nesting deeper than any valid file."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            if self.check_event(yaml.AliasEvent):
                raise UsageError(f"{path}:{line}: YAML aliases (*name) are not allowed in a web config")
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise UsageError(f"{path}:{line}: nested deeper than a web config can be")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{line}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:  # ReaderError (a NUL byte, ...) carries no mark
        raise UsageError(f"{path}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    return node


def _mapping(node: yaml.Node, path: str, where: str, known: tuple[str, ...] | None, unsupported: tuple[str, ...]) -> Entries:
    """A mapping node's entries by key; ``known`` None: any string key."""
    import yaml

    label = where or "the file"
    if not isinstance(node, yaml.MappingNode):
        raise UsageError(f"{_where(path, node)}{label}: not a mapping of keys to values")
    entries: Entries = {}
    for key_node, value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise UsageError(f"{_where(path, key_node)}{label}: merge keys (<<) are not allowed in a web config")
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
            raise UsageError(f"{_where(path, key_node)}{label}: a key that is not a string")
        key = key_node.value
        dotted = f"{where}.{key}" if where else key
        if key in unsupported:
            raise UsageError(f"{_where(path, key_node)}{dotted}: not supported by bpfkit's metrics server "
                             f"(supported in {label}: {', '.join(known or ())})")
        if known is not None and key not in known:
            raise UsageError(f"{_where(path, key_node)}{label}: unknown key {key!r} (known: {', '.join(known)})")
        if key in entries:
            raise UsageError(f"{_where(path, key_node)}{dotted}: given twice")
        entries[key] = (key_node, value)
    return entries


def _string(node: yaml.Node, path: str, what: str) -> str:
    import yaml

    if not isinstance(node, yaml.ScalarNode) or node.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int"):
        raise UsageError(f"{_where(path, node)}{what}: not a string")
    return str(node.value)
