# SPDX-License-Identifier: Apache-2.0
"""bpfkit's view of the kernel ABI against the kernel's own UAPI headers.

One C program, generated from bpfkit's declarations and compiled with gcc against
linux/bpf.h and linux/perf_event.h, prints:

* sizeof/offsetof of every struct, union and field declared in ``bpfkit._kernel.abi``
  (cffi's fields walked recursively: anonymous members flattened as C flattens them, named
  nested members as ``a.b.c`` designators);
* the bit each bitfield flag lands on (perf_event_attr's ``disabled:1, inherit:1 ...`` word,
  bpf_prog_info's ``gpl_compatible:1``), by setting it in C and printing the resulting word;
* the value of every enum member and constant in ``bpfkit._kernel.consts`` (enums by their
  ``c_name``, MapFlag as BPF_F_*, PerfSample as PERF_SAMPLE_*, PerfIoctl as PERF_EVENT_IOC_*,
  PERF_ATTR_SIZES as PERF_ATTR_SIZE_VER*), and the bpf/perf_event_open syscall numbers.

Headers: bpfkit declares Linux 6.12's structs, newer than the host's linux-libc-dev (6.1), so the
test uses scripts/uapi-headers.sh (linux-libc-dev from bookworm-backports, cached) or
$BPFKIT_UAPI_INCLUDE. Only when those cannot be had does it fall back to /usr/include, and then
every check the older headers cannot compile is reported in a skip instead of failing.
The names newer than 6.12 (NEWER_THAN_HEADERS) are checked against Debian sid's headers
(`scripts/uapi-headers.sh newest`, or $BPFKIT_UAPI_NEWEST_INCLUDE), with every other check too:
UAPI never moves a field, so only a struct's total size may have grown there.
No root needed; needs gcc.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bpfkit._kernel import abi, consts, perf_consts
from bpfkit.spec import consts as spec_consts

for _name in consts._PERF_NAMES:  # made on first use: into vars(consts), as every other name
    getattr(consts, _name)

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "uapi-headers.sh"

# Constants bpfkit knows that are newer than the headers the test fetches (Linux 6.12): checked
# when the headers have them, reported (not failed) when they do not. Name -> release.
NEWER_THAN_HEADERS = {
    "BPF_TRACE_UPROBE_SESSION": "6.13",
    "BPF_TRACE_FSESSION": "7.0",
    "BPF_TRACE_FENTRY_MULTI": "7.2",
    "BPF_TRACE_FEXIT_MULTI": "7.2",
    "BPF_TRACE_FSESSION_MULTI": "7.2",
    "BPF_LINK_TYPE_TRACING_MULTI": "7.2",
    "BPF_MAP_TYPE_INSN_ARRAY": "6.19",
    "BPF_MAP_TYPE_RHASH": "7.2",
    "BPF_PROG_STREAM_READ_BY_FD": "6.17",
    "BPF_PROG_ASSOC_STRUCT_OPS": "7.0",
    "BPF_F_RB_OVERWRITE": "6.19",
}
# Module-level constants of consts.py whose UAPI spelling differs, or that have none.
CONST_C_NAMES = {"PERF_EVENT_IOC_FLAG_GROUP": "PERF_IOC_FLAG_GROUP"}
CONST_NOT_IN_UAPI = {"KERNEL_VERSION_MAGIC"}  # libbpf's/the kernel's "any version", not UAPI
# Syscall numbers bpfkit hard-codes, by the UAPI macro that defines them.
SYSCALL_MACROS = {"bpf": "__NR_bpf", "perf_event_open": "__NR_perf_event_open"}
# Fields that are one integer in cffi but a run of bitfields in C: field -> {C bitfield: value}.
PERF_ATTR_FLAGS_FIELD = ("struct perf_event_attr", "flags")
_SKIPPED_PREFIXES = ("_pad", "_bits_", "__reserved")
# What a ``_bits_*`` word holds when it is not one flag at bit 0: (C assignment, word value).
BIT_WORDS = {
    ("struct bpf_insn", "_bits_regs"): [("dst_reg = 1", 0x01), ("dst_reg = 15", 0x0F), ("src_reg = 1", 0x10)],
}
# Named integer fields that overlay C bitfields: (C assignment, word value, release if newer).
SPLIT_WORDS = {
    ("struct perf_event_attr", "aux_action"): [
        ("aux_start_paused = 1", 1 << 0, "6.13"),
        ("aux_pause = 1", 1 << 1, "6.13"),
        ("aux_resume = 1", 1 << 2, "6.13"),
    ],
}


# ------------------------------------------------------------------------------ headers
@dataclasses.dataclass(frozen=True)
class Headers:
    include: str  # the directory holding linux/bpf.h
    source: str  # where it came from, for messages
    strict: bool  # False when falling back to older headers: missing names are skips

    def cflags(self) -> list[str]:
        if self.include == "/usr/include":
            return []
        flags = ["-I", self.include]
        multiarch = _multiarch()
        if multiarch and os.path.isdir(os.path.join(self.include, multiarch)):
            flags += ["-I", os.path.join(self.include, multiarch)]
        return flags


def _multiarch() -> str:
    try:
        return subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def _cache_root() -> Path:
    if os.environ.get("BPFKIT_CACHE"):
        return Path(os.environ["BPFKIT_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "bpfkit"


# scripts/uapi-headers.sh's modes: (argument, cache name, environment override).
BACKPORTS = ("backports", "uapi", "BPFKIT_UAPI_INCLUDE")
NEWEST = ("newest", "uapi-sid", "BPFKIT_UAPI_NEWEST_INCLUDE")


def find_headers(mode: tuple[str, str, str] = BACKPORTS) -> Headers:
    """The headers of `mode`; /usr/include (not strict) with the reason when they cannot be had."""
    arg, cache_name, env_name = mode
    env = os.environ.get(env_name)
    if env:
        return Headers(env, f"${env_name}", True)
    cached = _cache_root() / cache_name / "root" / "usr" / "include"
    if (cached / "linux" / "bpf.h").exists():
        return Headers(str(cached), f"scripts/uapi-headers.sh {arg} cache", True)
    why = ""
    try:
        proc = subprocess.run([str(SCRIPT), arg], capture_output=True, text=True, timeout=300)
        path = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode == 0 and os.path.exists(os.path.join(path, "linux", "bpf.h")):
            return Headers(path, f"scripts/uapi-headers.sh {arg}", True)
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = str(exc)
    return Headers("/usr/include", f"/usr/include (newer headers unavailable: {why})", False)


# ------------------------------------------------------------------------------- checks
@dataclasses.dataclass
class Check:
    group: str  # what a test reports on: "struct bpf_prog_info", "enum MapType", ...
    what: str  # human name: "union bpf_attr.link_create.uprobe_multi.pid"
    c_stmt: str  # one line of C printing "L<idx> <values...>"
    expect: tuple[int, ...]
    newer: str = ""  # release, when bpfkit knows the name but the fetched headers may not
    aggregate: bool = False  # a struct/union size: older headers end it before newer fields


def _field_checks(ctype_name: str) -> list[Check]:
    """sizeof the type, then offsetof/sizeof of every field, recursively."""
    ctype = abi.ffi.typeof(ctype_name)
    checks = [Check(ctype_name, f"sizeof({ctype_name})", f'printf("L%d %zu\\n", {{idx}}, sizeof({ctype_name}));',
                    (abi.ffi.sizeof(ctype),), aggregate=True)]

    def walk(t: Any, prefix: str, base: int) -> None:
        for name, field in t.fields:
            path = f"{prefix}{name}"
            offset = base + field.offset
            if (ctype_name, path) == PERF_ATTR_FLAGS_FIELD:
                continue  # the bitfield word: see test_perf_event_attr_flag_bits
            if name.startswith(_SKIPPED_PREFIXES) and not name.startswith("__reserved"):
                # ``_padN`` is C's unnamed ``__u32 :32`` and ``_bits_*`` a run of bitfields: no
                # name to ask C about; the next field's offset covers their size.
                continue
            ftype = field.type
            what = f"{ctype_name}.{path}"
            if ftype.kind == "array" and ftype.length is None:
                checks.append(Check(ctype_name, what,
                                    f'printf("L%d %zu\\n", {{idx}}, offsetof({ctype_name}, {path}));', (offset,)))
            else:
                checks.append(Check(
                    ctype_name, what,
                    f'printf("L%d %zu %zu\\n", {{idx}}, offsetof({ctype_name}, {path}), '
                    f"sizeof((({ctype_name} *)0)->{path}));",
                    (offset, abi.ffi.sizeof(ftype)),
                    aggregate=ftype.kind in ("struct", "union"),
                ))
            if ftype.kind in ("struct", "union"):
                walk(ftype, path + ".", offset)

    walk(ctype, "", 0)
    return checks


def _bit_word_stmt(ctype_name: str, word_offset: int, word_size: int, assign: str) -> str:
    """C that sets one bitfield in a zeroed struct and prints the integer word at word_offset,
    plus the count of non-zero bytes outside it (0 when the bit landed inside the word)."""
    utype = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}[word_size]
    return (
        f"{{ {ctype_name} s; unsigned char *p = (unsigned char *)&s; {utype} w; int out = 0; size_t i; "
        f"memset(&s, 0, sizeof s); s.{assign}; memcpy(&w, p + {word_offset}, sizeof w); "
        f"for (i = 0; i < sizeof s; i++) if ((i < {word_offset} || i >= {word_offset + word_size}) && p[i]) out++; "
        f'printf("L%d %llu %d\\n", {{idx}}, (unsigned long long)w, out); }}'
    )


def _bitfield_checks() -> list[Check]:
    checks = []
    # perf_event_attr: the u64 after read_format holds disabled:1, inherit:1, ... in order.
    ctype = "struct perf_event_attr"
    word = dict(abi.ffi.typeof(ctype).fields)["flags"].offset
    for flag in consts.PerfAttrFlag:
        name = flag.name.lower()
        if name.startswith("precise_ip_"):  # precise_ip:2; bit 0 is value 1, bit 1 value 2
            assign = f"precise_ip = {1 << int(name[-1])}"
        else:
            assign = f"{name} = 1"
        checks.append(Check(f"{ctype} flags", f"PerfAttrFlag.{flag.name} ({assign})",
                            _bit_word_stmt(ctype, word, 8, assign), (int(flag), 0)))
    # ``_bits_<name>`` fields: bit 0 of the word is the C bitfield <name>, unless BIT_WORDS
    # says what the word holds.
    for ctype in abi.CHECKED_TYPES:
        for fname, field in abi.ffi.typeof(ctype).fields:
            if not fname.startswith("_bits_"):
                continue
            default = [(f"{fname[len('_bits_'):]} = 1", 1)]
            for assign, value in BIT_WORDS.get((ctype, fname), default):
                checks.append(Check(f"{ctype} flags", f"{ctype}.{fname}: {assign}",
                                    _bit_word_stmt(ctype, field.offset, abi.ffi.sizeof(field.type), assign),
                                    (value, 0)))
    # Plain integer fields that C splits into bitfields (the test also checks them by name).
    for (ctype, fname), assigns in SPLIT_WORDS.items():
        field = dict(abi.ffi.typeof(ctype).fields)[fname]
        for assign, value, newer in assigns:
            checks.append(Check(f"{ctype} flags", f"{ctype}.{fname}: {assign}",
                                _bit_word_stmt(ctype, field.offset, abi.ffi.sizeof(field.type), assign),
                                (value, 0), newer))
    return checks


def _const_stmt(c_name: str) -> str:
    return f'printf("L%d %llu\\n", {{idx}}, (unsigned long long)({c_name}));'


def _enum_checks() -> list[Check]:
    checks = []
    prefixes = {consts.MapFlag: "BPF_F_", consts.PerfSample: "PERF_SAMPLE_"}
    for obj in vars(consts).values():
        if not (isinstance(obj, type) and issubclass(obj, enum.Enum)) or obj.__module__ not in (consts.__name__, perf_consts.__name__, spec_consts.__name__):
            continue
        if obj is consts.PerfAttrFlag or obj.__name__.startswith("_"):
            continue
        prefix = getattr(obj, "C_PREFIX", None) or prefixes.get(obj)
        assert prefix, f"consts.{obj.__name__} has no C_PREFIX: the layout test cannot check it"
        for member in obj:
            c_name = prefix + member.name
            checks.append(Check(f"enum {obj.__name__}", f"{obj.__name__}.{member.name} = {c_name}",
                                _const_stmt(c_name), (int(member),), NEWER_THAN_HEADERS.get(c_name, "")))
    return checks


def _constant_checks() -> list[Check]:
    checks = []
    for name, value in vars(consts).items():
        if not name.isupper() or name.startswith("_") or isinstance(value, bool):
            continue
        if name == "PERF_ATTR_SIZES":
            for version, (size, _) in value.items():
                c_name = f"PERF_ATTR_SIZE_VER{version}"
                checks.append(Check("constants", f"{c_name}", _const_stmt(c_name), (size,)))
            continue
        if not isinstance(value, int) or name in CONST_NOT_IN_UAPI:
            continue
        c_name = CONST_C_NAMES.get(name, name)
        checks.append(Check("constants", f"{name} = {c_name}", _const_stmt(c_name), (value,),
                            NEWER_THAN_HEADERS.get(c_name, "")))
    arch = platform.machine()
    for syscall, macro in SYSCALL_MACROS.items():
        checks.append(Check("constants", f"{arch} syscall {syscall} = {macro}", _const_stmt(macro),
                            (consts.syscall_number(syscall),)))
    return checks


def all_checks() -> list[Check]:
    checks: list[Check] = []
    for ctype in abi.CHECKED_TYPES:
        checks += _field_checks(ctype)
    return checks + _bitfield_checks() + _enum_checks() + _constant_checks()


# ------------------------------------------------------------------------ compile & run
PRELUDE = """\
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <linux/version.h>
int main(void) {
printf("VERSION %d\\n", LINUX_VERSION_CODE);
"""


@dataclasses.dataclass
class Results:
    headers: Headers
    version: str
    values: dict[int, tuple[int, ...]]
    missing: dict[int, str]  # check index -> gcc's complaint (names the headers lack)


def run_checks(checks: list[Check], headers: Headers, workdir: Path) -> Results:
    """Compile and run the checks; a line gcc rejects is dropped and recompiled without,
    so one missing name never hides the rest."""
    prelude_lines = PRELUDE.count("\n")
    active = dict(enumerate(checks))
    missing: dict[int, str] = {}
    src, exe = workdir / "layout.c", workdir / "layout"
    for _ in range(10):
        order = list(active)
        body = "".join(active[i].c_stmt.replace("{idx}", str(i)) + "\n" for i in order)
        src.write_text(PRELUDE + body + "return 0;\n}\n")
        proc = subprocess.run(
            ["gcc", "-std=gnu11", "-fmax-errors=0", "-w", *headers.cflags(), "-o", str(exe), str(src)],
            capture_output=True, text=True,
        )
        if proc.returncode == 0:
            break
        bad: dict[int, str] = {}
        for match in re.finditer(rf"^{re.escape(str(src))}:(\d+):\d+: error: (.*)$", proc.stderr, re.M):
            line = int(match.group(1)) - prelude_lines - 1
            if 0 <= line < len(order):
                bad.setdefault(order[line], match.group(2))
        if not bad:
            raise AssertionError(f"gcc failed on the generated layout program:\n{proc.stderr[-4000:]}")
        for idx, why in bad.items():
            missing[idx] = why
            del active[idx]
    else:
        raise AssertionError("gcc kept failing on the generated layout program")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    values: dict[int, tuple[int, ...]] = {}
    version = ""
    for line in out.splitlines():
        head, *rest = line.split()
        if head == "VERSION":
            code = int(rest[0])
            version = f"{code >> 16}.{(code >> 8) & 0xFF}"
        else:
            values[int(head[1:])] = tuple(int(v) for v in rest)
    return Results(headers, version, values, missing)


CHECKS = all_checks()
GROUPS = sorted({c.group for c in CHECKS})


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to compile the layout program")
    headers = find_headers()
    return run_checks(CHECKS, headers, tmp_path_factory.mktemp("layout"))


def _verify(results: Results, group: str) -> None:
    wrong, skipped, checked = [], [], 0
    group_missing = any(i in results.missing for i, c in enumerate(CHECKS) if c.group == group)
    for idx, check in enumerate(CHECKS):
        if check.group != group:
            continue
        if idx in results.missing:
            why = results.missing[idx]
            if results.headers.strict and not check.newer:
                wrong.append(f"{check.what}: the headers have no such name ({why})")
            elif results.headers.strict:
                continue  # newer than these headers: test_layout_against_newest_headers checks it
            else:
                skipped.append(f"{check.what}" + (f" (Linux {check.newer})" if check.newer else ""))
            continue
        checked += 1
        got = results.values.get(idx)
        if (got != check.expect and check.aggregate and not results.headers.strict and got
                and got[:-1] == check.expect[:-1] and group_missing):
            # Older headers end the struct before the fields they lack.
            skipped.append(f"size of {check.what} (bpfkit {check.expect[-1]}, these headers {got[-1]})")
            continue
        if got != check.expect:
            wrong.append(f"{check.what}: bpfkit says {check.expect}, the C headers say {got}")
    where = f"headers {results.headers.include} (Linux {results.version}, from {results.headers.source})"
    assert not wrong, f"{group}: {len(wrong)} mismatches against {where}:\n  " + "\n  ".join(wrong)
    assert checked or skipped, f"no checks in group {group}"
    if skipped:
        pytest.skip(f"{group}: {checked} checks pass; {len(skipped)} names absent from {where}: "
                    + ", ".join(skipped))


@pytest.mark.parametrize("group", [g for g in GROUPS if g.startswith(("struct", "union")) and "flags" not in g])
def test_struct_layout(results: Results, group: str) -> None:
    _verify(results, group)


@pytest.mark.parametrize("group", [g for g in GROUPS if g.endswith(" flags")])
def test_bitfield_positions(results: Results, group: str) -> None:
    _verify(results, group)


@pytest.mark.parametrize("group", [g for g in GROUPS if g.startswith("enum ")])
def test_enum_values(results: Results, group: str) -> None:
    _verify(results, group)


def test_constants(results: Results) -> None:
    _verify(results, "constants")


def test_every_declared_type_is_checked() -> None:
    """Every struct/union in abi.CDEF is in CHECKED_TYPES (so a new cdef gets checked)."""
    declared = set(re.findall(r"^(struct|union)\s+(\w+)\s*\{", abi.CDEF, re.M))
    names = {f"{kind} {name}" for kind, name in declared}
    assert names <= set(abi.CHECKED_TYPES), f"declared but not layout-checked: {names - set(abi.CHECKED_TYPES)}"


def test_checks_cover_nested_members() -> None:
    """The walk reaches named nested members (designators) and flattened anonymous ones."""
    whats = {c.what for c in CHECKS}
    assert "union bpf_attr.link_create.uprobe_multi.pid" in whats
    assert "union bpf_attr.link_create.iter_info_len" in whats  # anonymous struct, flattened
    assert "struct bpf_link_info.perf_event.uprobe.cookie" in whats
    assert "union bpf_attr.log_true_size" in whats


def test_headers_are_new_enough(results: Results) -> None:
    """bpfkit declares Linux 6.12's layout: report clearly when only older headers were found."""
    if not results.headers.strict:
        pytest.skip(f"checked against {results.headers.source}, Linux {results.version}: "
                    "names newer than that were skipped")
    major, minor = (int(x) for x in results.version.split("."))
    assert (major, minor) >= (6, 12), f"{results.headers.include} is Linux {results.version}, older than 6.12"


@pytest.fixture(scope="module")
def newest_results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to compile the layout program")
    headers = find_headers(NEWEST)
    if not headers.strict:
        pytest.skip(f"Debian sid's linux-libc-dev could not be fetched: {headers.source}")
    return run_checks(CHECKS, headers, tmp_path_factory.mktemp("layout-newest"))


def test_layout_against_newest_headers(newest_results: Results) -> None:
    """Every name bpfkit declares, the ones newer than 6.12 included, against sid's headers.
    Offsets, sizes of fields, enum values and flag bits must equal; a struct may have grown."""
    res, wrong, grown = newest_results, [], []
    for idx, check in enumerate(CHECKS):
        if idx in res.missing:
            wrong.append(f"{check.what}: the headers have no such name ({res.missing[idx]})")
            continue
        got = res.values.get(idx)
        if got == check.expect:
            continue
        if check.aggregate and got and got[:-1] == check.expect[:-1] and got[-1] > check.expect[-1]:
            grown.append(f"{check.what} {check.expect[-1]} -> {got[-1]}")
            continue
        wrong.append(f"{check.what}: bpfkit says {check.expect}, the C headers say {got}")
    where = f"headers {res.headers.include} (Linux {res.version}, from {res.headers.source})"
    assert not wrong, f"{len(wrong)} mismatches against {where}:\n  " + "\n  ".join(wrong)
    newer = [c.what for c in CHECKS if c.newer]
    assert newer, "NEWER_THAN_HEADERS names reach no check"
    major, minor = (int(x) for x in res.version.split("."))
    assert (major, minor) >= max(tuple(int(x) for x in v.split(".")) for v in NEWER_THAN_HEADERS.values()), (
        f"{where} is older than the newest name bpfkit declares")
    print(f"{len(CHECKS)} checks against {where}; {len(newer)} newer than 6.12; structs grown since: "
          + (", ".join(grown) or "none"))


def test_a_missing_name_drops_only_its_line(tmp_path: Path) -> None:
    """The recompile-without loop: a name the headers lack is reported, the rest still run."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    checks = [
        Check("t", "BPF_MAP_TYPE_HASH", _const_stmt("BPF_MAP_TYPE_HASH"), (1,)),
        Check("t", "no such name", _const_stmt("BPF_NO_SUCH_CONSTANT_EVER"), (0,)),
        Check("t", "sizeof(struct bpf_insn)", 'printf("L%d %zu\\n", {idx}, sizeof(struct bpf_insn));', (8,)),
    ]
    res = run_checks(checks, Headers("/usr/include", "test", False), tmp_path)
    assert set(res.missing) == {1} and "BPF_NO_SUCH_CONSTANT_EVER" in res.missing[1]
    assert res.values == {0: (1,), 2: (8,)}
