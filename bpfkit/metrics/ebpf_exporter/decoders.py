# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's label decoders (its decoder/*.go), over the bytes of a map key.

A key is cut into labels in order: each label takes ``size`` bytes, then ``padding`` bytes are
skipped; the sizes and paddings add up to the key's size exactly, or the key is an error. A
label's bytes go through its decoder chain: each decoder takes bytes and gives bytes (text,
mostly), which are the next one's input; the last one's are the label's value::

    uint          1, 2, 4 or 8 bytes in host order -> decimal text
    ksym          a u64 address -> the kernel symbol starting there; unknown_addr:0x<hex>
    kstack        u64 addresses up to the first 0 -> their symbols, one a line; ?? when none
    syscall       decimal -> the syscall's name (this machine's table); unknown_syscall:N
    errno         decimal -> ENOENT (as Go's unix.ErrnoName); unknown:N
    cgroup        decimal cgroup id -> the cgroup's path (/sys/fs/cgroup/...); unknown_cgroup_id:N
    static_map    text -> the table's text; unknown:<text> (or the text with allow_unknown)
    string        bytes up to the first NUL
    inet_ip       4 or 16 bytes -> 10.0.0.1 / 2001:db8::1 (as Go's net.IP.String)
    regexp        the first regexp that matches: its group 1, or the match; none: sample dropped
    majorminor    a u32 dev_t (new_encode_dev) -> the block device's name in /proc/partitions
    ifname        a u32 ifindex -> the interface's name; unknown:N
    dname         a DNS name in wire format -> dotted
    hex           bytes -> lower-case hex
    pci_vendor, pci_device, pci_class, pci_subclass
                  decimal ids -> names from pci.ids ("missing pci.ids db" without one)

:class:`DecoderSet` holds the decoders' state (kernel symbols, cgroup paths, pci.ids, all read
on first use) and, per metric, the labels already decoded for a key's bytes, as
ebpf_exporter's decoder.Set does. Where bpfkit differs from ebpf_exporter (on purpose, each
where a Go program would panic or print something no one wants) the code says so.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence

from ...errors import BPFKitError
from ..cgroup_paths import CgroupPaths
from ..syscall_tables import syscall_name
from .config import DecoderConf, Label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..._kernel.kallsyms import KernelSymbols

__all__ = ["SkipLabelSet", "DecodeError", "DecoderSet", "PCI_IDS_PATHS"]

# decoder/pci.go's pciIDsPaths (jaypipes/pcidb reads hwdata's first when both exist).
PCI_IDS_PATHS = ("/usr/share/hwdata/pci.ids", "/usr/share/misc/pci.ids")
PARTITIONS = "/proc/partitions"
# How many keys' labels a metric keeps decoded; past it the metric's cache starts over, so a
# map of millions of keys costs decoding, never memory without bound.
CACHE_LIMIT = 65536
# Kernel symbols are read again for an address they lack (BPF programs come and go), at most
# this often: kallsyms takes ~0.3 s to read on 6.18.
_KALLSYMS_RELOAD = 5.0
_U64 = (1 << 64) - 1
_MACHINE = os.uname().machine  # whose syscall table the syscall decoder reads


class SkipLabelSet(Exception):
    """A regexp decoder matched nothing: the sample (the key's value) is dropped."""


class DecodeError(BPFKitError):
    """A key that a label's decoders cannot turn into text; ``label``, ``decoder`` and ``raw``
    (the bytes the decoder was given) say which, when known."""

    def __init__(self, message: str, *, label: str = "", decoder: str = "", raw: bytes = b"") -> None:
        super().__init__(message)
        self.label, self.decoder, self.raw = label, decoder, raw


class _Refused(Exception):
    """A decoder's input it cannot decode (the reason); made a DecodeError with its context."""


def _shown(raw: bytes) -> str:
    return raw.hex(" ") if len(raw) <= 32 else raw[:32].hex(" ") + f" ... ({len(raw)} bytes)"


# ------------------------------------------------------------------------ text <-> numbers
_DIGITS = re.compile(rb"[0-9]+\Z")
_SIGNED = re.compile(rb"[+-]?[0-9]+\Z")


def _parse_uint(data: bytes) -> int:
    """Go's strconv.ParseUint(s, 10, 64): digits only, below 2**64."""
    if _DIGITS.match(data) and int(data) <= _U64:
        return int(data)
    raise _Refused(f"{data!r} is not an unsigned 64-bit decimal number")


def _parse_int(data: bytes) -> int:
    """Go's strconv.Atoi: an optional sign, digits, in int64 range."""
    if _SIGNED.match(data) and -(1 << 63) <= int(data) < (1 << 63):
        return int(data)
    raise _Refused(f"{data!r} is not a decimal number")


def _word(data: bytes, size: int, what: str) -> int:
    """The first ``size`` bytes of ``data`` as an unsigned number in host order (Go slices
    in[0:4] and panics on fewer bytes: here that is an error)."""
    if len(data) < size:
        raise _Refused(f"{what} needs {size} bytes, got {len(data)}")
    return int.from_bytes(data[:size], sys.byteorder)


# ------------------------------------------------------------------------ errno
# golang.org/x/sys/unix's errorList (zerrors_linux_*.go), which unix.ErrnoName searches:
# 1..133 but 41 and 58 (no such errno), named as there (35 EDEADLK, 95 ENOTSUP). Python's
# errno.errorcode has the same names but these three, and no kernel-internal 512+ ones.
_GO_ERRNO_SPELLING = {35: "EDEADLK", 95: "ENOTSUP", 133: "EHWPOISON"}


def _errno_name(n: int) -> str | None:
    import errno

    if not 1 <= n <= 133 or n in (41, 58):
        return None
    return _GO_ERRNO_SPELLING.get(n) or errno.errorcode.get(n)


# ------------------------------------------------------------------------ inet_ip
def _ipv6_text(raw: bytes) -> str:
    """RFC 5952 text, as Go's netip.Addr.String: lower-case hex without leading zeros; the
    first longest run of two or more zero groups is "::"."""
    groups = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, 16, 2)]
    best, best_len, i = -1, 1, 0
    while i < 8:
        j = i
        while j < 8 and groups[j] == 0:
            j += 1
        if j - i > best_len:
            best, best_len = i, j - i
        i = j + 1
    if best < 0:
        return ":".join(f"{g:x}" for g in groups)
    head = ":".join(f"{g:x}" for g in groups[:best])
    tail = ":".join(f"{g:x}" for g in groups[best + best_len:])
    return f"{head}::{tail}"


def _inet_ip(data: bytes, _conf: DecoderConf) -> bytes:
    """Go's net.IP(in).String(): an IPv4-mapped IPv6 address (::ffff:a.b.c.d) prints as its
    dotted quad; other sizes as ?<hex>, none as <nil>."""
    if not data:
        return b"<nil>"
    if len(data) == 4:
        return socket.inet_ntop(socket.AF_INET, data).encode()
    if len(data) == 16:
        if data[:12] == b"\0" * 10 + b"\xff\xff":
            return socket.inet_ntop(socket.AF_INET, data[12:]).encode()
        return _ipv6_text(data).encode()
    return b"?" + data.hex().encode()


# ------------------------------------------------------------------------ stateless decoders
def _uint(data: bytes, _conf: DecoderConf) -> bytes:
    if len(data) not in (1, 2, 4, 8):
        raise _Refused(f"unknown value length {len(data)} (uint decodes 1, 2, 4 or 8 bytes)")
    return str(int.from_bytes(data, sys.byteorder)).encode()


def _errno(data: bytes, _conf: DecoderConf) -> bytes:
    n = _parse_uint(data)
    return (_errno_name(n) or f"unknown:{n}").encode()


def _syscall(data: bytes, _conf: DecoderConf) -> bytes:
    nr = _parse_int(data) & _U64  # syscall.go: uint64(strconv.Atoi(...))
    return (syscall_name(nr, _MACHINE) or f"unknown_syscall:{nr}").encode()


def _static_map(data: bytes, conf: DecoderConf) -> bytes:
    if conf.static_map is None:
        return b"empty mapping"
    found = conf.static_map.get(data.decode("utf-8", "surrogateescape"))
    if found is not None:
        return found.encode()
    return data if conf.allow_unknown else b"unknown:" + data


def _string(data: bytes, _conf: DecoderConf) -> bytes:
    return data.split(b"\0", 1)[0]


def _hex(data: bytes, _conf: DecoderConf) -> bytes:
    return data.hex().encode()


def _dname(data: bytes, _conf: DecoderConf) -> bytes:
    """dname.go: each length byte becomes a dot (the first dropped); a length running past
    the end gives the input back as it is."""
    if not data:
        return b"."
    out = bytearray(len(data))
    off = 0
    while off < len(data):
        n = data[off]
        out[off] = 0x2E
        off += 1
        if off + n > len(data):
            return data
        out[off:off + n] = data[off:off + n]
        off += n
    return bytes(out[1:])


# ------------------------------------------------------------------------ state read on first use
class _Symbols:
    """/proc/kallsyms for ksym and kstack, read on first use and again (at most every
    _KALLSYMS_RELOAD seconds) for an address it lacks, as kallsyms/decoder.go refreshes on a
    miss. Only text symbols are found (:class:`bpfkit._kernel.kallsyms.KernelSymbols`) and a
    module's symbol is its bare name: ebpf_exporter splits lines on spaces and so names one
    ``name\\t[module]``. Hidden addresses (kptr_restrict) make every address unknown."""

    def __init__(self) -> None:
        self.table: KernelSymbols | None = None
        self.loaded_at: float | None = None

    def _reload(self) -> bool:
        now = time.monotonic()
        if self.loaded_at is not None and now - self.loaded_at < _KALLSYMS_RELOAD:
            return False
        from ..._kernel.kallsyms import KernelSymbols

        self.loaded_at = now
        try:
            self.table = KernelSymbols.load()
        except BPFKitError:  # hidden (every address 0) or unreadable: no symbols
            self.table = None
        return True

    def _exact(self, addr: int) -> str | None:
        table = self.table
        if table is None:
            return None
        i = table.index(addr)
        return table.entry(i)[0] if i >= 0 and table.address_at(i) == addr else None

    def _nearest(self, addr: int) -> str | None:
        return self.table.name(addr) if self.table is not None else None

    def exact(self, addr: int) -> str | None:
        """The symbol at exactly ``addr`` (decoder.go's Sym: a function's address)."""
        name = self._exact(addr)
        if name is None and self._reload():
            name = self._exact(addr)
        return name

    def stack(self, addrs: list[int]) -> list[str | None]:
        """The symbol at or below each address (decoder.go's Stack)."""
        names = [self._nearest(a) for a in addrs]
        if None in names and self._reload():
            names = [self._nearest(a) for a in addrs]
        return names


class _PciIds:
    """pci.ids parsed as jaypipes/pcidb parses it (parse.go): vendors ("8086  Intel ..."),
    their devices keyed vendor+device ("\\t1000  82542 ..." -> "80861000"), classes
    ("C 02  Network controller") and their subclasses ("\\t00  Ethernet controller")."""

    def __init__(self, text: str) -> None:
        self.vendors: dict[str, str] = {}
        self.devices: dict[str, str] = {}
        self.classes: dict[str, str] = {}
        self.subclasses: dict[str, dict[str, str]] = {}
        vendor, klass = "", None
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            if line[0] == "C":
                klass = line[2:4]
                self.classes[klass] = line[6:]
                self.subclasses[klass] = {}
            elif line[0] != "\t":
                klass, vendor = None, line[0:4]
                self.vendors[vendor] = line[6:]
            elif len(line) > 1 and line[1] != "\t":
                if klass is not None:
                    self.subclasses[klass].setdefault(line[1:3], line[5:])  # the decoder takes the first
                else:
                    self.devices[vendor + line[1:5]] = line[7:]

    @classmethod
    def load(cls) -> _PciIds | None:
        for path in PCI_IDS_PATHS:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    return cls(f.read())
            except OSError:
                continue
        return None


# ------------------------------------------------------------------------ the set
_Decoder = Callable[[bytes, DecoderConf], bytes]
_MISSING_PCI_IDS = b"missing pci.ids db"


class DecoderSet:
    """ebpf_exporter's decoder.Set: every decoder, their state, and per-metric caches of
    decoded keys. Cheap to make: kallsyms, cgroups and pci.ids are read on first use. Safe to
    share between threads (one lock, as the Go set has)."""

    def __init__(self, *, cache_limit: int = CACHE_LIMIT) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, dict[bytes, list[str] | None]] = {}
        self._cache_limit = cache_limit
        self._symbols = _Symbols()
        self._cgroups = CgroupPaths()
        self._pci: _PciIds | None = None
        self._pci_read = False
        self._ifnames: dict[int, bytes] = {}
        self._devices: dict[int, bytes] = {}
        self._regexps: dict[str, re.Pattern[str]] = {}
        self._decoders: dict[str, _Decoder] = {
            "cgroup": self._cgroup, "dname": _dname, "errno": _errno, "hex": _hex, "ifname": self._ifname,
            "inet_ip": _inet_ip, "kstack": self._kstack, "ksym": self._ksym, "majorminor": self._majorminor,
            "pci_class": lambda data, _conf: self._pci_name(data, "class"),
            "pci_device": lambda data, _conf: self._pci_name(data, "device"),
            "pci_subclass": self._pci_subclass, "pci_vendor": lambda data, _conf: self._pci_name(data, "vendor"),
            "regexp": self._regexp, "static_map": _static_map, "string": _string,
            "syscall": _syscall, "uint": _uint,
        }

    # -------------------------------------------------------------------- entry points
    def decode_labels(self, raw: bytes, labels: Sequence[Label]) -> list[str]:
        """The label values of key ``raw`` (decoder.go's DecodeLabelsForTracing: no cache).
        SkipLabelSet when a regexp decoder matched nothing; DecodeError for a key or label
        its decoders cannot read."""
        with self._lock:
            return self._decode_labels(raw, labels)

    def decode_labels_cached(self, raw: bytes, metric: str, labels: Sequence[Label]) -> list[str] | None:
        """As :meth:`decode_labels`, remembered per metric by the key's bytes (decoder.go's
        DecodeLabelsForMetrics); None for a key whose sample is dropped (remembered too). The
        list returned is the cache's own: do not change it."""
        with self._lock:
            cache = self._cache.get(metric)
            if cache is None:
                cache = self._cache[metric] = {}
            try:
                return cache[raw]
            except KeyError:
                pass
            try:
                values: list[str] | None = self._decode_labels(raw, labels)
            except SkipLabelSet:
                values = None
            if len(cache) >= self._cache_limit:
                cache.clear()
            cache[raw] = values
            return values

    # -------------------------------------------------------------------- the chain
    def _decode_labels(self, raw: bytes, labels: Sequence[Label]) -> list[str]:
        total = sum(label.size + label.padding for label in labels)
        if total != len(raw):
            names = ", ".join(label.name for label in labels)
            raise DecodeError(f"decode labels {names} from key {_shown(raw)}: the key has {len(raw)} bytes, the labels' "
                              f"sizes and paddings add up to {total}", label=names, raw=raw)
        values = []
        off = 0
        for label in labels:
            if label.size == 0 or not label.decoders:
                what = "size is zero" if label.size == 0 else "no decoders set"
                raise DecodeError(f"decode label {label.name!r}: {what}", label=label.name, raw=raw)
            data = raw[off:off + label.size]
            off += label.size + label.padding
            for conf in label.decoders:
                try:
                    data = self._decoders[conf.name](data, conf)
                except _Refused as exc:
                    raise DecodeError(f"decode label {label.name!r} with decoder {conf.name!r} from {_shown(data)}: {exc}",
                                      label=label.name, decoder=conf.name, raw=data) from None
            # Label values are UTF-8 text: bytes that are not (a string decoder over binary
            # data) are replaced (U+FFFD), where Go's Prometheus client refuses the metric.
            values.append(data.decode("utf-8", "replace"))
        return values

    # -------------------------------------------------------------------- stateful decoders
    def _ksym(self, data: bytes, _conf: DecoderConf) -> bytes:
        addr = _word(data, 8, "ksym")
        return (self._symbols.exact(addr) or f"unknown_addr:0x{addr:x}").encode()

    def _kstack(self, data: bytes, _conf: DecoderConf) -> bytes:
        if len(data) % 8:
            raise _Refused(f"kstack decodes 8-byte addresses, got {len(data)} bytes")
        addrs = []
        for off in range(0, len(data), 8):
            addr = int.from_bytes(data[off:off + 8], sys.byteorder)
            if addr == 0:
                break
            addrs.append(addr)
        return "\n".join(name or "??" for name in self._symbols.stack(addrs)).encode()

    def _cgroup(self, data: bytes, _conf: DecoderConf) -> bytes:
        """cgroup.go: the cgroup's full path under the cgroup2 mount, as ebpf_exporter's cgroup
        monitor gives it (:class:`~bpfkit.metrics.cgroup_paths.CgroupPaths`). ebpf_exporter
        walks /sys/fs/cgroup whatever is mounted there; bpfkit walks the cgroup2 mounts: the
        same on a unified hierarchy, and right on a hybrid one (where the v1 hierarchies'
        inode numbers collide with cgroup2's)."""
        cid = _parse_int(data)
        return (self._cgroups.path(cid) or f"unknown_cgroup_id:{cid}").encode()

    def _ifname(self, data: bytes, _conf: DecoderConf) -> bytes:
        """ifname.go: the name of the interface with that index in this network namespace,
        kept once found; unknown:N for none (one removed since, or index 0)."""
        idx = _word(data, 4, "ifname")
        name = self._ifnames.get(idx)
        if name is None:
            try:
                name = self._ifnames[idx] = socket.if_indextoname(idx).encode()
            except OSError:
                return f"unknown:{idx}".encode()
        return name

    def _majorminor(self, data: bytes, _conf: DecoderConf) -> bytes:
        """majorminor.go: the kernel's new_encode_dev() of a dev_t (minor's low 8 bits, major,
        minor's high bits: os.major/os.minor read it) -> the name /proc/partitions gives that
        major and minor, kept once found; unknown:MAJ:MIN for none."""
        dev = _word(data, 4, "majorminor")
        name = self._devices.get(dev)
        if name is None:
            major, minor = os.major(dev), os.minor(dev)
            want = (str(major), str(minor))
            try:
                with open(PARTITIONS) as f:
                    for line in f:
                        fields = line.split()
                        if len(fields) == 4 and (fields[0], fields[1]) == want:
                            name = fields[3].encode()
                            break
            except OSError as exc:
                raise _Refused(f"read {PARTITIONS}: {exc.strerror}") from None
            if name is None:
                return f"unknown:{major}:{minor}".encode()
            self._devices[dev] = name
        return name

    def _regexp(self, data: bytes, conf: DecoderConf) -> bytes:
        """regexp.go: the first regexp that matches anywhere in the text gives its group 1 (one
        with a single group) or the whole match (one with none); a regexp with more groups
        never gives a value, as Go's FindSubmatch result is then neither length. None: the
        sample is dropped."""
        if not conf.regexps:
            raise _Refused("no regexps defined in config")
        text = data.decode("utf-8", "surrogateescape")
        for expr in conf.regexps:
            pattern = self._regexps.get(expr)
            if pattern is None:
                pattern = self._regexps[expr] = re.compile(expr)
            found = pattern.search(text)
            if found is None or pattern.groups > 1:
                continue
            value = (found.group(1) or "") if pattern.groups == 1 else found.group(0)
            return value.encode("utf-8", "surrogateescape")
        raise SkipLabelSet(f"no regexp of {', '.join(conf.regexps)} matches {text!r}")

    # -------------------------------------------------------------------- pci.ids (pci_*.go)
    def _pci_ids(self) -> _PciIds | None:
        if not self._pci_read:
            self._pci, self._pci_read = _PciIds.load(), True
        return self._pci

    def _pci_name(self, data: bytes, kind: str) -> bytes:
        """pci_vendor.go, pci_device.go, pci_class.go: the id as hex (at least 2 digits; a
        device's is vendor << 16 | device, at least 4: "80861000") looked up in pci.ids."""
        db = self._pci_ids()
        if db is None:
            return _MISSING_PCI_IDS
        key = f"{_parse_int(data):{'04x' if kind == 'device' else '02x'}}"
        table = db.devices if kind == "device" else db.vendors if kind == "vendor" else db.classes
        return table.get(key, f"unknown pci {kind}: 0x{key}").encode()

    def _pci_subclass(self, data: bytes, _conf: DecoderConf) -> bytes:
        db = self._pci_ids()
        if db is None:
            return _MISSING_PCI_IDS
        num = _parse_int(data)  # class << 8 | subclass
        class_id, sub_id = f"{num >> 8:02x}", f"{num & 0xFF:02x}"
        subclasses = db.subclasses.get(class_id)
        if subclasses is None:
            return f"unknown pci class: 0x{class_id}".encode()
        return subclasses.get(sub_id, f"unknown pci subclass: 0x{sub_id} (class 0x{class_id})").encode()
