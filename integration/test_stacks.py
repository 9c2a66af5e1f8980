# SPDX-License-Identifier: Apache-2.0
"""Stack-trace maps and bpf_get_stack records on the real kernel (bpf/stacks.bpf.c), sampling
the C workload of integration/stack_workload.py (main -> a -> b -> c -> spin) at 99 Hz on every
CPU for 2 s: ``stacks[id]`` gives the addresses, which bpfkit.symbols names; the build-id map
gives (build id, offset) pairs naming the workload's build id; ring-buffer records decoded
with decode_stack give the same stacks."""

from __future__ import annotations

import struct
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bpfkit.symbols import Symbolizer, decode_stack
from integration.stack_workload import CHAIN, Workload, attach_stacks, build, chain_samples, own_name

SECONDS = 2


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build(tmp_path_factory.mktemp("stacks"))


def sample(bpf_obj: Any, binary: Path, sym: Symbolizer, mode: str = "spin") -> dict[str, Any]:
    """Run ``binary`` and sample it for SECONDS; the maps' contents and the records. ``sym``
    reads the process's mappings before it is killed."""
    import bpfkit
    from bpfkit import link
    from bpfkit.events import RingBuffer

    proc = subprocess.Popen([str(binary), mode, "30"])
    try:
        spec = bpfkit.load_spec(str(bpf_obj("stacks")))
        spec.variables["target_tgid"].value = proc.pid
        records: list[tuple[int, list[int]]] = []

        def on_record(view: memoryview) -> None:
            pid, size = struct.unpack_from("<Ii", view, 0)
            records.append((pid, decode_stack(view[8:], size) if size > 0 else []))

        with bpfkit.Collection(spec) as coll, RingBuffer(coll.maps["records"], on_record) as rb:
            with link.perf_event_sample(coll.programs["on_sample"], "cpu-clock", freq=99):
                end = time.monotonic() + SECONDS
                while time.monotonic() < end:
                    rb.poll(timeout=0.2)
            rb.consume()
            counts = list(coll.maps["counts"].items())
            stacks = dict(coll.maps["stacks"].items())
            build_ids = dict(coll.maps["build_ids"].items())
            sym.process_maps(proc.pid)
        return {"pid": proc.pid, "counts": counts, "stacks": stacks, "build_ids": build_ids, "records": records}
    finally:
        proc.kill()
        proc.wait()


def user_chains(got: dict[str, Any], sym: Symbolizer) -> Counter[tuple[str | None, ...]]:
    chains: Counter[tuple[str | None, ...]] = Counter()
    for key, count in got["counts"]:
        assert key.pid == got["pid"]
        ips = got["stacks"].get(key.user_stack_id, []) if key.user_stack_id >= 0 else []
        chains[tuple(f.name for f in sym.user_stack(key.pid, ips))] += count
    return chains


def chain_share(chains: Counter[tuple[str | None, ...]]) -> float:
    total = sum(chains.values())
    good = sum(n for c, n in chains.items() if list(c[:5]) == CHAIN)
    return good / total if total else 0.0


@pytest.mark.parametrize("copy", ["workload", "stripped"])
def test_stack_map_user_stacks(bpf_obj: Any, workload: Workload, copy: str) -> None:
    sym = Symbolizer(debug_root=str(workload.debug_root))
    got = sample(bpf_obj, getattr(workload, copy), sym)
    chains = user_chains(got, sym)
    total = sum(chains.values())
    # 99 Hz x 2 s is at most 198 per CPU the workload runs on; the shared host gives it less.
    assert total >= 20, f"only {total} samples of the workload in {SECONDS} s at 99 Hz"
    assert chain_share(chains) >= 0.9, chains.most_common(5)
    for ips in got["stacks"].values():  # typed values: ints, no trailing zeros
        assert ips and all(isinstance(a, int) and a for a in ips)


def test_build_id_stacks(bpf_obj: Any, workload: Workload) -> None:
    got = sample(bpf_obj, workload.workload, Symbolizer())
    frames = [f for stack in got["build_ids"].values() for f in stack]
    assert frames, "no build-id stacks recorded"
    ours = [f for f in frames if f.build_id == workload.build_id]
    # The workload's frames carry its build id (or just an ip where the kernel could not read
    # it, BPF_STACK_BUILD_ID_IP); their offsets name the chain's functions.
    assert ours or all(f.build_id is None for f in frames), frames[:5]
    if ours:
        fs = Symbolizer().file(str(workload.workload))
        assert fs is not None
        names = {fs.lookup(f.offset)[0] for f in ours if fs.lookup(f.offset)}  # type: ignore[index]
        assert set(CHAIN) <= names, names


def test_ring_buffer_stacks_match_map(bpf_obj: Any, workload: Workload) -> None:
    sym = Symbolizer()
    got = sample(bpf_obj, workload.workload, sym)
    assert got["records"], "no ring-buffer records"
    in_map = {tuple(v) for v in got["stacks"].values()}
    recs = [tuple(ips) for pid, ips in got["records"] if ips]
    assert recs and sum(r in in_map for r in recs) >= 0.9 * len(recs)
    names = [tuple(f.name for f in sym.user_stack(got["pid"], r))[:5] for r in recs]
    assert sum(list(n) == CHAIN for n in names) >= 0.9 * len(names), Counter(names).most_common(3)


def test_bpf_program_symbol(bpf_obj: Any) -> None:
    """A loaded program is in kallsyms as bpf_prog_<tag>_<name> [bpf] (bpf_jit_kallsyms)."""
    import bpfkit
    from bpfkit.symbols import KernelSymbols

    try:
        jit_kallsyms = Path("/proc/sys/net/core/bpf_jit_kallsyms").read_text().strip()
    except OSError:
        jit_kallsyms = "?"
    with bpfkit.Collection(bpfkit.load_spec(str(bpf_obj("stacks")))) as coll:
        info = coll.programs["on_sample"].info()
        name = f"bpf_prog_{bytes(info.tag).hex()}_on_sample"
        ksyms = KernelSymbols.load()
        addr = ksyms.address(name)
        if addr is None and jit_kallsyms != "1":
            pytest.skip(f"BPF programs are not in kallsyms (net.core.bpf_jit_kallsyms={jit_kallsyms})")
        assert addr is not None, name
        found = ksyms.lookup(addr + 8)
        assert found is not None and found.name == name and found.module == "bpf" and found.offset == 8


@pytest.mark.parametrize("suffix", [".folded", ".svg"])
def test_cli_attach_stacks_output(bpf_obj: Any, workload: Workload, tmp_path: Path, suffix: str) -> None:
    """``bpfkit attach OBJ profile:hz:99 --stacks counts --stack-map stacks --output FILE``,
    stopped by SIGINT after SECONDS, writes the workload's stacks (the program samples every
    process here: target_tgid stays 0)."""
    out = tmp_path / f"profile{suffix}"
    exe = own_name(workload, tmp_path)
    proc = subprocess.Popen([str(exe), "spin", "30"])
    try:
        status, rest = attach_stacks(bpf_obj("stacks"), out, SECONDS)
    finally:
        proc.kill()
        proc.wait()
    assert status == 0, rest
    assert f"wrote {out} ({'folded' if suffix == '.folded' else 'svg'}):" in rest
    text = out.read_text()
    if suffix == ".folded":
        total, good = chain_samples(text, exe.name)
        assert total >= 20 and good >= 0.9 * total, text
    else:
        assert 'data-n="spin"' in text and f'data-n="{exe.name}"' in text


def test_cli_stacks_errors(bpf_obj: Any, tmp_path: Path) -> None:
    import sys

    obj = str(bpf_obj("stacks"))

    def run(*args: str) -> str:
        p = subprocess.run([sys.executable, "-m", "bpfkit.cli", "attach", obj, "profile:hz:99", *args],
                           capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode != 0
        return p.stderr.strip()

    assert run("--stacks", "counts", "--stack-map", "build_ids", "--output", "p.svg") == (
        f"bpfkit: error: --stack-map build_ids: not a BPF_MAP_TYPE_STACK_TRACE map of addresses in {obj} "
        "(those are: stacks; build-id stack maps hold (build id, offset) pairs)")
    assert run("--stacks", "nope", "--output", "p.svg") == (
        f"bpfkit: error: --stacks nope: no map 'nope' in {obj} (it has: build_ids, records, counts, stacks, .rodata)")
    assert run("--stacks", "counts", "--output", "p.png").startswith("bpfkit: error: --output p.png: unknown format")
    assert run("--stacks", "counts") == "bpfkit: error: --stacks MAP and --output FILE go together"


def test_exited_process_named_through_tracker(bpf_obj: Any, workload: Workload) -> None:
    """A process that exits before the maps are read: its user stacks are still named, from
    the mappings the process tracker kept (bpfkit.events.ProcessTracker)."""
    import bpfkit
    from bpfkit import link
    from bpfkit.events import ProcessTracker
    from bpfkit.profile import from_maps

    with ProcessTracker() as tracker:
        proc = subprocess.Popen([str(workload.workload), "spin", "2"])  # SIGALRM after 2 s
        spec = bpfkit.load_spec(str(bpf_obj("stacks")))
        spec.variables["target_tgid"].value = proc.pid
        with bpfkit.Collection(spec) as coll:
            with link.perf_event_sample(coll.programs["on_sample"], "cpu-clock", freq=99):
                proc.wait(timeout=30)
            tracker.sync()
            assert not Path(f"/proc/{proc.pid}").exists()
            sym = Symbolizer()
            gone = from_maps(coll.maps["counts"], coll.maps["stacks"], symbolizer=sym, kernel=False)
            kept = from_maps(coll.maps["counts"], coll.maps["stacks"], symbolizer=sym, kernel=False,
                             tracker=tracker)
    assert all("spin" not in s for s in gone.stacks), gone.stacks  # /proc/PID/maps is gone
    total = kept.total
    good = sum(n for s, n in kept.stacks.items() if list(s[-5:]) == CHAIN[::-1])
    assert total >= 20 and good >= 0.9 * total, kept.stacks.most_common(3)
