# SPDX-License-Identifier: Apache-2.0
"""Multi-attach against the real kernel: uprobe_multi on this host (6.18), kprobe_multi in the
6.12 VM (CONFIG_FPROBE) and whatever the 6.1 VM has, each compared with the perf-event
fallback, which must give the same counts per cookie.

The uprobe target is a small C program built here, with distinct functions called on command
(``call NAME N`` in the process, ``fork NAME N`` in a child), so every count is exact. The BPF
side (bpf/multi_probes.bpf.c) counts hits per bpf_get_attach_cookie() in a hash map.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

import bpfkit
from bpfkit import features, link
from bpfkit._kernel import tracefs as _tracefs
from bpfkit.errors import BPFKitError, KernelError, NotFoundError, NotSupportedError, UsageError
from bpfkit.link import MultiMode
from bpfkit.program import Program

TARGET_C = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#define FN(name, k) __attribute__((noinline, noipa)) int name(int x) { asm volatile(""); return x + k; }
FN(multi_alpha, 1)
FN(multi_beta, 2)
FN(multi_gamma, 3)
FN(other_delta, 4)

static int (*lookup(const char *name))(int)
{
	if (!strcmp(name, "multi_alpha")) return multi_alpha;
	if (!strcmp(name, "multi_beta")) return multi_beta;
	if (!strcmp(name, "multi_gamma")) return multi_gamma;
	if (!strcmp(name, "other_delta")) return other_delta;
	return NULL;
}

/* stdin: "call NAME N" (N calls here), "fork NAME N" (N calls in a child), "quit". */
int main(void)
{
	char line[128], verb[16], name[64];
	int n, i, acc = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "quit", 4))
			break;
		if (sscanf(line, "%15s %63s %d", verb, name, &n) != 3 || !lookup(name)) {
			printf("bad\n");
			continue;
		}
		if (!strcmp(verb, "fork")) {
			pid_t pid = fork();
			if (pid == 0) {
				for (i = 0; i < n; i++)
					acc = lookup(name)(acc);
				_exit(0);
			}
			waitpid(pid, NULL, 0);
		} else {
			for (i = 0; i < n; i++)
				acc = lookup(name)(acc);
		}
		printf("done %d\n", acc);
	}
	return 0;
}
"""

FUNCS = ["multi_alpha", "multi_beta", "multi_gamma"]
BOTH = pytest.mark.parametrize("mode", [MultiMode.AUTO, MultiMode.PERF], ids=["auto", "perf"])


def build_c(tmp_path_factory: pytest.TempPathFactory, name: str, source: str) -> Path:
    """``source`` compiled with gcc -O2 into a fresh temporary directory as ``name``."""
    out = tmp_path_factory.mktemp(name) / name
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-O2", "-o", str(out), str(src)], check=True, capture_output=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def target_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_c(tmp_path_factory, "multi_target", TARGET_C)


class Target:
    """The target program, running; ``run("call multi_beta 5")`` waits until it is done."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.proc = subprocess.Popen([str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def run(self, *commands: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        for cmd in commands:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            assert reply.startswith("done"), (cmd, reply)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def target(target_bin: Path) -> Iterator[Target]:
    t = Target(target_bin)
    yield t
    t.close()


def need_cookies() -> None:
    """The programs tell targets apart by bpf_get_attach_cookie(): 5.15, on every path."""
    result = features.probe("bpf_cookie")
    if not result:
        pytest.skip(f"the test programs call bpf_get_attach_cookie (Linux {result.min_version}): {result.reason}")


def load(bpf_obj: Any, tgid: int = 0) -> Any:
    need_cookies()
    spec = bpfkit.load_spec(str(bpf_obj("multi_probes")))
    spec.variables["target_tgid"].value = tgid
    return bpfkit.Collection(spec)


def hits(coll: Any) -> dict[int, int]:
    return dict(coll.maps["hits"].items())  # __u64 -> __u64, typed through the map's BTF


def no_uprobe_events_of_ours() -> bool:
    if not _tracefs.has_probe_events("uprobe"):
        return True
    return not [e for e in _tracefs.list_probe_events("uprobe") if e.group.startswith(f"bpfkit_{os.getpid()}_")]


def check_shape(lk: Any, mode: MultiMode, n: int, kind: str) -> None:
    """A multi link in AUTO mode where the kernel has them, else the perf-event group."""
    feature = "uprobe_multi" if kind.startswith("Uprobe") else "kprobe_multi"
    if mode == MultiMode.PERF or (mode == MultiMode.AUTO and not features.probe(feature).supported):
        assert isinstance(lk, link.MultiPerfGroup) and len(lk) == n
        assert all(isinstance(m, link.PerfEventLink) for m in lk)
    else:
        assert type(lk).__name__ == kind and len(lk) == n


# ------------------------------------------------------------------------- uprobe_multi
@BOTH
def test_uprobe_multi_counts_per_cookie(bpf_obj: Any, target: Target, mode: MultiMode) -> None:
    with load(bpf_obj) as coll:
        with link.uprobe_multi(target.path, FUNCS, coll.programs["up_multi"], cookies=[11, 22, 33], mode=mode) as lk:
            check_shape(lk, mode, 3, "UprobeMultiLink")
            assert lk.targets == tuple(FUNCS) and lk.cookies == (11, 22, 33)
            target.run("call multi_alpha 3", "call multi_beta 5", "call multi_gamma 2", "call other_delta 7")
            assert hits(coll) == {11: 3, 22: 5, 33: 2}
        target.run("call multi_alpha 4")  # detached
        assert hits(coll) == {11: 3, 22: 5, 33: 2}
    assert no_uprobe_events_of_ours()


@BOTH
def test_pid_filter_skips_a_child_process(bpf_obj: Any, target: Target, mode: MultiMode) -> None:
    with load(bpf_obj) as coll:
        exe = link.Executable(target.path)
        with exe.uprobe_multi(FUNCS, coll.programs["up_multi"], cookies=[1, 2, 3], pid=target.pid, mode=mode):
            target.run("fork multi_beta 4", "call multi_beta 2", "fork multi_alpha 6", "call multi_gamma 1")
            assert hits(coll) == {2: 2, 3: 1}


@BOTH
def test_uretprobe_multi_on_a_pattern_with_cookies_by_name(bpf_obj: Any, target: Target, mode: MultiMode) -> None:
    with load(bpf_obj) as coll:
        exe = link.Executable(target.path)
        with exe.uretprobe_multi("multi_*", coll.programs["uret_multi"], cookies={"multi_alpha": 100, "multi_gamma": 300},
                                 mode=mode) as lk:
            check_shape(lk, mode, 3, "UprobeMultiLink")
            assert lk.targets == tuple(FUNCS)  # a pattern's matches, in name order
            target.run("call multi_alpha 2", "call multi_beta 3", "call multi_gamma 4")
            assert hits(coll) == {100: 2, 0: 3, 300: 4}


@pytest.mark.feature("uprobe_multi")
def test_uprobe_multi_link_info_and_pin(bpf_obj: Any, target: Target) -> None:
    exe = link.Executable(target.path)
    offsets = tuple(exe.symbols()[f] for f in FUNCS)
    with load(bpf_obj) as coll, exe.uprobe_multi(FUNCS, coll.programs["up_multi"], cookies=[5, 6, 7],
                                                   pid=target.pid, mode=MultiMode.MULTI) as lk:
        info = lk.info()
        assert info.type_name == "uprobe_multi"
        d = info.detail
        assert isinstance(d, link.UprobeMultiInfo)
        if d.count:  # uprobe_multi link info came in 6.9; before, only type and ids
            assert d.count == 3 and not d.retprobe and d.pid == target.pid
            assert d.path == exe.path and d.offsets == offsets and d.cookies == (5, 6, 7)
            assert d.ref_ctr_offsets == (0, 0, 0)
            listed = [i for i in link.iter_links() if i.id == info.id]
            assert listed and listed[0].detail.count == 3  # counts without arrays in listings
        pin = f"/sys/fs/bpf/bpfkit_multi_{os.getpid()}"
        try:
            lk.pin(pin)
        except NotSupportedError:
            pytest.skip("no bpffs")
        try:
            with link.load_pinned_link(pin) as again:
                assert isinstance(again, link.UprobeMultiLink)
                assert again.info().detail.cookies == (5, 6, 7)
        finally:
            lk.unpin()
        assert not os.path.exists(pin)


@pytest.mark.feature("uprobe_multi")
def test_plain_uprobe_program_is_reloaded_for_the_multi_link(bpf_obj: Any, target: Target) -> None:
    # SEC("uprobe") is loaded without BPF_TRACE_UPROBE_MULTI: the link runs a reloaded copy
    # (same maps), so the counts land in the same map.
    with load(bpf_obj) as coll:
        prog = coll.programs["up_plain"]
        with link.uprobe_multi(target.path, FUNCS[:2], prog, cookies=[8, 9], mode=MultiMode.MULTI) as lk:
            assert isinstance(lk, link.UprobeMultiLink)
            assert lk.info().program_id != prog.id
            target.run("call multi_alpha 2", "call multi_beta 1")
            assert hits(coll) == {8: 2, 9: 1}


@pytest.mark.feature("uprobe_multi")
def test_a_program_opened_by_id_is_attached_as_it_is(bpf_obj: Any, target: Target) -> None:
    # bpf_prog_info does not report expected_attach_type and there are no instructions to
    # reload: the kernel judges, and its refusal says what to check.
    with load(bpf_obj) as coll, Program.from_id(coll.programs["up_plain"].id) as by_id:
        with pytest.raises(KernelError, match="BPF_TRACE_UPROBE_MULTI"):
            link.uprobe_multi(target.path, FUNCS, by_id, mode=MultiMode.MULTI)
        with link.uprobe_multi(target.path, FUNCS, by_id, cookies=[1, 2, 3], mode=MultiMode.PERF):
            target.run("call multi_gamma 2")
            assert hits(coll) == {3: 2}
    assert no_uprobe_events_of_ours()


def test_uprobe_multi_errors_are_clear(bpf_obj: Any, target: Target) -> None:
    path = target.path
    with load(bpf_obj) as coll:
        prog = coll.programs["up_multi"]
        for mode in (MultiMode.AUTO, MultiMode.PERF):
            with pytest.raises(NotFoundError, match="symbol 'multi_nope' not found in"):
                link.uprobe_multi(path, ["multi_alpha", "multi_nope"], prog, mode=mode)
        with pytest.raises(NotFoundError, match=r"no function in .* matches 'nothing_\*'"):
            link.uprobe_multi(path, "nothing_*", prog)
        with pytest.raises(UsageError, match="2 cookies for 3 targets"):
            link.uprobe_multi(path, FUNCS, prog, cookies=[1, 2])
        with pytest.raises(UsageError, match="cookies name targets that are not attached: other_delta"):
            link.uprobe_multi(path, "multi_*", prog, cookies={"other_delta": 1})
        with pytest.raises(UsageError, match="multi_beta given more than once"):
            link.uprobe_multi(path, ["multi_beta", "multi_beta"], prog)
        with pytest.raises(UsageError, match="needs a kprobe program"):
            link.uprobe_multi(path, FUNCS, _TracepointLike(prog))
        assert hits(coll) == {}
    assert no_uprobe_events_of_ours()


class _TracepointLike:
    """A program object that says it is a tracepoint program (what the type check sees)."""

    def __init__(self, prog: Any) -> None:
        from bpfkit._kernel.consts import ProgType

        self.type, self.name, self.fd, self.attach_type = ProgType.TRACEPOINT, "tp", prog.fd, None


def test_fallback_failure_half_way_closes_what_it_made(bpf_obj: Any, target: Target) -> None:
    # The third target is a file offset past the end of the binary: the kernel refuses it
    # after two perf-event uprobes exist, and those must be closed.
    size = os.path.getsize(target.path)
    exe = link.Executable(target.path)
    offs = [exe.symbols()["multi_alpha"], exe.symbols()["multi_beta"], size + 4096]
    with load(bpf_obj) as coll:
        with pytest.raises(BPFKitError, match=r"attach 0x[0-9a-f]+ \(3 of 3\)"):
            link.uprobe_multi(exe, None, coll.programs["up_multi"], offsets=offs, mode=MultiMode.PERF)
        target.run("call multi_alpha 1")
        assert hits(coll) == {}
    assert no_uprobe_events_of_ours()


def test_auto_attach_uprobe_multi_sections(bpf_obj: Any) -> None:
    libc = ctypes.CDLL(None)
    with load(bpf_obj, tgid=os.getpid()) as coll:
        with link.attach_all(coll, programs=["up_auto", "uret_auto"]) as links:
            for lk in links.values():
                check_shape(lk, MultiMode.AUTO, 1, "UprobeMultiLink")
            for _ in range(5):
                libc.getppid()
            assert hits(coll) == {1000: 5, 2000: 5}


def test_parse_multi_sections() -> None:
    assert link.parse_section("uprobe.multi/libc.so.6:str*").kind == "uprobe_multi"
    assert link.parse_section("uretprobe.multi.s//usr/bin/x:f").target == "/usr/bin/x:f"
    assert link.parse_section("kretprobe.multi/vfs_*").kind == "kretprobe_multi"


# ------------------------------------------------------------------------- kprobe_multi
@pytest.mark.skipif(features.probe("kprobe_multi").supported, reason="this kernel has kprobe_multi")
def test_kprobe_multi_mode_multi_names_the_feature(bpf_obj: Any) -> None:
    with load(bpf_obj) as coll:
        with pytest.raises(NotSupportedError) as err:
            link.kprobe_multi(["vfs_read", "vfs_write"], coll.programs["kp_multi"], mode=MultiMode.MULTI)
        text = str(err.value)
        assert "kprobe_multi links" in text and "CONFIG_FPROBE" in text and "5.18" in text, text


@pytest.mark.skipif(features.probe("kprobe_pmu").supported or features.probe("kprobe_events").supported,
                    reason="this kernel has kprobes")
def test_kprobe_multi_auto_without_kprobes_says_so(bpf_obj: Any) -> None:
    with load(bpf_obj) as coll:
        with pytest.raises(NotSupportedError, match="CONFIG_KPROBES"):
            link.kprobe_multi(["vfs_read", "vfs_write"], coll.programs["kp_multi"])


def _syscall_counts(fn: str, times: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(times):
        getattr(libc, fn)(0) if fn == "getpgid" else getattr(libc, fn)()


KSYMS = ["__x64_sys_getppid", "__x64_sys_getpgid"]


@pytest.mark.vm("6.1", "6.12")
@pytest.mark.parametrize("mode", [MultiMode.AUTO, MultiMode.PERF], ids=["auto", "perf"])
@pytest.mark.parametrize("retprobe", [False, True], ids=["entry", "return"])
def test_kprobe_multi_counts_per_cookie(bpf_obj: Any, mode: MultiMode, retprobe: bool) -> None:
    have = features.probe("kprobe_multi").supported
    with load(bpf_obj, tgid=os.getpid()) as coll:
        prog = coll.programs["kret_multi" if retprobe else "kp_multi"]
        with link.kprobe_multi(KSYMS, prog, cookies=[7, 9], retprobe=retprobe, mode=mode) as lk:
            if mode == MultiMode.AUTO and have:
                assert isinstance(lk, link.KprobeMultiLink)
                d = lk.info().detail
                assert d.count == 2 and d.retprobe == retprobe
                assert sorted(d.cookies) in ([0, 0], [7, 9])  # cookies in info since 6.9
            else:
                assert isinstance(lk, link.MultiPerfGroup) and len(lk) == 2
            _syscall_counts("getppid", 5)
            _syscall_counts("getpgid", 3)
            assert hits(coll) == {7: 5, 9: 3}


@pytest.mark.vm("6.1", "6.12")
def test_kprobe_multi_mode_multi_matches_the_feature_probe(bpf_obj: Any) -> None:
    have = features.probe("kprobe_multi").supported
    print(f"\nkprobe_multi on {os.uname().release}: {features.probe('kprobe_multi')}")
    with load(bpf_obj, tgid=os.getpid()) as coll:
        prog = coll.programs["kp_multi"]
        if not have:
            with pytest.raises(NotSupportedError, match="5.18"):
                link.kprobe_multi(KSYMS, prog, mode=MultiMode.MULTI)
            return
        with pytest.raises(NotFoundError, match="no_such_function_xyz"):
            link.kprobe_multi(["__x64_sys_getppid", "no_such_function_xyz"], prog, mode=MultiMode.MULTI)
        # The section's pattern is matched against available_filter_functions, which lists
        # one of the aliases __x64_sys_getppid/__do_sys_getppid (Debian 6.12: the latter):
        # pick the one listed, and auto-attach a pattern that matches it alone.
        name = next(n for n in link.multi.kernel_functions() if n.endswith("sys_getppid"))
        with link.attach_section(coll.programs["kp_auto"], f"kprobe.multi/{name[:-1]}?") as lk:
            assert isinstance(lk, link.KprobeMultiLink) and lk.targets == (name,)
            _syscall_counts("getppid", 4)
            assert hits(coll) == {3000: 4}
