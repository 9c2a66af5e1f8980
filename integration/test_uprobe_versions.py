# SPDX-License-Identifier: Apache-2.0
"""Symbol versions in attach specs, against the host's glibc (issue #21): `uprobe:libc:memcpy`
must mean the default version (`memcpy@@GLIBC_2.14`, an IFUNC on x86-64: refused, naming the
implementation the dynamic linker chose), `memcpy@GLIBC_2.2.5` spelled out the compat one.
readelf is the independent reading of the versions and offsets."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess

import pytest

import bpfkit
from bpfkit import features, link
from bpfkit.link._binary import resolve_binary

from .test_link_cli import ENV, SUBPROCESS_TIMEOUT, bpfkit_cmd

OBJ = "link_probes"
# link_probes' programs call bpf_get_attach_cookie() (Linux 5.15): older kernels refuse them at load.
pytestmark = pytest.mark.feature("bpf_cookie")


def _readelf(*args: str) -> str:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs binutils' readelf as the independent reading of symbol versions")
    return subprocess.run([readelf, "-W", *args], check=True, capture_output=True, text=True).stdout


def _file_offset(libc: str, symbol: str) -> int:
    """The file offset of ``symbol`` (name@VER or name@@VER) from readelf's .dynsym and PT_LOAD rows."""
    values = [int(line.split()[1], 16) for line in _readelf("--dyn-syms", libc).splitlines()
              if len(line.split()) >= 8 and line.split()[7] == symbol]
    if not values:
        pytest.skip(f"{libc} has no {symbol} (glibc on x86-64 has it)")
    (value,) = values
    for line in _readelf("-l", libc).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if vaddr <= value < vaddr + filesz:
                return value - vaddr + off
    raise AssertionError(f"{symbol} at {value:#x} is in no PT_LOAD segment")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(bpfkit_cmd(*args), capture_output=True, text=True, env=ENV, timeout=SUBPROCESS_TIMEOUT)


def test_cli_compat_version_spelled_out(bpf_obj) -> None:
    libc = resolve_binary("libc")
    want = _file_offset(libc, "memcpy@GLIBC_2.2.5")
    pin = f"/sys/fs/bpf/bpfkit-test-versions-{os.getpid()}"
    try:
        made = _run("attach", str(bpf_obj(OBJ)), "uprobe:libc:memcpy@GLIBC_2.2.5", "-p", "up_getppid", "--pin", pin)
        assert made.returncode == 0, made.stderr
        assert f"attached up_getppid: uprobe {libc}:memcpy@GLIBC_2.2.5 (link)" in made.stdout
        shown = _run("link", "show", f"{pin}/up_getppid", "--json")
        assert shown.returncode == 0, shown.stderr
        detail = json.loads(shown.stdout)["detail"]["detail"]
        if detail is None:  # perf links report their probe since 6.6 (1b715e1b0ec5): nothing to compare before
            assert not features.probe("uprobe_multi"), "a 6.6+ kernel reported no perf link details"
            return
        assert (detail["path"], detail["offset"]) == (libc, want)
    finally:
        shutil.rmtree(pin, ignore_errors=True)


def test_cli_plain_name_is_the_default_version(bpf_obj) -> None:
    libc = resolve_binary("libc")
    _file_offset(libc, "memcpy@@GLIBC_2.14")  # skips where glibc has no such default
    refused = _run("attach", str(bpf_obj(OBJ)), "uprobe:libc:memcpy", "-p", "up_getppid")
    assert refused.returncode == 1
    assert (f"bpfkit: error: attach uprobe {libc}:memcpy: 'memcpy@@GLIBC_2.14' in {libc} is an indirect function "
            "(STT_GNU_IFUNC)") in refused.stderr
    assert refused.stderr.rstrip().endswith("or name one of its other versions: memcpy@GLIBC_2.2.5")
    # The implementation this machine's resolver picks, found here independently through dlsym.
    handle = ctypes.CDLL(libc, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    address = ctypes.cast(handle.memcpy, ctypes.c_void_p).value
    with open("/proc/self/maps") as maps:
        base = next(int(f[0].split("-")[0], 16) for f in (line.split() for line in maps)
                    if len(f) >= 6 and int(f[2], 16) == 0 and os.path.realpath(f[5]) == libc)
    match = re.search(r"in this process the dynamic linker chose (\S+ at |the code at )(0x[0-9a-f]+): attach there",
                      refused.stderr)
    assert match and int(match.group(2), 16) == address - base, refused.stderr
    # ... and a uprobe there sees this process's memcpy calls.
    spec = bpfkit.load_spec(str(bpf_obj(OBJ)))
    spec.variables["target_tgid"].value = os.getpid()
    src, dst = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    with bpfkit.Collection(spec, programs=["up_getppid"]) as coll:
        with link.uprobe(libc, None, coll.programs["up_getppid"], address=address - base, pid=os.getpid()):
            for _ in range(5):
                handle.memcpy(dst, src, 64)
        hits = coll.maps["hits"][1]  # typed through BTF: u32 slot -> u64 count
    assert hits >= 5
