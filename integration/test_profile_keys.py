# SPDX-License-Identifier: Apache-2.0
"""Profiles from objects keyed the way bcc's and libbpf-tools' tools key their counts (issue
38, item 3), on the real kernel, each on a C workload of integration/stack_workload.py run
under a name of this run's (its comm):

* bpf/profile_libbpf_tools.bpf.c (libbpf-tools' profile: key_t {pid, user_stack_id,
  kern_stack_id, name}, a 4-byte-key hash ``pids`` first, ``stackmap`` unsized) through
  ``bpfkit attach OBJ profile:hz:99 --stacks counts|stackmap``: folded and pprof;
* bpf/profile_offcputime.bpf.c (libbpf-tools' offcputime: the name in val_t {delta, comm},
  the count a time) through ``bpfkit attach OBJ -p 'sched_switch|sched_switch_raw' --stacks
  info``, the workload sleeping 10 ms at a time in spin;
* bpf/profile_bcc.bpf.c (bcc's profile.py: key_t {pid, kernel_ip, user_stack_id,
  kernel_stack_id, name}) through the library (bpfkit.profile.from_maps), kernel_ip the kernel
  stack's innermost frame.

Each object samples only the workload (``--set target_tgid=PID``)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bpfkit.profile import KERNEL_SUFFIX
from conftest import start_attached
from integration.stack_workload import CHAIN, Workload, build, chain_samples, own_name

SECONDS = 2
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("profile_keys"))


def attach(obj: Path, pid: int, *args: str) -> str:
    """``bpfkit attach OBJ --set target_tgid=PID ARGS...`` stopped by SIGINT SECONDS after it
    says it is attached: all it printed (it must exit 0)."""
    cli, seen = start_attached([sys.executable, "-m", "bpfkit.cli", "attach", str(obj), "--set",
                                f"target_tgid={pid}", *args], env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        time.sleep(SECONDS)
        cli.send_signal(signal.SIGINT)
        rest = cli.communicate(timeout=60)[0]
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()
    out = "".join(seen) + rest
    assert cli.returncode == 0, out
    return out


@pytest.mark.parametrize("named,suffix", [("counts", ".folded"), ("stackmap", ".pprof")])
def test_cli_libbpf_tools_profile(bpf_obj: Any, workload: Workload, tmp_path: Path, named: str, suffix: str) -> None:
    """--stacks names the counts map, or the stack-trace map (the counts map is then found by
    its key: not the decoy ``pids``); the unsized stack map is sized with a note."""
    if suffix == ".pprof":
        pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    out = tmp_path / f"p{suffix}"
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "spin", "60"])
    try:
        log = attach(bpf_obj("profile_libbpf_tools"), proc.pid, "profile:hz:99", "--stacks", named,
                     "--output", str(out))
    finally:
        proc.kill()
        proc.wait()
    depth = int(Path("/proc/sys/kernel/perf_event_max_stack").read_text())
    assert (f"stack-trace map stackmap is unsized in {bpf_obj('profile_libbpf_tools')}: value_size = {depth * 8} "
            f"(kernel.perf_event_max_stack {depth} x 8); max_entries = 16384") in log, log
    assert ("--stacks stackmap is the stack-trace map: counting map counts (key struct key_t {pid, user_stack_id, "
            "kern_stack_id, name})" in log) == (named == "stackmap"), log
    assert "samples" in log.splitlines()[-2], log
    if suffix == ".pprof":
        from bpfkit.profile.pprof import from_pprof

        prof = from_pprof(out.read_bytes())
        assert (prof.sample_type, prof.unit) == ("samples", "count")
        total = prof.total
        good = sum(n for stack, n in prof.stacks.items()
                   if stack[0] == exe.name and [f for f in stack if not f.endswith(KERNEL_SUFFIX)][-5:] == CHAIN[::-1])
        assert {stack[0] for stack in prof.stacks} == {exe.name}
    else:
        text = out.read_text()
        total, good = chain_samples(text, exe.name)
        assert all(line.startswith(f"{exe.name};") for line in text.splitlines()), text[:500]
    assert total >= 20 and good >= 0.9 * total, out.read_bytes()[:500]


def test_cli_libbpf_tools_offcputime(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    """The name from the value, the count its delta: microseconds off CPU, said in the
    message and in the pprof sample type; the sleeps are in spin's chain."""
    if platform.machine() != "x86_64":
        pytest.skip("the workload calls nanosleep(2) from spin with x86-64 inline assembly")
    pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    from bpfkit.profile.pprof import from_pprof

    out = tmp_path / "off.pprof"
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "sleep", "60"])
    try:
        log = attach(bpf_obj("profile_offcputime"), proc.pid, "-p", "sched_switch|sched_switch_raw",
                     "--stacks", "info", "--output", str(out))
    finally:
        proc.kill()
        proc.wait()
    assert "stack-trace map stackmap is unsized" in log and "microseconds (off_cpu)" in log, log
    prof = from_pprof(out.read_bytes())
    assert (prof.sample_type, prof.unit) == ("off_cpu", "microseconds")
    assert {stack[0] for stack in prof.stacks} == {exe.name}, prof.stacks.most_common(3)
    good = sum(n for stack, n in prof.stacks.items()
               if [f for f in stack if not f.endswith(KERNEL_SUFFIX)][-5:] == CHAIN[::-1])
    # SECONDS of 10 ms sleeps: about SECONDS x 10^6 us off CPU (half of it on a loaded host).
    assert prof.total >= SECONDS * 500_000, prof.total
    assert good >= 0.9 * prof.total, prof.stacks.most_common(3)
    kernel = [f for stack in prof.stacks for f in stack if f.endswith(KERNEL_SUFFIX)]
    assert any(f.startswith(("schedule", "__schedule")) for f in kernel), kernel[:10]


def test_library_bcc_profile_kernel_ip(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    """bcc's key: found by shape, named by its spellings; a key's kernel_ip is its kernel
    stack's innermost frame (bcc's profile.py inserts it before the walked stack)."""
    import bpfkit
    from bpfkit import link
    from bpfkit.profile import from_maps, stack_key_fields
    from bpfkit.profile.keys import counts_maps
    from bpfkit.symbols import Symbolizer

    spec = bpfkit.load_spec(str(bpf_obj("profile_bcc")))
    assert counts_maps(spec.maps) == ["counts"]
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "getppid", "60"])
    sym = Symbolizer()
    try:
        spec.variables["target_tgid"].set(proc.pid)
        with bpfkit.Collection(spec) as coll:
            with link.perf_event_sample(coll.programs["do_perf_event"], "cpu-clock", freq=99):
                time.sleep(SECONDS)
            counts, stacks = coll.maps["counts"], coll.maps["stack_traces"]
            prof = from_maps(counts, stacks, symbolizer=sym)
            expected = {}
            for key, _ in counts.items():
                _, _, kid, comm = stack_key_fields(key)
                assert comm == exe.name
                if key.kernel_ip and kid is not None and kid >= 0:
                    addrs = stacks[kid]
                    if addrs[0] != key.kernel_ip:  # kernels whose perf-event stacks leave the ip out
                        addrs = [key.kernel_ip, *addrs]
                    expected[key.kernel_ip] = tuple(f.label + KERNEL_SUFFIX for f in reversed(sym.kernel_stack(addrs)))
    finally:
        proc.kill()
        proc.wait()
    assert prof.total >= 20 and {s[0] for s in prof.stacks} == {exe.name}, prof.stacks.most_common(3)
    assert expected, f"no sample in the kernel out of {prof.total} in a getppid(2) loop"
    # Each kernel part ends at the sampled ip's function, once (not repeated where the
    # kernel's stack already starts there, as on 6.x).
    kernel_parts = {tuple(f for f in s if f.endswith(KERNEL_SUFFIX)) for s in prof.stacks}
    assert set(expected.values()) <= kernel_parts, (expected, kernel_parts)


def test_library_libbpf_tools_profile(bpf_obj: Any, workload: Workload, tmp_path: Path) -> None:
    """The library path on libbpf-tools' shapes: counts_maps finds ``counts``, size_stack_map
    sizes ``stackmap`` so the object loads, from_maps reads the key's own spellings."""
    import bpfkit
    from bpfkit import link
    from bpfkit.errors import BPFKitError
    from bpfkit.profile import counts_maps, from_maps, size_stack_map
    from bpfkit.symbols import Symbolizer

    spec = bpfkit.load_spec(str(bpf_obj("profile_libbpf_tools")))
    with pytest.raises(BPFKitError, match=r"stackmap.*value_size and max_entries are 0"):
        bpfkit.Collection(spec.copy()).close()  # unsized, as the object leaves it: the kernel refuses
    [counts] = counts_maps(spec.maps)
    assert size_stack_map(spec.maps["stackmap"])
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "spin", "60"])
    try:
        spec.variables["target_tgid"].set(proc.pid)
        with bpfkit.Collection(spec) as coll:
            with link.perf_event_sample(coll.programs["do_perf_event"], "cpu-clock", freq=99):
                time.sleep(SECONDS)
            prof = from_maps(coll.maps[counts], coll.maps["stackmap"], symbolizer=Symbolizer())
    finally:
        proc.kill()
        proc.wait()
    total, good = chain_samples("".join(f"{';'.join(s)} {n}\n" for s, n in prof.stacks.items()), exe.name)
    assert total == prof.total >= 20 and good >= 0.9 * total, prof.stacks.most_common(3)
