# SPDX-License-Identifier: Apache-2.0
"""integration/vm.py's handling of a guest kernel panic.

The panic text is the console of a real run (Debian 6.12 under TCG, November 2026). The retry
test replaces the boot with a stand-in: a guest panic cannot be produced on demand."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
import vm  # noqa: E402

PANIC_CONSOLE = """\
[   29.875091] 9pnet: Limiting 'msize' to 512000 as this is the maximum supported by transport virtio
[ 1272.530993] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[ 1272.533488] CPU: 1 UID: 0 PID: 402 Comm: probe_target Not tainted 6.12.117+deb12-amd64 #1  Debian 6.12.117-1~deb12u1
[ 1272.533940] RIP: 0010:__schedule+0x407/0xbf0
[ 1272.542090] RIP: 0033:0x7fa874514b74
[ 1272.545242] Kernel panic - not syncing: Fatal exception in interrupt
"""


def test_panic_is_named_by_its_oops_line(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text(PANIC_CONSOLE)
    assert vm._panic_of(console) == "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI at __schedule+0x407/0xbf0"
    console.write_text(PANIC_CONSOLE.replace("Kernel panic - not syncing", "all fine"))
    assert vm._panic_of(console) is None
    assert vm._panic_of(tmp_path / "absent.log") is None


@pytest.mark.parametrize("panics, retries, boots, ok", [(1, 1, 2, True), (2, 1, 2, False), (1, 0, 1, False)])
def test_a_panicked_guest_boots_again(monkeypatch: pytest.MonkeyPatch, panics: int, retries: int,
                                      boots: int, ok: bool) -> None:
    calls = []

    def boot(name: str, kernel: object, args: argparse.Namespace) -> vm.Result:
        calls.append(name)
        if len(calls) <= panics:
            return vm.Result(name, status="error", panic="Oops: int3 at __schedule+0x407/0xbf0",
                             note="guest kernel panic")
        return vm.Result(name, passed=3)

    monkeypatch.setattr(vm, "fetch_kernel", lambda name, log=None: object())
    monkeypatch.setattr(vm, "_boot_and_test", boot)
    result = vm.run_vm("6.12", argparse.Namespace(panic_retries=retries))
    assert len(calls) == boots and result.ok is ok
    if ok:
        assert result.passed == 3 and "1 earlier boot(s) panicked (Oops: int3 at __schedule" in result.note


def test_interpreter_bin_dir_leads_path_for_vng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vng execs `virtme-run` by name through /bin/sh; with only the standard PATH (a fresh
    machine, the runner started as .venv/bin/python) it must still be found beside the
    interpreter."""
    env = vm.env_with_interpreter_bin({"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"})
    bin_dir = str(Path(sys.executable).absolute().parent)
    assert env["PATH"].split(":")[0] == bin_dir
    assert env["PATH"].split(":").count(bin_dir) == 1
    assert env["HOME"] == "/root"
    # The same lookup /bin/sh makes for vng, with a stand-in helper beside a stand-in interpreter.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "virtme-run").write_text("#!/bin/sh\necho found\n")
    (fake_bin / "virtme-run").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python3"))
    env = vm.env_with_interpreter_bin({"PATH": "/usr/bin:/bin"})
    out = subprocess.run(["/bin/sh", "-c", "virtme-run"], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "found", out.stderr


def test_private_apt_names_security_only_where_the_host_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """debootstrap's sources.list names only `bookworm main`; taking the archive for the
    security suite made `apt-get update` fail on a fresh machine (no bookworm-security there)."""
    import vm_kernels

    plain = tmp_path / "sources.list"
    plain.write_text("deb http://mirror.invalid/debian bookworm main\n")
    monkeypatch.setattr(vm_kernels, "HOST_SOURCES", (str(plain),))
    assert vm_kernels.mirror_uris() == ("http://mirror.invalid/debian", None)
    vm_kernels._write_private_apt(tmp_path / "apt", "bookworm")
    lines = (tmp_path / "apt" / "sources.list").read_text().splitlines()
    assert [line.split()[-2] for line in lines] == ["bookworm", "bookworm-updates"]

    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
                      "Components: main\n\nTypes: deb\nURIs: http://mirror.invalid/debian-security\n"
                      "Suites: bookworm-security\nComponents: main\n")
    monkeypatch.setattr(vm_kernels, "HOST_SOURCES", (str(deb822),))
    assert vm_kernels.mirror_uris() == ("http://mirror.invalid/debian", "http://mirror.invalid/debian-security")
    vm_kernels._write_private_apt(tmp_path / "apt2", "bullseye")
    assert (tmp_path / "apt2" / "sources.list").read_text().splitlines()[-1].endswith(
        "http://mirror.invalid/debian-security bullseye-security main")
