# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's label decoders (bpfkit.metrics.ebpf_exporter.decoders) against the running
machine: its interfaces, block devices, cgroups, kernel symbols and pci.ids; and the chain
rules (labels sliced by size and padding, each decoder's output the next one's input, the
regexp decoder dropping a sample). Expected texts are ebpf_exporter's (decoder/*_test.go
where it has one)."""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from bpfkit._kernel import cgroupfs
from bpfkit._kernel.kallsyms import KernelSymbols
from bpfkit.errors import BPFKitError, KernelPermissionError
from bpfkit.metrics.ebpf_exporter.config import DECODER_NAMES, DecoderConf, Label
from bpfkit.metrics.ebpf_exporter.decoders import PCI_IDS_PATHS, DecodeError, DecoderSet, SkipLabelSet

ORDER = sys.byteorder


def label(name: str, size: int, *decoders: str | DecoderConf, padding: int = 0) -> Label:
    return Label(name, size, padding, tuple(d if isinstance(d, DecoderConf) else DecoderConf(d) for d in decoders))


def one(raw: bytes, *decoders: str | DecoderConf, ds: DecoderSet | None = None) -> str:
    """The value of a single label covering all of ``raw``."""
    return (ds or DecoderSet()).decode_labels(raw, [label("l", len(raw), *decoders)])[0]


def u32(n: int) -> bytes:
    return n.to_bytes(4, ORDER)


def u64(n: int) -> bytes:
    return n.to_bytes(8, ORDER)


def dec(n: int) -> bytes:
    return str(n).encode()


# ---------------------------------------------------------------------------- the chain
def test_every_decoder_the_config_accepts_is_there() -> None:
    assert set(DecoderSet()._decoders) == set(DECODER_NAMES)


def test_sizes_and_padding_slice_the_key() -> None:
    # decoder_test.go: a 1-byte number with 3 bytes of padding, then a 32-byte string
    raw = bytes([8, 1, 1, 1]) + b"bananas".ljust(32, b"\0")
    labels = [label("number", 1, "uint", padding=3), label("fruit", 32, "string")]
    assert DecoderSet().decode_labels(raw, labels) == ["8", "bananas"]
    raw = u32(7) + u64(42) + b"\xff" * 4
    labels = [label("a", 4, "uint"), label("b", 8, "uint", padding=4)]
    assert DecoderSet().decode_labels(raw, labels) == ["7", "42"]


def test_a_key_whose_size_is_not_the_labels_is_an_error() -> None:
    raw = u32(8) + b"potatoes".ljust(16, b"\0")
    with pytest.raises(DecodeError) as info:
        DecoderSet().decode_labels(raw, [label("number", 4, "uint")])
    err = info.value
    assert "the key has 20 bytes, the labels' sizes and paddings add up to 4" in str(err)
    assert err.label == "number" and err.raw == raw
    assert isinstance(err, BPFKitError)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.label, again.raw) == (DecodeError, str(err), "number", raw)


def test_a_decoder_error_names_label_decoder_and_bytes() -> None:
    with pytest.raises(DecodeError) as info:
        DecoderSet().decode_labels(b"\x01\x02\x03", [label("odd", 3, "uint")])
    err = info.value
    assert (err.label, err.decoder, err.raw) == ("odd", "uint", b"\x01\x02\x03")
    assert "decode label 'odd' with decoder 'uint' from 01 02 03: unknown value length 3" in str(err)
    # a later decoder in the chain: its input is the earlier one's text
    with pytest.raises(DecodeError) as info:
        one(b"ab\0\0", "string", "errno")
    assert (info.value.decoder, info.value.raw) == ("errno", b"ab")


def test_chains() -> None:
    table = DecoderConf("static_map", static_map={"1": "read", "2": "write"})
    assert one(u32(1), "uint", table) == "read"
    assert one(u32(3), "uint", table) == "unknown:3"
    assert one(u32(3), "uint", DecoderConf("static_map", static_map={"1": "read"}, allow_unknown=True)) == "3"
    assert one(u32(3), "uint", DecoderConf("static_map")) == "empty mapping"
    if os.uname().machine == "x86_64":
        assert one(u64(0), "uint", "syscall") == "read"
        assert one(u64(462), "uint", "syscall") == "mseal"
    elif os.uname().machine == "aarch64":
        assert one(u64(63), "uint", "syscall") == "read"
    assert one(u64(4000), "uint", "syscall") == "unknown_syscall:4000"
    # a uint's text through another decoder's table keyed by text
    assert one(u32(2), "uint", "errno") == "ENOENT"


def test_regexp_drops_the_sample() -> None:
    # regexp_test.go's cases
    rx = DecoderConf("regexp", regexps=("^systemd-journal$", "^syslog-ng$"))
    assert one(b"systemd-journal\0\0", "string", rx) == "systemd-journal"
    assert one(b"syslog-ng", "string", rx) == "syslog-ng"
    assert one(b"systemd-bananad", "string", DecoderConf("regexp", regexps=("^(systemd).*$", "^syslog-ng$"))) == "systemd"
    with pytest.raises(SkipLabelSet):
        one(b"systemd-bananad", "string", rx)
    # a regexp with two groups gives nothing (Go's FindSubmatch is then 3 long): the next one is tried
    two = DecoderConf("regexp", regexps=("^(a)(b)", "b"))
    assert one(b"abc", two) == "b"
    # an optional group that did not take part: the empty text
    assert one(b"xyz", DecoderConf("regexp", regexps=("x(q)?",))) == ""


def test_decode_labels_cached() -> None:
    ds = DecoderSet()
    rx = DecoderConf("regexp", regexps=("^keep.*",))
    labels = [label("comm", 8, "string", rx)]
    kept, dropped = b"keepme\0\0", b"dropme\0\0"
    first = ds.decode_labels_cached(kept, "m", labels)
    assert first == ["keepme"]
    assert ds.decode_labels_cached(kept, "m", labels) is first  # remembered
    assert ds.decode_labels_cached(dropped, "m", labels) is None
    assert ds.decode_labels_cached(dropped, "m", labels) is None
    # per metric: another metric with other labels over the same bytes decodes anew
    assert ds.decode_labels_cached(kept, "other", [label("hex", 8, "hex")]) == ["6b6565706d650000"]
    # errors are not remembered, and raise
    with pytest.raises(DecodeError):
        ds.decode_labels_cached(b"\x01\x02\x03", "m3", [label("odd", 3, "uint")])


def test_cached_labels_are_bounded() -> None:
    ds = DecoderSet(cache_limit=100)
    labels = [label("n", 4, "uint")]
    for n in range(1000):
        assert ds.decode_labels_cached(u32(n), "big", labels) == [str(n)]
    cache = ds._cache["big"]
    assert 0 < len(cache) <= 100
    assert ds.decode_labels_cached(u32(999), "big", labels) is cache[u32(999)]


def test_a_set_shared_by_threads() -> None:
    ds = DecoderSet()
    labels = [label("a", 4, "uint"), label("b", 8, "string")]
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for n in range(300):
                raw = u32(n) + b"t%d" % t + b"\0" * (8 - len(b"t%d" % t))
                assert ds.decode_labels_cached(raw, "m", labels) == [str(n), f"t{t}"]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


# ---------------------------------------------------------------------------- stateless decoders
def test_uint() -> None:
    assert one(b"\x05", "uint") == "5"
    assert one((65535).to_bytes(2, ORDER), "uint") == "65535"
    assert one(u32(0xFFFFFFFF), "uint") == "4294967295"
    assert one(u64(2**64 - 1), "uint") == "18446744073709551615"


def test_errno() -> None:
    # errno_test.go's cases, and numbers Python's errno module names otherwise than Go
    cases = {0: "unknown:0", 1: "EPERM", 2: "ENOENT", 32: "EPIPE", 104: "ECONNRESET", 1000: "unknown:1000",
             11: "EAGAIN", 35: "EDEADLK", 95: "ENOTSUP", 133: "EHWPOISON", 41: "unknown:41",
             512: "unknown:512", 516: "unknown:516", 524: "unknown:524"}
    for n, name in cases.items():
        assert one(dec(n), "errno") == name, n
    for bad in (b"-1", b"+2", b" 2", b"", b"18446744073709551616"):
        with pytest.raises(DecodeError, match="not an unsigned 64-bit decimal"):
            one(bad + b"\0", "string", "errno")


def test_string_hex_dname() -> None:
    assert one(b"null terminated string\0bananas after null", "string") == "null terminated string"
    assert one(b"regular string", "string") == "regular string"
    assert one(b"\x00\x01\xab\xff", "hex") == "0001abff"
    # dname_test.go's cases (its empty input is a decoder's output: a label has a size), and
    # a NUL-padded name from a fixed-size key field
    assert one(b"\0\0", "string", "dname") == "."
    assert one(b"\x03com", "dname") == "com"
    assert one(b"\x07example\x03com", "dname") == "example.com"
    assert one(b"\x05com", "dname") == "\x05com"
    assert one(b"\x03www\x07example\x03com\x00", "dname") == "www.example.com."


def test_inet_ip() -> None:
    assert one(bytes([1, 2, 3, 4]), "inet_ip") == "1.2.3.4"
    v6 = bytes.fromhex("2400cb00000410240000" "0000a29efd8f")
    assert one(v6, "inet_ip") == "2400:cb00:4:1024::a29e:fd8f"  # inet_ip_test.go
    assert one(socket.inet_pton(socket.AF_INET6, "::ffff:10.1.2.3"), "inet_ip") == "10.1.2.3"  # Go prints mapped v4 so
    assert one(bytes(16), "inet_ip") == "::"
    assert one(socket.inet_pton(socket.AF_INET6, "::1"), "inet_ip") == "::1"
    assert one(socket.inet_pton(socket.AF_INET6, "::1.2.3.4"), "inet_ip") == "::102:304"  # not glibc's ::1.2.3.4
    assert one(socket.inet_pton(socket.AF_INET6, "1:0:0:2:0:0:0:3"), "inet_ip") == "1:0:0:2::3"
    assert one(socket.inet_pton(socket.AF_INET6, "1:0:0:2:0:0:3:4"), "inet_ip") == "1::2:0:0:3:4"  # the first longest
    assert one(socket.inet_pton(socket.AF_INET6, "1:0:2:3:4:5:6:7"), "inet_ip") == "1:0:2:3:4:5:6:7"  # one zero: kept
    assert one(socket.inet_pton(socket.AF_INET6, "fe80::abcd:ef01"), "inet_ip") == "fe80::abcd:ef01"
    assert one(b"\x01\x02\x03", "inet_ip") == "?010203"


# ---------------------------------------------------------------------------- the running machine
def test_ifname() -> None:
    lo = socket.if_nametoindex("lo")
    assert one(u32(lo), "ifname") == "lo"
    for _idx, name in socket.if_nameindex():
        assert one(u32(socket.if_nametoindex(name)), "ifname") == name
    assert one(u32(0), "ifname") == "unknown:0"
    unused = max(i for i, _ in socket.if_nameindex()) + 1000
    assert one(u32(unused), "ifname") == f"unknown:{unused}"


def _new_encode_dev(major: int, minor: int) -> int:
    """include/linux/kdev_t.h's new_encode_dev()."""
    return (minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12)


def test_majorminor() -> None:
    devices = [line.split() for line in Path("/proc/partitions").read_text().splitlines()[2:] if line.strip()]
    if not devices:
        pytest.skip("/proc/partitions lists no block device")
    ds = DecoderSet()
    for major, minor, _blocks, name in devices:
        assert one(u32(_new_encode_dev(int(major), int(minor))), "majorminor", ds=ds) == name
    present = {(int(d[0]), int(d[1])) for d in devices}
    # majorminor_test.go: 0x8810 is 136:16; a minor above 255 keeps its high bits apart
    if (136, 16) not in present:
        assert one(u32(0x8810), "majorminor", ds=ds) == "unknown:136:16"
    if (7, 4000) not in present:
        assert one(u32(_new_encode_dev(7, 4000)), "majorminor", ds=ds) == "unknown:7:4000"
    with pytest.raises(DecodeError, match="majorminor needs 4 bytes, got 2"):
        one(b"\0\1", "majorminor", ds=ds)


def _own_cgroup() -> tuple[int, str]:
    """This process's cgroup v2 id and its path as ebpf_exporter prints it (under the mount)."""
    try:
        mount = cgroupfs.cgroup2_root()
    except BPFKitError as exc:
        pytest.skip(f"no cgroup v2: {exc}")
    rel = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    path = mount if rel == "/" else mount + rel
    return os.stat(path).st_ino, path


def test_cgroup() -> None:
    cid, path = _own_cgroup()
    ds = DecoderSet()
    assert one(dec(cid), "cgroup", ds=ds) == path
    assert one(u64(cid), "uint", "cgroup", ds=ds) == path
    root = cgroupfs.cgroup2_root()
    assert one(dec(os.stat(root).st_ino), "cgroup", ds=ds) == root
    missing = 2**62 + 12345  # kernfs ids are 64-bit: generation << 32 | ino, far below this one
    assert one(dec(missing), "cgroup", ds=ds) == f"unknown_cgroup_id:{missing}"
    with pytest.raises(DecodeError, match="not a decimal number"):
        one(b"12x", "cgroup", ds=ds)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_cgroup_made_later_is_found_after_a_second() -> None:
    root = cgroupfs.cgroup2_root() if cgroupfs.cgroup2_mounts() else pytest.skip("no cgroup v2")
    ds = DecoderSet()
    assert one(dec(os.stat(root).st_ino), "cgroup", ds=ds) == root  # walked now
    path = os.path.join(root, f"bpfkit-eex-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(path)
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup in {root}: {exc}")
    try:
        cid = os.stat(path).st_ino
        # unknown within the second after the walk (walks are rate-limited), found after it
        assert one(dec(cid), "cgroup", ds=ds) == f"unknown_cgroup_id:{cid}"
        time.sleep(1.05)
        assert one(dec(cid), "cgroup", ds=ds) == path
    finally:
        os.rmdir(path)
    assert one(dec(cid), "cgroup", ds=ds) == path  # a removed cgroup keeps its name


def _kernel_symbols() -> KernelSymbols:
    try:
        return KernelSymbols.load()
    except KernelPermissionError as exc:
        pytest.skip(f"kallsyms addresses are hidden: {exc}")


def test_ksym_and_kstack() -> None:
    table = _kernel_symbols()
    addr = table.address("vfs_read")
    other = table.address("vfs_write")
    assert addr and other
    ds = DecoderSet()
    assert one(u64(addr), "ksym", ds=ds) == "vfs_read"
    # ksym names a function's own address only (decoder.go's Sym: an exact match)
    assert one(u64(addr + 1), "ksym", ds=ds) == f"unknown_addr:0x{addr + 1:x}"
    assert one(u64(1), "ksym", ds=ds) == "unknown_addr:0x1"
    # kstack: the symbol at or below each address, up to the first 0; ?? below every symbol
    stack = u64(addr + 4) + u64(other) + u64(1) + u64(0) + u64(addr)
    assert one(stack, "kstack", ds=ds) == "vfs_read\nvfs_write\n??"
    assert one(u64(0) * 2, "kstack", ds=ds) == ""


# ---------------------------------------------------------------------------- pci.ids
def _pci_ids() -> str:
    for path in PCI_IDS_PATHS:
        if os.path.exists(path):
            return path
    pytest.skip(f"no pci.ids ({', '.join(PCI_IDS_PATHS)}; Debian's package pci.ids)")


def test_pci_decoders() -> None:
    _pci_ids()
    ds = DecoderSet()
    # pci_*_test.go's cases that Debian 12's pci.ids (2023.04) has
    assert one(b"32902", "pci_vendor", ds=ds) == "Intel Corporation"
    assert one(b"4318", "pci_vendor", ds=ds) == "NVIDIA Corporation"
    assert one(b"5555", "pci_vendor", ds=ds) == "Mellanox Technologies"
    assert one(b"48879", "pci_vendor", ds=ds) == "unknown pci vendor: 0xbeef"
    assert one(b"2156269568", "pci_device", ds=ds) == "82542 Gigabit Ethernet Controller (Fiber)"
    assert one(b"3735928559", "pci_device", ds=ds) == "unknown pci device: 0xdeadbeef"
    assert one(b"1", "pci_class", ds=ds) == "Mass storage controller"
    assert one(b"12", "pci_class", ds=ds) == "Serial bus controller"
    assert one(b"253", "pci_class", ds=ds) == "unknown pci class: 0xfd"
    assert one(b"264", "pci_subclass", ds=ds) == "Non-Volatile memory controller"
    assert one(b"512", "pci_subclass", ds=ds) == "Ethernet controller"
    assert one(b"1540", "pci_subclass", ds=ds) == "PCI bridge"
    assert one(b"64768", "pci_subclass", ds=ds) == "unknown pci class: 0xfd"
    assert one(b"267", "pci_subclass", ds=ds) == "unknown pci subclass: 0x0b (class 0x01)"
    assert one(b"3", "pci_subclass", ds=ds) == "unknown pci subclass: 0x03 (class 0x00)"
    # the ids as a key field holds them: u16 vendor through uint
    assert one((0x8086).to_bytes(2, ORDER), "uint", "pci_vendor", ds=ds) == "Intel Corporation"
    # a device keyed vendor << 16 | device: NVIDIA's first in the file
    lines = Path(_pci_ids()).read_text(errors="replace").splitlines()
    device = lines[lines.index(next(v for v in lines if v.startswith("10de  "))) + 1]
    assert device.startswith("\t") and not device.startswith("\t\t")
    assert one(dec(0x10DE << 16 | int(device[1:5], 16)), "pci_device", ds=ds) == device[7:]


def test_pci_decoders_without_pci_ids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without pci.ids every pci decoder says so, before reading its input (pci_*.go)."""
    from bpfkit.metrics.ebpf_exporter import decoders

    monkeypatch.setattr(decoders, "PCI_IDS_PATHS", (str(tmp_path / "none"),))
    ds = DecoderSet()
    for name in ("pci_vendor", "pci_device", "pci_class", "pci_subclass"):
        assert one(b"32902", name, ds=ds) == "missing pci.ids db"
        assert one(b"not a number", name, ds=ds) == "missing pci.ids db"
