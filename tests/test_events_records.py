# SPDX-License-Identifier: Apache-2.0
"""Record decoding: PERF_RECORD_* layouts with and without sample_id_all, payload formats."""

from __future__ import annotations

import struct

import pytest

from bpfkit._kernel import ring
from bpfkit._kernel.consts import PerfRecord, PerfSample
from bpfkit.errors import ParseError, UsageError
from bpfkit.events import records as R

SID_TYPE = PerfSample.TID | PerfSample.TIME | PerfSample.CPU | PerfSample.IDENTIFIER


def rec(rtype: int, body: bytes, misc: int = 0, sid: bytes = b"") -> bytes:
    whole = body + sid
    return struct.pack("<IHH", rtype, misc, 8 + len(whole)) + whole


def sid(pid=10, tid=11, time=12345, cpu=1, ident=99) -> bytes:
    return struct.pack("<IIQIIQ", pid, tid, time, cpu, 0, ident)


def cstr(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return raw + bytes(-len(raw) % 8)


DEC = R.Decoder(SID_TYPE, sample_id_all=True)


def test_comm_exec_with_sample_id():
    r = DEC.decode(rec(PerfRecord.COMM, struct.pack("<II", 7, 8) + cstr("python3"), R.MISC_COMM_EXEC, sid()), cpu=1)
    assert isinstance(r, R.Comm)
    assert (r.pid, r.tid, r.comm, r.exec) == (7, 8, "python3", True)
    assert r.time == 12345 and r.sample_id.cpu == 1 and r.sample_id.id == 99 and r.cpu == 1


def test_fork_exit():
    body = struct.pack("<IIIIQ", 20, 10, 21, 10, 555)
    f = DEC.decode(rec(PerfRecord.FORK, body, 0, sid()))
    e = DEC.decode(rec(PerfRecord.EXIT, body, 0, sid()))
    assert isinstance(f, R.Fork) and isinstance(e, R.Exit)
    assert (f.pid, f.ppid, f.tid, f.ptid, f.timestamp) == (20, 10, 21, 10, 555)


def test_mmap_and_mmap2():
    m = DEC.decode(rec(PerfRecord.MMAP, struct.pack("<IIQQQ", 1, 1, 0x1000, 0x2000, 0x3000) + cstr("/bin/x"), 0, sid()))
    assert isinstance(m, R.Mmap) and (m.addr, m.len, m.pgoff, m.filename) == (0x1000, 0x2000, 0x3000, "/bin/x")
    body = struct.pack("<IIQQQIIQQII", 5, 6, 0x7F00, 0x1000, 0x2000, 8, 1, 4242, 3, 5, 2) + cstr("/usr/lib/libz.so.1")
    m2 = DEC.decode(rec(PerfRecord.MMAP2, body, 0, sid()))
    assert isinstance(m2, R.Mmap2)
    assert (m2.maj, m2.min, m2.ino, m2.ino_generation, m2.prot, m2.flags) == (8, 1, 4242, 3, 5, 2)
    assert m2.filename == "/usr/lib/libz.so.1" and m2.executable
    bid = bytes(range(20))
    body = struct.pack("<IIQQQ", 5, 6, 0, 0, 0) + bytes([20, 0, 0, 0]) + bid + struct.pack("<II", 5, 2) + cstr("a")
    m3 = DEC.decode(rec(PerfRecord.MMAP2, body, R.MISC_MMAP_BUILD_ID, sid()))
    assert m3.build_id == bid and m3.ino == 0


def test_namespaces_lost_throttle_unknown():
    body = struct.pack("<IIQ", 3, 4, 7) + b"".join(struct.pack("<QQ", i, 100 + i) for i in range(7))
    ns = DEC.decode(rec(PerfRecord.NAMESPACES, body, 0, sid()))
    assert isinstance(ns, R.Namespaces) and ns.get("mnt") == (5, 105) and len(ns.namespaces) == 7
    lost = DEC.decode(rec(PerfRecord.LOST, struct.pack("<QQ", 1, 77), 0, sid()))
    assert isinstance(lost, R.Lost) and lost.lost == 77
    th = DEC.decode(rec(PerfRecord.THROTTLE, struct.pack("<QQQ", 1, 2, 3), 0, sid()))
    assert isinstance(th, R.Throttle) and th.throttled
    unk = DEC.decode(rec(200, b"12345678"))
    assert isinstance(unk, R.Unknown) and unk.type == 200


def test_without_sample_id_all_there_is_no_trailer():
    dec = R.Decoder(PerfSample.RAW)
    r = dec.decode(rec(PerfRecord.LOST, struct.pack("<QQ", 0, 5)))
    assert r.lost == 5 and r.sample_id is None and r.time is None


def test_sample_fields_and_raw():
    st = PerfSample.IP | PerfSample.TID | PerfSample.TIME | PerfSample.CPU | PerfSample.PERIOD | PerfSample.CALLCHAIN | PerfSample.RAW
    dec = R.Decoder(st)
    raw = b"abcdefghijkl"
    body = struct.pack("<QIIQIIQQQQ", 0x401000, 9, 10, 777, 1, 0, 1, 2, 0xA, 0xB) + struct.pack("<I", len(raw)) + raw
    s = dec.decode(rec(PerfRecord.SAMPLE, body))
    assert isinstance(s, R.Sample)
    assert (s.ip, s.sample_id.pid, s.sample_id.tid, s.time, s.sample_id.cpu, s.period) == (0x401000, 9, 10, 777, 1, 1)
    assert s.callchain == (0xA, 0xB) and s.raw == raw


def test_bad_records():
    with pytest.raises(ParseError):
        DEC.decode(b"\x01\x00")
    with pytest.raises(ParseError, match="claims"):
        DEC.decode(struct.pack("<IHH", 3, 0, 64) + bytes(8))


def test_status_only_bit_matches_the_rfc():
    assert R.STATUS_ONLY == ring.PERF_RECORD_MISC_STATUS_ONLY == 1 << 11
    c = R.Comm(R.STATUS_ONLY, 0, None, 1, 1, "x")
    assert c.status_only


def test_record_format_struct_and_dtype():
    f = R.RecordFormat("<QQIIQ", ["seq", "ts", "pid", "cpu", "arg"])
    assert f.size == 32
    st = f.struct_for_stride(48, 12)
    assert st.size == 48 and st.unpack(bytes(12) + struct.pack("<QQIIQ", 1, 2, 3, 4, 5) + bytes(4)) == (1, 2, 3, 4, 5)
    with pytest.raises(UsageError):
        f.struct_for_stride(40, 12)
    with pytest.raises(UsageError):
        R.RecordFormat("<QQ", ["a"])
    if R.HAVE_NUMPY:
        dt = f.dtype
        assert dt.itemsize == 32 and dt.fields["cpu"][1] == 20
        aligned = R.RecordFormat("@BQ")  # native alignment: Q at offset 8
        assert aligned.dtype.fields["f1"][1] == 8 and aligned.size == 16
        padded = R.RecordFormat("<B3xI2s", ["a", "b", "c"])
        assert [padded.dtype.fields[n][1] for n in "abc"] == [0, 4, 8]


def test_fence_is_a_no_op_on_x86_and_known_elsewhere():
    import platform

    if platform.machine() == "x86_64":
        assert not ring.NEEDS_FENCE
        ring.fence()
    assert all(len(code) == 8 for code in ring.FENCE_CODE.values())
    # dmb ish; ret  /  fence rw,rw; ret (little-endian instruction words)
    assert struct.unpack("<II", ring.FENCE_CODE["aarch64"]) == (0xD5033BBF, 0xD65F03C0)
    assert struct.unpack("<II", ring.FENCE_CODE["riscv64"]) == (0x0330000F, 0x00008067)


def test_emit_sideband_ioctl_number_is_the_rfcs():
    # _IOW('$', 12, struct perf_event_pid_sb *) on a 64-bit ABI
    assert ring.PERF_EVENT_IOC_EMIT_SIDEBAND == 0x4008240C


def test_record_format_from_btf(bpf_obj):
    import bpfkit
    from bpfkit.btf import BTF, Array, Int, IntEncoding, Member, Struct

    spec = bpfkit.load_spec(bpf_obj("events_seq"))
    f = R.RecordFormat.from_btf(spec.btf, "stats")
    assert f.format == "<QQQ" and f.names == ["produced", "drops", "discards"] and f.size == 24
    # hand-made: padding, signed ints, a char array, an int array, a nested struct
    b = BTF()
    u8 = b.add(Int(0, "unsigned char", 1, IntEncoding.NONE, 0, 8))
    i32 = b.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    u64 = b.add(Int(0, "unsigned long long", 8, IntEncoding.NONE, 0, 64))
    comm = b.add(Array(0, "", u8, i32, 16))
    pair = b.add(Array(0, "", i32, i32, 2))
    inner = b.add(Struct(0, "inner", 8, [Member("a", i32, 0), Member("b", i32, 32)]))
    outer = b.add(Struct(0, "event", 48, [
        Member("flag", u8, 0), Member("pid", i32, 32), Member("ts", u64, 64),
        Member("comm", comm, 128), Member("xy", pair, 256), Member("in", inner, 320)]))
    f = R.RecordFormat.from_btf(b, outer)
    assert f.format == "<B3xiQ16sii" + "ii" and f.size == 48
    assert f.names == ["flag", "pid", "ts", "comm", "xy[0]", "xy[1]", "in.a", "in.b"]
    raw = struct.pack("<B3xiQ16siiii", 1, -2, 3, b"python3", 4, 5, 6, 7)
    assert f.unpack(raw) == (1, -2, 3, b"python3".ljust(16, b"\0"), 4, 5, 6, 7)


def test_events_all_lists_every_lazy_name() -> None:
    """bpfkit.events.__all__ is written out (ruff checks it); each name still resolves lazily."""
    import bpfkit.events

    assert sorted(bpfkit.events._LAZY) == sorted(bpfkit.events.__all__)
    assert all(getattr(bpfkit.events, n) is not None for n in bpfkit.events.__all__)


def test_dtype_format_refuses_record_by_record_decoding() -> None:
    """A RecordFormat made from a numpy dtype has no struct format: per-record decoding says so."""
    np = pytest.importorskip("numpy")
    from bpfkit.errors import UsageError
    from bpfkit.events import RecordFormat

    with pytest.raises(UsageError, match="decodes batches only"):
        RecordFormat(np.dtype([("a", "<u4")])).record_struct()
