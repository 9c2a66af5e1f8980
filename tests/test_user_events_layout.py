# SPDX-License-Identifier: Apache-2.0
"""bpfkit's user_events ABI against the kernel's include/uapi/linux/user_events.h.

One C program compiled against the UAPI headers prints sizeof/offsetof of every field of the
packed ``struct user_reg`` and ``struct user_unreg`` as declared in bpfkit._kernel.user_events,
the DIAG_IOC* request numbers, the ``enum user_reg_flag`` values and the system names; the test
compares each with bpfkit's. Headers as in tests/test_layout.py: linux-libc-dev from
bookworm-backports through scripts/uapi-headers.sh (cached) or $BPFKIT_UAPI_INCLUDE. The host's
own linux-libc-dev (6.1) has no linux/user_events.h (it left the UAPI in 5.18 and came back in
6.4), so without newer headers the test skips. No root needed; needs gcc.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bpfkit._kernel import user_events as ue

from .test_layout import find_headers

PRELUDE = """\
#include <stdio.h>
#include <stddef.h>
#include <linux/types.h>
#include <linux/user_events.h>
int main(void) {
"""


def _checks() -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """(name, C expressions, expected values) per check."""
    checks = []
    for ctype in ue.CHECKED_TYPES:
        t = ue.ffi.typeof(ctype)
        checks.append((f"sizeof({ctype})", (f"sizeof({ctype})",), (ue.ffi.sizeof(t),)))
        for name, field in t.fields:
            checks.append((f"{ctype}.{name}",
                           (f"offsetof({ctype}, {name})", f"sizeof((({ctype} *)0)->{name})"),
                           (field.offset, ue.ffi.sizeof(field.type))))
    for req in ue.Ioctl:
        checks.append((req.c_name, (req.c_name,), (int(req),)))
    for flag in ue.RegFlag:
        checks.append((flag.c_name, (flag.c_name,), (int(flag),)))
    # Every flag bpfkit knows is below the kernel's "not ABI yet" mark, and it knows them all.
    checks.append(("USER_EVENT_REG_MAX", ("USER_EVENT_REG_MAX",), (max(ue.RegFlag) << 1,)))
    checks.append(("DYN_LOC", ("DYN_LOC(3, 5)",), ((5 << 16) | 3,)))
    return checks


CHECKS = _checks()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, ...]]:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    headers = find_headers()
    include = Path(headers.include)
    if not (include / "linux" / "user_events.h").exists():
        pytest.skip(f"no linux/user_events.h in {headers.source} (UAPI since 6.4)")
    body = "".join(
        f'printf("L{i}' + " %lu" * len(exprs) + '\\n", ' + ", ".join(
            f"(unsigned long)({e})" for e in exprs) + ");\n"
        for i, (_, exprs, _) in enumerate(CHECKS)
    )
    strings = ('printf("SYSTEM %s %s %s\\n", USER_EVENTS_SYSTEM, USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_PREFIX);\n')
    work = tmp_path_factory.mktemp("user_events_layout")
    src, exe = work / "layout.c", work / "layout"
    src.write_text(PRELUDE + body + strings + "return 0;\n}\n")
    proc = subprocess.run(["gcc", "-std=gnu11", "-w", *headers.cflags(), "-o", str(exe), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"gcc against {headers.source}:\n{proc.stderr[-3000:]}"
    out: dict[str, tuple[int, ...]] = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        name, *values = line.split()
        if name == "SYSTEM":
            out[name] = tuple(values)  # type: ignore[assignment]
        else:
            out[CHECKS[int(name[1:])][0]] = tuple(int(v) for v in values)
    return out


@pytest.mark.parametrize("name,exprs,expect", CHECKS, ids=[c[0] for c in CHECKS])
def test_matches_uapi(results: dict[str, tuple[int, ...]], name: str, exprs: tuple[str, ...], expect: tuple[int, ...]) -> None:
    assert results[name] == expect, f"{name}: UAPI says {results[name]}, bpfkit {expect}"


def test_system_names(results: dict[str, tuple[int, ...]]) -> None:
    assert results["SYSTEM"] == (ue.USER_EVENTS_SYSTEM, ue.USER_EVENTS_MULTI_SYSTEM, ue.USER_EVENTS_PREFIX)


def test_every_struct_is_checked() -> None:
    """A struct added to the cdef must be added to CHECKED_TYPES (and so to this test)."""
    import re

    declared = {f"struct {n}" for n in re.findall(r"^struct\s+(\w+)\s*\{", ue.CDEF, re.M)}
    assert declared == set(ue.CHECKED_TYPES)
