# SPDX-License-Identifier: Apache-2.0
"""bpfkit._kernel.consts and cpus: names, ioctl numbers, syscall numbers, CPU lists.

(Every value is also checked against the kernel headers by tests/test_layout.py.)
"""

from __future__ import annotations

import enum
import pickle

import pytest

from bpfkit._kernel import consts
from bpfkit._kernel.consts import (
    PERF_ATTR_SIZES,
    MapFlag,
    MapType,
    PerfAttrFlag,
    PerfIoctl,
    ProgType,
    syscall_number,
)
from bpfkit._kernel.cpus import parse_cpu_list
from bpfkit.errors import NotSupportedError, ParseError
from bpfkit.spec import consts as spec_consts


def test_c_names() -> None:
    assert MapType.RINGBUF.c_name == "BPF_MAP_TYPE_RINGBUF"
    assert ProgType.KPROBE.c_name == "BPF_PROG_TYPE_KPROBE"
    assert consts.AttachType.PERF_EVENT.c_name == "BPF_PERF_EVENT"
    assert consts.Cmd.LINK_CREATE.c_name == "BPF_LINK_CREATE"
    assert PerfIoctl.SET_BPF.c_name == "PERF_EVENT_IOC_SET_BPF"
    assert consts.FuncId.get_attach_cookie.c_name == "BPF_FUNC_get_attach_cookie"
    assert MapType.LRU_PERCPU_HASH.kernel_name == "lru_percpu_hash"


def test_every_c_enum_has_a_prefix() -> None:
    from bpfkit._kernel import perf_consts

    for obj in {**vars(consts), **vars(perf_consts)}.values():
        if isinstance(obj, type) and issubclass(obj, consts._CEnum) and obj is not consts._CEnum:
            assert getattr(obj, "C_PREFIX", ""), obj


@pytest.mark.parametrize(
    "ioctl, value",
    [
        # Values as printed by the kernel headers on x86_64/arm64 (asm-generic ioctl.h).
        (PerfIoctl.ENABLE, 0x2400),
        (PerfIoctl.DISABLE, 0x2401),
        (PerfIoctl.REFRESH, 0x2402),
        (PerfIoctl.RESET, 0x2403),
        (PerfIoctl.PERIOD, 0x40082404),
        (PerfIoctl.SET_OUTPUT, 0x2405),
        (PerfIoctl.SET_FILTER, 0x40082406),
        (PerfIoctl.ID, 0x80082407),
        (PerfIoctl.SET_BPF, 0x40042408),
        (PerfIoctl.PAUSE_OUTPUT, 0x40042409),
        (PerfIoctl.QUERY_BPF, 0xC008240A),
        (PerfIoctl.MODIFY_ATTRIBUTES, 0x4008240B),
    ],
)
def test_perf_ioctl_numbers(ioctl: PerfIoctl, value: int) -> None:
    assert int(ioctl) == value


def test_group_flag_only_where_the_kernel_takes_it() -> None:
    assert consts.PERF_IOCTLS_WITH_GROUP_FLAG == {PerfIoctl.ENABLE, PerfIoctl.DISABLE, PerfIoctl.RESET}
    assert consts.PERF_EVENT_IOC_FLAG_GROUP == 1


def test_perf_attr_sizes_grow_by_version() -> None:
    sizes = [PERF_ATTR_SIZES[v][0] for v in sorted(PERF_ATTR_SIZES)]
    assert sizes == sorted(sizes) and sizes[0] == 64 and sizes[-1] == 136
    from bpfkit._kernel.abi import ffi

    assert ffi.sizeof("struct perf_event_attr") == sizes[-1]


def test_flag_bits_are_distinct_powers_of_two() -> None:
    for flag_enum in (MapFlag, PerfAttrFlag, consts.PerfSample):
        values = [int(m) for m in flag_enum]
        assert len(set(values)) == len(values)
        assert all(v & (v - 1) == 0 for v in values)
    assert PerfAttrFlag.SIGTRAP == 1 << 37  # the last bit before __reserved_1


def test_syscall_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import platform
    import types

    assert os.uname().machine == platform.machine()  # what syscall_number reads, without importing platform

    def machine(name: str) -> None:
        monkeypatch.setattr(os, "uname", lambda: types.SimpleNamespace(machine=name))

    machine("x86_64")
    assert syscall_number("bpf") == 321 and syscall_number("perf_event_open") == 298
    machine("aarch64")
    assert syscall_number("bpf") == 280 and syscall_number("perf_event_open") == 241
    machine("s390x")
    with pytest.raises(NotSupportedError, match="s390x"):
        syscall_number("bpf")


@pytest.mark.parametrize(
    "text, cpus",
    [
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-1,4,6-7\n", [0, 1, 4, 6, 7]),
        ("3,1,2", [1, 2, 3]),
        ("0-1,1-2", [0, 1, 2]),
        ("", []),
        ("\n", []),
    ],
)
def test_cpu_list_parsing(text: str, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("bad", ["a", "0-x", "1-2-3", "0,,x"])
def test_cpu_list_rejects_garbage(bad: str) -> None:
    with pytest.raises(ParseError, match="CPU list"):
        parse_cpu_list(bad)


def test_this_machines_cpus() -> None:
    from bpfkit._kernel import cpus

    possible = cpus.possible_cpus()
    assert possible and cpus.num_possible_cpus() == max(possible) + 1
    assert set(cpus.online_cpus()) <= set(possible)


def test_perf_enums_are_made_on_first_use() -> None:
    """bpfkit._kernel.consts gives the perf_event enums of perf_consts.py on first use (their
    ~120 members are start-up time `bpfkit load` does not need); the names are the same objects
    either way, and an unknown name is the usual AttributeError."""
    import subprocess
    import sys

    code = ("import sys; import bpfkit._kernel.consts as c; before = 'bpfkit._kernel.perf_consts' in sys.modules; "
            "from bpfkit._kernel.consts import PerfType; from bpfkit._kernel import perf_consts; "
            "print(before, PerfType is perf_consts.PerfType, c.PERF_IOCTLS_WITH_GROUP_FLAG is "
            "perf_consts.PERF_IOCTLS_WITH_GROUP_FLAG)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"]
    from bpfkit._kernel import perf_consts

    assert {n for n in consts._PERF_NAMES if getattr(consts, n) is getattr(perf_consts, n)} == consts._PERF_NAMES
    with pytest.raises(AttributeError, match="module 'bpfkit._kernel.consts' has no attribute 'PerfNothing'"):
        consts.PerfNothing  # noqa: B018


_SPEC_ENUMS = ["Cmd", "MapType", "ProgType", "AttachType", "LinkType", "PerfEventType", "FuncId", "StatsType",
               "MapFlag"]


def _plain_class(made: type[enum.Enum]) -> type:
    """The class statement a spec.consts enum was written as (members, aliases included)."""
    body: dict[str, object] = {"__module__": made.__module__, "__qualname__": made.__qualname__, "__doc__": made.__doc__}
    body.update((name, member.value) for name, member in made.__members__.items())
    return type(made.__name__, (), body)


@pytest.mark.parametrize("name", _SPEC_ENUMS)
@pytest.mark.parametrize("simple", [True, False], ids=["simple_enum", "functional"])
def test_spec_enums_same_as_the_ordinary_ones(name: str, simple: bool) -> None:
    # spec.consts makes its enums with enum._simple_enum where Python has it (private; faster),
    # else with the functional API. Both must equal an enum made through the metaclass.
    made = getattr(spec_consts, name)
    base = spec_consts._CEnum if issubclass(made, spec_consts._CEnum) else enum.IntFlag
    checked = spec_consts._fast_enum(base, simple=False)(_plain_class(made))  # the metaclass's path
    rebuilt = spec_consts._fast_enum(base, simple=simple)(_plain_class(made))
    if hasattr(made, "C_PREFIX"):
        type.__setattr__(checked, "C_PREFIX", made.C_PREFIX)
        type.__setattr__(rebuilt, "C_PREFIX", made.C_PREFIX)
    enum._test_simple_enum(checked, made)
    enum._test_simple_enum(checked, rebuilt)
    for cls in (made, rebuilt):
        assert cls.__doc__ == made.__doc__ and cls.__module__ == "bpfkit.spec.consts"
        assert list(cls.__members__) == list(checked.__members__)
        for member in cls:
            twin = checked[member.name]
            assert isinstance(member, enum.IntEnum if base is spec_consts._CEnum else enum.IntFlag)
            assert isinstance(member, cls) and cls(member.value) is member
            assert (repr(member), str(member), format(member), int(member)) == (
                repr(twin), str(twin), format(twin), int(twin))
            if hasattr(made, "C_PREFIX"):
                assert member.c_name == twin.c_name and member.kernel_name == twin.kernel_name
    assert pickle.loads(pickle.dumps(next(iter(made)))) is next(iter(made))
    bad = 1 << 40 if base is spec_consts._CEnum else 1.5
    with pytest.raises(ValueError) as fast:
        made(bad)
    with pytest.raises(ValueError) as ordinary:
        checked(bad)
    assert str(fast.value) == str(ordinary.value)
