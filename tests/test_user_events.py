# SPDX-License-Identifier: Apache-2.0
"""user_events without a kernel: formats, payload layout, typed emit, status parsing, the CLI's
argument handling. The kernel side runs in integration/test_user_events.py (a VM kernel with
CONFIG_USER_EVENTS)."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import sys
import typing

import pytest

from bpfkit import user_events as ue
from bpfkit.user_events import event as ue_event
from bpfkit._kernel import user_events as kue
from bpfkit.errors import ParseError, UsageError


# ------------------------------------------------------------------------------ formats
def test_parse_issue_example() -> None:
    fmt = ue.parse_format("name u32 a;char[16] b")
    assert fmt.name == "name"
    assert [(f.type, f.name, f.size, f.offset) for f in fmt.fields] == [("u32", "a", 4, 0), ("char[16]", "b", 16, 4)]
    assert fmt.fixed_size == 20
    assert fmt.command == "name u32 a; char[16] b"


def test_parse_every_kernel_type() -> None:
    # user_field_size() in kernel/trace/trace_events_user.c, with sizes.
    types = {
        "s64": 8, "u64": 8, "s32": 4, "u32": 4, "int": 4, "unsigned int": 4, "s16": 2, "u16": 2,
        "short": 2, "unsigned short": 2, "s8": 1, "u8": 1, "char": 1, "unsigned char": 1,
        "char[20]": 20, "unsigned char[3]": 3, "__data_loc char[]": 4, "__rel_loc char[]": 4,
        "__rel_loc unsigned char[]": 4, "__data_loc unsigned char[]": 4, "__rel_loc u8[]": 4,
    }
    fmt = ue.EventFormat("all", [f"{t} f{i}" for i, t in enumerate(types)])
    assert [f.size for f in fmt.fields] == list(types.values())
    assert [f.offset for f in fmt.fields] == [sum(list(types.values())[:i]) for i in range(len(types))]


def test_struct_field_takes_a_size() -> None:
    fmt = ue.parse_format("ev struct point p 12; u8 x")
    assert fmt.fields[0].decl == "struct point p 12"
    assert fmt.fields[1].offset == 12
    with pytest.raises(ParseError, match="needs its size"):
        ue.parse_format("ev struct point p")
    with pytest.raises(ParseError, match="only struct fields take a size"):
        ue.parse_format("ev u32 a 4")


@pytest.mark.parametrize("bad,why", [
    ("ev long x", "refused by the kernel"),
    ("ev float x", "unknown field type"),
    ("ev char[0] x", "array size"),
    ("ev char[1025] x", "array size"),
    ("ev u32", "needs a type and a name"),
    ("ev u32 a; u32 a", "repeat"),
    ("ev u32 a-b", "field name"),
    ("bad-name u32 a", "must match"),
    ("ev:BPF_ITER u32 a", "no ':FLAG'"),
])
def test_parse_errors(bad: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        ue.parse_format(bad)


def test_description_limit() -> None:
    # strndup_user(name_args, MAX_EVENT_DESC): 511 characters and the NUL.
    fields = "; ".join(f"u8 field_number_{i}" for i in range(40))
    with pytest.raises(ParseError, match="at most 511"):
        ue.parse_format(f"ev {fields}")


def test_command_round_trip_and_prefix() -> None:
    text = "u:request u32 status; char[8] method; __rel_loc char[] path"
    fmt = ue.parse_format(text)
    assert fmt.command == text[2:]
    assert ue.parse_format(fmt.command) == fmt
    assert ue.parse_format("request  u32 status ;char[8]   method;__rel_loc char[] path") == fmt


# ------------------------------------------------------------------------------ payloads
def test_pack_fixed_fields_little_endian_unpadded() -> None:
    fmt = ue.parse_format("ev u8 a; u32 b; s16 c; char[4] d; u64 e")
    raw = fmt.pack(1, 0xDEADBEEF, -2, "ab", 1 << 40)
    assert raw == struct.pack("<BIh4sQ", 1, 0xDEADBEEF, -2, b"ab", 1 << 40)
    assert len(raw) == fmt.fixed_size == 1 + 4 + 2 + 4 + 8
    assert fmt.unpack(raw) == {"a": 1, "b": 0xDEADBEEF, "c": -2, "d": "ab", "e": 1 << 40}


def test_rel_loc_is_relative_to_the_end_of_the_field() -> None:
    fmt = ue.parse_format("ev __rel_loc char[] s; u32 x; __rel_loc u8[] blob")
    raw = fmt.pack("hi", 7, b"\x01\x02\x03")
    s_loc, x, b_loc = struct.unpack_from("<III", raw)
    assert x == 7
    # s: data starts at 12 (after the fixed part); the field ends at 4 -> offset 8; "hi\0"
    assert (s_loc >> 16, s_loc & 0xFFFF) == (3, 12 - 4)
    # blob: data at 15; its field ends at 12 -> offset 3; no NUL added (type has no "char")
    assert (b_loc >> 16, b_loc & 0xFFFF) == (3, 15 - 12)
    assert raw[12:] == b"hi\0\x01\x02\x03"
    assert fmt.unpack(raw) == {"s": "hi", "x": 7, "blob": b"\x01\x02\x03"}


def test_data_loc_is_relative_to_the_trace_record() -> None:
    # __data_loc offsets count from the start of the record, which begins with the 8-byte
    # struct trace_entry the kernel puts before the payload.
    fmt = ue.parse_format("ev u32 x; __data_loc char[] s")
    raw = fmt.pack(5, "abc")
    loc = struct.unpack_from("<I", raw, 4)[0]
    assert (loc >> 16, loc & 0xFFFF) == (4, ue.TRACE_ENTRY_SIZE + 8)
    assert fmt.unpack(raw) == {"x": 5, "s": "abc"}
    record = b"\0" * ue.TRACE_ENTRY_SIZE + raw
    assert fmt.unpack(record, record=True) == {"x": 5, "s": "abc"}


def test_char_dynamic_data_gets_one_nul() -> None:
    # The kernel's validator drops a dynamic char field whose last byte is not NUL.
    fmt = ue.parse_format("ev __rel_loc unsigned char[] s")
    assert fmt.pack(b"ab")[4:] == b"ab\0"
    assert fmt.pack(b"ab\0")[4:] == b"ab\0"
    assert ue.parse_format("ev __rel_loc u8[] s").pack(b"ab")[4:] == b"ab"


@pytest.mark.parametrize("fields,values,why", [
    ("u8 a", (256,), "outside 0..255"),
    ("s8 a", (-129,), "outside -128..127"),
    ("u32 a", ("x",), "takes an int"),
    ("char[2] a", ("abc",), "holds 2 bytes"),
    ("struct s a 4", (b"abc",), "exactly 4 bytes"),
    ("__rel_loc char[] a", (5,), "takes str or bytes"),
    ("char a", ("ab",), "one byte"),
])
def test_pack_errors(fields: str, values: tuple, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        ue.parse_format(f"ev {fields}").pack(*values)


def test_values_by_position_keyword_mapping_or_record() -> None:
    fmt = ue.parse_format("ev u32 a; char[4] b")
    want = fmt.pack(1, "x")
    assert fmt.pack(a=1, b="x") == want
    assert fmt.pack(1, b="x") == want
    assert fmt.pack({"a": 1, "b": "x"}) == want

    @dataclasses.dataclass
    class Rec:
        a: int
        b: str

    assert fmt.pack(Rec(1, "x")) == want
    with pytest.raises(UsageError, match="missing a required argument"):
        fmt.pack(1)
    with pytest.raises(UsageError, match="unexpected keyword"):
        fmt.pack(1, "x", c=2)


def test_char_single_accepts_a_byte() -> None:
    fmt = ue.parse_format("ev char c; unsigned char u")
    assert fmt.pack("A", b"\xff") == b"A\xff"
    assert fmt.pack(65, 255) == b"A\xff"


# ------------------------------------------------------------------------------ typed emit
@dataclasses.dataclass
class Request:
    status: ue.U16
    method: ue.Char(8)  # type: ignore[valid-type]
    path: str
    latency_ns: ue.U64 = 0
    payload: bytes = b""
    ok: bool = True


def test_format_from_dataclass() -> None:
    fmt = ue.EventFormat.from_dataclass(Request)
    assert fmt.command == ("Request u16 status; char[8] method; __rel_loc char[] path; u64 latency_ns; "
                           "__rel_loc u8[] payload; u8 ok")
    assert fmt.source is Request
    raw = fmt.pack(Request(404, "GET", "/x", 12))
    assert fmt.unpack(raw) == {"status": 404, "method": "GET", "path": "/x", "latency_ns": 12, "payload": b"", "ok": 1}
    # Defaults of the dataclass apply to keyword/positional emits too.
    assert fmt.pack(404, "GET", "/x", 12) == raw
    assert ue.EventFormat.from_dataclass(Request, name="http_request").name == "http_request"


def test_format_from_signature() -> None:
    def cache_miss(key: str, size: ue.U32, tier: ue.U8 = 2) -> None: ...

    fmt = ue.EventFormat.from_signature(cache_miss)
    assert fmt.command == "cache_miss __rel_loc char[] key; u32 size; u8 tier"
    assert fmt.unpack(fmt.pack("k", 10)) == {"key": "k", "size": 10, "tier": 2}
    assert fmt.unpack(fmt.pack(size=1, key="z", tier=3)) == {"key": "z", "size": 1, "tier": 3}


def test_annotation_spellings() -> None:
    def f(a: int, b: typing.Annotated[int, ue.FieldType("s16")], c: ue.Bytes(3), d: ue.Blob, e: int) -> None: ...  # type: ignore[valid-type]

    f.__annotations__["a"] = "u32"  # a kernel type name as text: kept when it cannot be evaluated
    assert ue.EventFormat.from_signature(f).command == "f u32 a; s16 b; unsigned char[3] c; __rel_loc u8[] d; s64 e"


def test_signature_errors() -> None:
    def no_type(a) -> None: ...  # type: ignore[no-untyped-def]

    def star(*a: int) -> None: ...

    def floaty(a: float) -> None: ...

    with pytest.raises(ParseError, match="needs a type annotation"):
        ue.EventFormat.from_signature(no_type)
    with pytest.raises(ParseError, match=r"\*a cannot be"):
        ue.EventFormat.from_signature(star)
    with pytest.raises(ParseError, match="no kernel type"):
        ue.EventFormat.from_signature(floaty)
    with pytest.raises(UsageError, match="not a dataclass"):
        ue.EventFormat.from_dataclass(int)


def test_format_of_accepts_each_source() -> None:
    def ev(a: ue.U32) -> None: ...

    assert ue.EventFormat.of("ev u32 a") == ue.EventFormat.of(ev) == ue.EventFormat.of(ue.parse_format("ev u32 a"))
    assert ue.EventFormat.of("x u32 a", name="ev") == ue.EventFormat.of(ev)
    with pytest.raises(UsageError):
        ue.EventFormat.of(3)


# ------------------------------------------------------------------------------ kernel ABI
def test_ioctl_numbers() -> None:
    # _IOWR('*', 0, struct user_reg *), _IOW('*', 1, char *), _IOW('*', 2, struct user_unreg *)
    assert int(kue.Ioctl.REG) == 0xC0082A00
    assert int(kue.Ioctl.DEL) == 0x40082A01
    assert int(kue.Ioctl.UNREG) == 0x40082A02


def test_packed_struct_sizes() -> None:
    assert kue.ffi.sizeof("struct user_reg") == 28
    assert kue.ffi.sizeof("struct user_unreg") == 16


def test_enabler_checks() -> None:
    with pytest.raises(UsageError, match="4 or 8"):
        kue.Enabler(0x1000, 0, 2).check()
    with pytest.raises(UsageError, match="aligned"):
        kue.Enabler(0x1004, 0, 8).check()
    with pytest.raises(UsageError, match="does not fit"):
        kue.Enabler(0x1000, 32, 4).check()
    kue.Enabler(0x1000, 63, 8).check()


def test_parse_status() -> None:
    text = "first\nsecond # Used by ftrace perf\nmulti.1a # Used by other\n\nActive: 3\nBusy: 2\n"
    assert kue.parse_status(text) == [
        kue.Status("first"), kue.Status("second", ("ftrace", "perf")), kue.Status("multi.1a", ("other",)),
    ]
    assert [s.busy for s in kue.parse_status(text)] == [False, True, True]
    assert kue.parse_status("\nActive: 0\nBusy: 0\n") == []


def test_unavailable_kernel_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # A tracefs without user_events_data (every Debian kernel): NotSupportedError naming the
    # config option and the first release.
    from bpfkit.errors import NotSupportedError

    monkeypatch.setattr(kue.tracefs, "tracefs_root", lambda: str(tmp_path))
    assert not ue.available()
    with pytest.raises(NotSupportedError, match=r"CONFIG_USER_EVENTS.*6\.4"):
        ue.UserEvent("ev u32 a")


# ------------------------------------------------------------------------------ CLI
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", "user-event", *args], capture_output=True, text=True)


def test_cli_help_lists_subcommands() -> None:
    proc = _cli("--help")
    assert proc.returncode == 0
    for sub in ("list", "register", "emit", "delete"):
        assert sub in proc.stdout


def test_cli_values_parsing() -> None:
    from bpfkit.cli import cmd_user_event as cmd

    fmt = ue.parse_format("ev u32 a; s8 b; char[4] c; __rel_loc u8[] d")
    assert cmd.parse_values(fmt, ["a=0x10", "b=-3", "c=hi", "d=hex:0102"]) == {"a": 16, "b": -3, "c": "hi", "d": b"\x01\x02"}
    assert cmd.parse_values(fmt, ["1", "2", "x", "y"]) == {"a": 1, "b": 2, "c": "x", "d": b"y"}
    with pytest.raises(UsageError, match="no field"):
        cmd.parse_values(fmt, ["z=1"])
    with pytest.raises(UsageError, match="not an integer"):
        cmd.parse_values(fmt, ["a=x"])


# ------------------------------------------------------------------------------ bookkeeping
class FakeKernel:
    """Stands in for user_events_data to check bpfkit's own bookkeeping: that the enable word is
    unregistered before its memory can go, in close() and in the finalizer, and what happens
    when unregistering fails (which a real kernel does not do on demand). The kernel's side is
    tested for real in integration/test_user_events.py."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import os

        self.calls: list[tuple] = []
        self.fail_unregister = False
        self.write_errno = 0
        monkeypatch.setattr(kue, "open_data", lambda: kue.FD(os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)))
        monkeypatch.setattr(kue, "register", self.register)
        monkeypatch.setattr(kue, "unregister", self.unregister)
        monkeypatch.setattr(kue, "write", self.write)

    def register(self, fd, command, enabler, flags):  # type: ignore[no-untyped-def]
        self.calls.append(("register", command, enabler, flags))
        return len([c for c in self.calls if c[0] == "register"]) - 1

    def unregister(self, fd, enabler):  # type: ignore[no-untyped-def]
        from bpfkit.errors import KernelError

        self.calls.append(("unregister", enabler, fd.closed))
        if self.fail_unregister:
            raise KernelError("DIAG_IOCSUNREG", 5)

    def write(self, fd, index, parts):  # type: ignore[no-untyped-def]
        from bpfkit.errors import kernel_error

        if self.write_errno:
            raise kernel_error("write user_events_data", self.write_errno)
        self.calls.append(("write", index, b"".join(parts)))
        return len(index) + sum(len(p) for p in parts)


def test_register_emit_close_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    k = FakeKernel(monkeypatch)
    ev = ue.UserEvent("ev u32 a; __rel_loc char[] s", persist=True)
    (_, command, enabler, flags), = k.calls
    assert command == "ev u32 a; __rel_loc char[] s" and flags == kue.RegFlag.PERSIST
    assert enabler.addr == int(kue.ffi.cast("uintptr_t", ev._word)) and (enabler.bit, enabler.size) == (0, 4)
    assert not ev.enabled and ev.emit(1, "x") is False
    ev._word[0] = 1  # what the kernel does when a tracer enables the event
    assert ev.enabled and ev.emit(1, "x") is True
    assert k.calls[-1] == ("write", b"\0\0\0\0", ev.format.pack(1, "x"))
    k.write_errno = errno.EBADF  # the tracer left between the bit check and the write
    assert ev.emit(2, "y") is False
    k.write_errno = errno.EINVAL
    with pytest.raises(Exception, match="emit user event ev: write user_events_data: EINVAL"):
        ev.emit(3, "z")
    ev.close()
    assert k.calls[-1] == ("unregister", enabler, False), "unregistered before the fd closed"
    assert ev.closed and not ev.registered
    ev.close()
    assert sum(c[0] == "unregister" for c in k.calls) == 1
    with pytest.raises(UsageError, match="closed"):
        ev.emit_raw(b"1234", force=True)


def test_finalizer_unregisters_and_pins_on_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    k = FakeKernel(monkeypatch)
    ev = ue.UserEvent("ev u32 a")
    enabler = ev._enabler
    del ev
    gc.collect()
    assert ("unregister", enabler, False) in k.calls
    k.fail_unregister = True
    pinned = len(ue_event._PINNED_WORDS)
    ev = ue.UserEvent("ev u32 a")
    word = ev._word
    del ev
    gc.collect()
    assert len(ue_event._PINNED_WORDS) == pinned + 1 and ue_event._PINNED_WORDS[-1] is word, \
        "a word the kernel may still write is never freed"
    ue_event._PINNED_WORDS.pop()


def test_shared_file_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    k = FakeKernel(monkeypatch)
    with ue.UserEventsFile() as f:
        a, b = f.register("a u32 x"), f.register("b u32 x")
        assert (a.write_index, b.write_index) == (0, 1)
        assert a._fd is b._fd is f.fd
        with pytest.raises(UsageError, match="shared UserEventsFile"):
            a.delete()
    assert [c[0] for c in k.calls].count("unregister") == 2
    assert all(not c[2] for c in k.calls if c[0] == "unregister"), "unregistered while the file was open"
    assert a.closed and b.closed and f.closed
