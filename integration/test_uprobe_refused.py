# SPDX-License-Identifier: Apache-2.0
"""Uprobe targets the kernel refuses (issue #21: `uprobe:libc:*` failed with a bare ENOTSUPP).

x86 uprobes refuse some instructions (arch_uprobe_analyze_insn: a lock or segment prefix, ...)
with ENOTSUPP (524), and a uprobe_multi link fails as a whole without saying which target.
A small program built here has three functions, one starting with `lock incl (%rdi)`: a pattern
skips it with a warning naming it (as bpftrace skips wildcard matches it cannot attach), a list
of names fails naming it; the functions kept fire, counted per cookie (bpf/multi_probes.bpf.c).
The program runs while attaching: the kernel analyses the instruction when it installs the
breakpoint in a process mapping the file."""

from __future__ import annotations

import platform
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bpfkit import features, link
from bpfkit.errors import KernelError
from bpfkit.link import MultiMode

from .test_link_cli import ENV, SUBPROCESS_TIMEOUT, bpfkit_cmd
from .test_link_multi import BOTH, build_c, hits, load

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the refused function is x86 assembly (a lock-prefixed first instruction)")

TARGET_C = r"""
#include <stdio.h>
#include <string.h>

#define FN(name, k) __attribute__((noinline, noipa)) int name(int x) { asm volatile(""); return x + k; }
FN(refuse_alpha, 1)
FN(refuse_beta, 2)
/* x86 uprobes cannot probe a lock-prefixed instruction (is_prefix_bad): ENOTSUPP */
asm(".text\n.globl refuse_locked\n.type refuse_locked, @function\n"
    "refuse_locked:\n\tlock incl (%rdi)\n\tret\n.size refuse_locked, .-refuse_locked\n");
void refuse_locked(int *p);

/* stdin: "go N" calls refuse_alpha and refuse_beta N times each; "quit" */
int main(void)
{
	char line[64];
	int n, i, acc = 0, word = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4)) {
		if (sscanf(line, "go %d", &n) != 1)
			continue;
		for (i = 0; i < n; i++) {
			acc = refuse_alpha(acc);
			acc = refuse_beta(acc);
			refuse_locked(&word);
		}
		printf("done %d\n", acc);
	}
	return 0;
}
"""
COOKIES = {"refuse_alpha": 1, "refuse_beta": 2, "refuse_locked": 3}


@pytest.fixture(scope="module")
def target_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_c(tmp_path_factory, "refused_target", TARGET_C)


@pytest.fixture
def running(target_bin: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([str(target_bin)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    assert proc.stdin is not None
    proc.stdin.write("quit\n")
    proc.stdin.close()
    proc.wait(timeout=30)


def go(proc: subprocess.Popen[str], n: int) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"go {n}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().startswith("done")


def locked_offset(path: Path) -> int:
    offset = link.Executable(str(path)).symbol_offset("refuse_locked")
    assert path.read_bytes()[offset : offset + 3] == bytes.fromhex("f0ff07")  # lock incl (%rdi)
    return offset


@BOTH
def test_pattern_skips_the_refused_function(bpf_obj: Any, target_bin: Path, running: Any, mode: MultiMode) -> None:
    offset = locked_offset(target_bin)
    with load(bpf_obj) as coll:
        with pytest.warns(RuntimeWarning) as caught:
            lk = link.uprobe_multi(str(target_bin), "refuse_*", coll.programs["up_multi"], cookies=COOKIES, mode=mode)
        with lk:
            (w,) = [str(x.message) for x in caught if "refused" in str(x.message)]
            assert (f"refuse_*: skipped 1 of 3 functions the kernel refused: refuse_locked (file offset {offset:#x}, "
                    "ENOTSUPP: instruction f0 ff 07 c3...: uprobes cannot single-step or emulate it") in w
            assert list(lk.skipped) == ["refuse_locked"]
            assert lk.targets == ("refuse_alpha", "refuse_beta") and lk.cookies == (1, 2)
            assert "(2 of 3 functions, 1 refused)" in lk.description
            go(running, 4)
            assert hits(coll) == {1: 4, 2: 4}


def test_named_list_fails_naming_the_refused_function(bpf_obj: Any, target_bin: Path, running: Any) -> None:
    if not features.probe("uprobe_multi"):
        pytest.skip("needs uprobe_multi links (6.6): the perf-event path names its failing target by itself")
    offset = locked_offset(target_bin)
    with load(bpf_obj) as coll, pytest.raises(KernelError) as info, warnings.catch_warnings():
        warnings.simplefilter("error")
        link.uprobe_multi(str(target_bin), ["refuse_alpha", "refuse_locked", "refuse_beta"],
                          coll.programs["up_multi"], mode=MultiMode.MULTI)
    assert info.value.errno == 524
    assert (f":refuse_alpha,refuse_locked,refuse_beta: the kernel refused 1 of the 3 targets: refuse_locked (file offset "
            f"{offset:#x}, ENOTSUPP: instruction f0 ff 07 c3...: uprobes cannot single-step or emulate it") in str(info.value)
    assert str(info.value).endswith("BPF_LINK_CREATE: ENOTSUPP (Unknown error 524)")


def test_named_function_on_the_perf_path(bpf_obj: Any, target_bin: Path, running: Any) -> None:
    offset = locked_offset(target_bin)
    with load(bpf_obj) as coll, pytest.raises(KernelError) as info:
        link.uprobe_multi(str(target_bin), ["refuse_alpha", "refuse_locked"], coll.programs["up_multi"],
                          mode=MultiMode.PERF)
    assert info.value.errno == 524
    assert f"attach refuse_locked (2 of 2): attach uprobe {target_bin}:refuse_locked: the kernel cannot probe " \
           f"{target_bin} at {offset:#x} (instruction f0 ff 07 c3...: uprobes cannot" in str(info.value)


def test_every_match_refused(bpf_obj: Any, target_bin: Path, running: Any) -> None:
    offset = locked_offset(target_bin)
    with load(bpf_obj) as coll, pytest.raises(KernelError) as info:
        link.uprobe_multi(str(target_bin), "refuse_l*", coll.programs["up_multi"], mode=MultiMode.AUTO)
    assert info.value.errno == 524
    if features.probe("uprobe_multi"):
        assert f"the kernel refused 1 of the 1 targets: refuse_locked (file offset {offset:#x}" in str(info.value)
    else:  # before 6.6 AUTO attaches one perf event per match: the last match's refusal is the error
        assert f"attach refuse_locked (1 of 1): attach uprobe {target_bin}:refuse_locked: the kernel cannot probe " \
               f"{target_bin} at {offset:#x} (instruction f0 ff 07 c3...: uprobes cannot" in str(info.value)


@pytest.mark.feature("bpf_cookie")  # up_multi calls bpf_get_attach_cookie() (Linux 5.15)
def test_cli_attach_wildcard_warns_and_attaches_the_rest(bpf_obj: Any, target_bin: Path, running: Any) -> None:
    offset = locked_offset(target_bin)
    proc = subprocess.Popen(bpfkit_cmd("attach", str(bpf_obj("multi_probes")), f"uprobe:{target_bin}:refuse_*",
                                       "-p", "up_multi"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "to detach" in line:
                break
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == 0, err
    assert any("refuse_* (2 of 3 functions, 1 refused)" in line for line in lines), lines
    assert (f"bpfkit: warning: uprobe_multi {target_bin}:refuse_*: skipped 1 of 3 functions the kernel refused: "
            f"refuse_locked (file offset {offset:#x}, ENOTSUPP: instruction f0 ff 07 c3...") in err, err
