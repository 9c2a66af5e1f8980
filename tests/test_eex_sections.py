# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter's section names, auto-attached: ``SEC("perf_event/type=T,config=C,frequency=F")``
(exporter/perf_event.go: the counter sampled on every online CPU, all threads) and
``SEC("xdp/IFACE")`` (exporter/xdp.go: XDP on that interface), beside libbpf's names that keep
their meaning (a bare ``perf_event`` and ``xdp``, ``xdp/devmap``, ``xdp/cpumap``).

The kernel tests use bpf/eex_sections.bpf.c (cpu-clock at 99 Hz counted into ``counts[0]``;
frames of EtherType 0x88B5 on ``eexsec0`` counted into ``counts[1]``) and
bpf/eex_sections_bad.bpf.c (sections to refuse). The XDP interface is one end of a veth pair the
test makes in a network namespace of its own (``bpfkit_eex_<pid>``): another copy of the suite
makes its own namespace, and the interface names never meet. Frames are sent from the other end
through a packet socket, so counts are exact.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bpfkit
from bpfkit import features, link
from bpfkit._kernel.consts import BPF_F_XDP_HAS_FRAGS, AttachType, ProgType
from bpfkit._kernel.cpus import online_cpus
from bpfkit.errors import NotFoundError, NotSupportedError, ParseError, UsageError
from bpfkit.link.sampling import SamplingGroup
from bpfkit.sections import (
    REGISTERED_SECTION_DEFS,
    SECTION_DEFS,
    PerfEventSection,
    match_section,
    parse_perf_event_section,
)
from conftest import bpf_ids_held_by, console_script, links_running, start_attached

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
IFACE, PEER = "eexsec0", "eexpeer0"  # the names bpf/eex_sections.bpf.c's SEC("xdp/eexsec0") uses
ETHERTYPE = 0x88B5  # IEEE 802 local experimental: only the test sends it
FRAMES = 25
CPU_CLOCK_HZ = 99
PERF_TYPE_MAX = 6  # enum perf_type_id's end: types from there on are PMUs the kernel numbered
SLOT_SAMPLES, SLOT_FRAMES = 0, 1


# ------------------------------------------------------------------ the section table
@pytest.mark.parametrize("section, prog_type, attach_type, attach_to, row", [
    ("perf_event/type=1,config=0,frequency=99", ProgType.PERF_EVENT, AttachType.PERF_EVENT,
     "type=1,config=0,frequency=99", "perf_event/"),
    ("xdp/eth0", ProgType.XDP, AttachType.XDP, "eth0", "xdp/"),
    ("xdp/lo", ProgType.XDP, AttachType.XDP, "lo", "xdp/"),
    # libbpf's own names keep their meaning: its table comes first.
    ("perf_event", ProgType.PERF_EVENT, None, "", "perf_event"),
    ("xdp", ProgType.XDP, AttachType.XDP, "", "xdp"),
    ("xdp/devmap", ProgType.XDP, AttachType.XDP_DEVMAP, "", "xdp/devmap"),
    ("xdp/cpumap", ProgType.XDP, AttachType.XDP_CPUMAP, "", "xdp/cpumap"),
    ("xdp.frags/devmap", ProgType.XDP, AttachType.XDP_DEVMAP, "", "xdp.frags/devmap"),
])
def test_sections_match(section: str, prog_type: ProgType, attach_type: AttachType | None, attach_to: str,
                        row: str) -> None:
    info = match_section(section)
    assert (info.prog_type, info.attach_type, info.attach_to) == (prog_type, attach_type, attach_to)
    assert info.definition is not None and info.definition.sec == row
    assert info.prog_flags == (BPF_F_XDP_HAS_FRAGS if "frags" in section else 0) and info.autoload


def test_registered_names_stay_out_of_libbpfs_table() -> None:
    assert [d.sec for d in REGISTERED_SECTION_DEFS] == ["perf_event/", "xdp/"]
    assert not {d.sec for d in REGISTERED_SECTION_DEFS} & {d.sec for d in SECTION_DEFS}
    assert match_section("?perf_event/type=1,frequency=1").autoload is False
    assert match_section("perf_eventX/type=1").prog_type == ProgType.UNSPEC


# ------------------------------------------------------------- perf_event/ITEM=N,...
@pytest.mark.parametrize("section, expected", [
    ("perf_event/type=1,config=0,frequency=99", PerfEventSection(1, 0, 99)),
    ("perf_event/frequency=1,config=3,type=0", PerfEventSection(0, 3, 1)),  # any order
    ("perf_event/frequency=49", PerfEventSection(0, 0, 49)),  # ebpf_exporter's zeroed attr: type and config 0
    ("?perf_event/type=4294967295,config=18446744073709551615,frequency=7",
     PerfEventSection(2**32 - 1, 2**64 - 1, 7)),
])
def test_perf_event_items(section: str, expected: PerfEventSection) -> None:
    assert parse_perf_event_section(section) == expected


@pytest.mark.parametrize("section, says", [
    ("perf_event/type=1,config=0,frequency=99,period=5", "unknown item 'period=5' (known: type, config, frequency)"),
    ("perf_event/Type=1,frequency=99", "unknown item 'Type=1'"),
    ("perf_event/type=software,frequency=99", "item 'type=software': 'software' is not a decimal integer"),
    ("perf_event/type=0x1,frequency=99", "item 'type=0x1': '0x1' is not a decimal integer"),
    ("perf_event/type=-1,frequency=99", "item 'type=-1': '-1' is not a decimal integer"),
    ("perf_event/type=+1,frequency=99", "item 'type=+1'"),
    ("perf_event/type=1_0,frequency=99", "item 'type=1_0'"),
    ("perf_event/type= 1,frequency=99", "item 'type= 1'"),
    ("perf_event/type=,frequency=99", "item 'type=': '' is not a decimal integer"),
    ("perf_event/type=1,,frequency=99", "item '' is not KEY=VALUE"),
    ("perf_event/type=1,frequency=99,", "item '' is not KEY=VALUE"),
    ("perf_event/", "item '' is not KEY=VALUE"),
    ("perf_event/type", "item 'type' is not KEY=VALUE"),
    ("perf_event/=1", "item '=1' is not KEY=VALUE"),
    ("perf_event/type=1,type=2,frequency=9", "item 'type' is given twice"),
    ("perf_event/type=4294967296,frequency=9", "type is at most 4294967295"),
    ("perf_event/type=1,config=0", "no frequency=F item"),
    ("perf_event/type=1,frequency=0", "frequency=0 never samples"),
])
def test_perf_event_items_refused(section: str, says: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_perf_event_section(section)
    assert str(caught.value).startswith(f"section {section!r}: "), caught.value
    assert says in str(caught.value)


# ------------------------------------------------------------ what auto-attach does
@pytest.mark.parametrize("section", ["perf_event/type=1,config=0,frequency=99", "perf_event/bogus",
                                     "xdp/eth0", "?xdp/eth0"])
def test_sections_naming_a_target_are_attached(section: str) -> None:
    assert link.skip_reason(section) is None


@pytest.mark.parametrize("section, says", [
    ("perf_event", "bpfkit.link.perf_event_sample"),  # as before: the counter is a run-time choice
    ("xdp", "bpfkit.link.xdp"),
    ("xdp/devmap", "devmap/cpumap entry"),
    ("xdp/cpumap", "devmap/cpumap entry"),
    ("?xdp/devmap", "devmap/cpumap entry"),
])
def test_sections_naming_none_are_passed_over(section: str, says: str) -> None:
    reason = link.skip_reason(section)
    assert reason is not None and reason.startswith(f"section {section!r} is never auto-attached: ")
    assert says in reason
    # Asked to attach one anyway, the attach path refuses before looking at the program or
    # for an interface named "devmap".
    with pytest.raises(NotSupportedError, match=re.escape(f"auto-attach of section {section!r}")):
        link.attach_section(-1, section)


def test_other_xdp_variants_are_unchanged() -> None:
    assert link.skip_reason("xdp.frags/devmap") == "section 'xdp.frags/devmap' is not a kind auto-attach handles"
    assert link.skip_reason("xdp.frags") == "section 'xdp.frags' is not a kind auto-attach handles"


# ======================================================================= on the kernel
def _u64(raw: Any) -> int:
    return raw if isinstance(raw, int) else int.from_bytes(bytes(raw)[:8], "little")


def count(coll: bpfkit.Collection, slot: int) -> int:
    return _u64(coll.maps["counts"].lookup(slot))


def perf_event_fds() -> set[int]:
    """This process's fds on perf events (anon_inode:[perf_event])."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[perf_event]":
                found.add(int(name))
        except OSError:
            continue
    return found


def burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.fixture
def sections(bpf_obj: Any) -> Iterator[bpfkit.Collection]:
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("eex_sections"))) as coll:
        yield coll


@pytest.fixture
def bad(bpf_obj: Any) -> Iterator[bpfkit.Collection]:
    with bpfkit.Collection(bpfkit.load_spec(bpf_obj("eex_sections_bad"))) as coll:
        yield coll


@pytest.mark.root
def test_perf_event_section_samples_every_online_cpu(sections: bpfkit.Collection) -> None:
    cpus = online_cpus()
    fds_before, perf_before = len(os.listdir("/proc/self/fd")), perf_event_fds()
    start = time.monotonic()
    with sections.attach_all(programs=["eex_cpu_clock"]) as links:
        group = links["eex_cpu_clock"]
        assert isinstance(group, SamplingGroup)  # a group even on one CPU
        assert len(group) == len(cpus)
        assert group.description.startswith(f"perf_event cpu-clock {CPU_CLOCK_HZ} Hz on CPUs ")
        assert group.description.endswith(" (section perf_event/type=1,config=0,frequency=99)")
        assert len(perf_event_fds() - perf_before) == len(cpus)  # one perf event per CPU
        infos = group.info()
        assert len(infos) == len(cpus)
        for info in infos:
            assert info.program_id == sections.programs["eex_cpu_clock"].id
            if info.detail is not None and info.detail.detail is not None:  # 6.6+ reports the event
                # PERF_TYPE_SOFTWARE's CPU_CLOCK; 6.18 reports cpu-clock (and task-clock) under
                # the type of the kernel's own cpu_clock PMU instead (measured: 6; 7 for
                # task-clock), page-faults and the other software events under 1.
                event = info.detail.detail
                assert event.config == 0 and (event.type == 1 or event.type >= PERF_TYPE_MAX), event
        burn(0.4)
        first = count(sections, SLOT_SAMPLES)
        burn(0.3)
        second = count(sections, SLOT_SAMPLES)
        elapsed = time.monotonic() - start
    assert first > 0 and second > first  # samples keep coming while it burns CPU
    # cpu-clock turns frequency=99 into a fixed 1/99 s period on each CPU
    # (perf_swevent_init_hrtimer): never more than that rate on every CPU.
    assert second <= CPU_CLOCK_HZ * len(cpus) * elapsed * 1.25 + 2 * len(cpus), (second, elapsed)
    # And at least the CPU burning: a quarter of its rate (this host shares its CPUs with VMs).
    assert second >= CPU_CLOCK_HZ * elapsed * 0.25, (second, elapsed)
    assert perf_event_fds() == perf_before  # every perf event closed with the group
    assert len(os.listdir("/proc/self/fd")) == fds_before
    after = count(sections, SLOT_SAMPLES)
    burn(0.2)
    assert count(sections, SLOT_SAMPLES) == after  # detached: no sample since


@pytest.mark.root
def test_pid_follows_one_process(sections: bpfkit.Collection) -> None:
    """attach_all(pid=N) (``bpfkit attach --pid N``) samples that process only, as the
    profile:/software: probe specs do: one event following it onto any CPU, still a group."""
    perf_before = perf_event_fds()
    with sections.attach_all(programs=["eex_cpu_clock"], pid=os.getpid()) as links:
        group = links["eex_cpu_clock"]
        assert isinstance(group, SamplingGroup) and len(group) == 1
        assert group.description == (f"perf_event cpu-clock {CPU_CLOCK_HZ} Hz for pid {os.getpid()} "
                                     "(section perf_event/type=1,config=0,frequency=99)")
        assert len(perf_event_fds() - perf_before) == 1
        burn(0.3)
        assert count(sections, SLOT_SAMPLES) > 0
    assert perf_event_fds() == perf_before


EMFILE_SCRIPT = """
import os, resource, sys, bpfkit
from bpfkit import link
from bpfkit.errors import KernelError
with bpfkit.Collection(bpfkit.load_spec(sys.argv[1])) as coll:
    link.have_perf_link()  # the cached feature probe opens fds: before the limit
    link.skip_reason("perf_event/x")  # imports the sampling kind before the limit
    before = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    free = [i for i in range(100000) if i not in before]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Room for the first CPU's perf event and bpf_link (the two lowest free fds), not the second's.
    resource.setrlimit(resource.RLIMIT_NOFILE, (free[1] + 1, hard))
    try:
        coll.attach_all(programs=["eex_cpu_clock"])
    except KernelError as exc:
        print("ERROR", exc)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    after = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    print("LEAKED", sorted(set(after) - set(before)))
"""


@pytest.mark.root
def test_a_cpu_failing_half_way_leaves_nothing(bpf_obj: Any) -> None:
    """A real EMFILE on the second CPU's perf event (in a child: the limit stays there): the
    first CPU's event and link are closed, and the error names the program and section."""
    if len(online_cpus()) < 2:
        pytest.skip("needs two online CPUs to fail after the first")
    proc = subprocess.run([sys.executable, "-c", EMFILE_SCRIPT, str(bpf_obj("eex_sections"))],
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["ERROR"].startswith("auto-attach program 'eex_cpu_clock': section "
                                     "'perf_event/type=1,config=0,frequency=99': sample cpu-clock: "), lines
    assert "EMFILE" in lines["ERROR"] and "out of file descriptors after 1 perf event(s)" in lines["ERROR"], lines
    assert lines["LEAKED"] == "[]", lines


@pytest.mark.root
@pytest.mark.parametrize("program, says", [
    ("eex_unknown_item", "section 'perf_event/type=1,config=0,frequency=99,period=5': unknown item 'period=5'"),
    ("eex_not_integer", "section 'perf_event/type=software,config=0,frequency=99': item 'type=software': "
                        "'software' is not a decimal integer"),
    ("eex_no_frequency", "section 'perf_event/type=1,config=0': no frequency=F item"),
])
def test_bad_perf_event_sections_are_refused(bad: bpfkit.Collection, program: str, says: str) -> None:
    perf_before = perf_event_fds()
    with pytest.raises(ParseError) as caught:
        bad.attach_all(programs=[program])
    assert str(caught.value).startswith(f"auto-attach program {program!r}: {says}"), caught.value
    assert perf_event_fds() == perf_before


@pytest.mark.root
def test_hardware_counter_sections(sections: bpfkit.Collection) -> None:
    """ebpf_exporter's examples sample hardware counters (type=0: config=3 cache misses): on a
    host with a PMU they attach on every CPU; without one (this host, a VM) the error names the
    section and the event, and no perf event is left open."""
    prog, section = sections.programs["eex_cpu_clock"], "perf_event/type=0,config=3,frequency=1"
    perf_before = perf_event_fds()
    if features.probe("hardware_pmu").supported:
        with link.attach_section(prog, section) as group:
            assert len(group) == len(online_cpus()) and "cache-misses 1 Hz" in group.description
    else:
        with pytest.raises(NotSupportedError) as caught:
            link.attach_section(prog, section)
        assert str(caught.value).startswith(f"section {section!r}: sample cache-misses: hardware event "
                                            "cache-misses on CPU "), caught.value
    assert perf_event_fds() == perf_before


@pytest.mark.root
def test_a_frequency_above_the_kernels_limit(sections: bpfkit.Collection) -> None:
    from bpfkit._kernel import perf

    limit = perf.max_sample_rate()
    if limit is None:
        pytest.skip("no kernel.perf_event_max_sample_rate to read")
    section = f"perf_event/type=1,config=0,frequency={limit + 1}"
    with pytest.raises(UsageError) as caught:
        link.attach_section(sections.programs["eex_cpu_clock"], section)
    assert str(caught.value).startswith(f"section {section!r}: sample cpu-clock: sample frequency {limit + 1} Hz "
                                        f"is above kernel.perf_event_max_sample_rate ({limit} Hz)"), caught.value


# ------------------------------------------------------------------------------- XDP
def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


class VethNamespace:
    """A network namespace of the test's own holding a veth pair, IFACE <-> PEER, both up."""

    def __init__(self) -> None:
        from bpfkit._kernel import netlink as nl

        self.name = f"bpfkit_eex_{os.getpid()}"
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)  # a crashed run's
        _ip("netns", "add", self.name)
        try:
            self.ns = nl.Netns.open(self.name)
            _ip("-n", self.name, "link", "add", IFACE, "type", "veth", "peer", "name", PEER)
            for dev in (IFACE, PEER):
                _ip("-n", self.name, "link", "set", dev, "up")
        except BaseException:
            self.close()
            raise

    def send(self, n: int) -> None:
        """``n`` broadcast frames of EtherType ETHERTYPE out of PEER (so into IFACE)."""
        sock = self.ns.run(socket.socket, socket.AF_PACKET, socket.SOCK_RAW, 0)
        with sock:
            sock.bind((PEER, 0))
            src = sock.getsockname()[4]  # PEER's MAC address
            for i in range(n):
                frame = b"\xff" * 6 + src + ETHERTYPE.to_bytes(2, "big") + b"bpfkit-eex" + i.to_bytes(4, "big")
                sock.send(frame.ljust(60, b"\0"))

    def xdp_prog_id(self) -> int:
        return link.xdp_query(IFACE, netns=self.name).prog_id

    def close(self) -> None:
        ns = getattr(self, "ns", None)
        if ns is not None:
            ns.close()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)


@pytest.fixture
def veth() -> Iterator[VethNamespace]:
    net = VethNamespace()
    try:
        yield net
    finally:
        net.close()


def wait_for(check: Any, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.root
def test_xdp_section_goes_on_its_interface(sections: bpfkit.Collection, veth: VethNamespace) -> None:
    prog = sections.programs["eex_xdp_frames"]
    # ebpf_exporter looks the interface up in its own namespace: attach from a thread in there.
    links = veth.ns.run(sections.attach_all, programs=["eex_xdp_frames", "eex_devmap"])
    with links:
        lk = links["eex_xdp_frames"]
        assert isinstance(lk, (link.XdpLink, link.XdpNetlinkLink))
        assert lk.iface == IFACE
        assert veth.xdp_prog_id() == prog.id
        assert "devmap/cpumap entry" in links.skipped["eex_devmap"]
        veth.send(FRAMES)
        assert wait_for(lambda: count(sections, SLOT_FRAMES) >= FRAMES)
        time.sleep(0.1)
        assert count(sections, SLOT_FRAMES) == FRAMES  # only the test's frames, each once
    assert veth.xdp_prog_id() == 0
    veth.send(3)
    time.sleep(0.1)
    assert count(sections, SLOT_FRAMES) == FRAMES


@pytest.mark.root
def test_xdp_section_on_a_missing_interface(bad: bpfkit.Collection, veth: VethNamespace) -> None:
    for where in (veth.ns.run, lambda fn, **kw: fn(**kw)):  # the test's namespace, and this one
        with pytest.raises(NotFoundError) as caught:
            where(bad.attach_all, programs=["eex_no_iface"])
        assert str(caught.value).startswith("auto-attach program 'eex_no_iface': section 'xdp/eexnowhere0': "
                                            "no network interface 'eexnowhere0' in the current network namespace")


# ------------------------------------------------------------------------- bpfkit attach
@pytest.mark.root
def test_cli_attaches_both_sections(bpf_obj: Any, veth: VethNamespace) -> None:
    """``bpfkit attach OBJ`` in the namespace (``ip netns exec``): the perf_event program on every
    CPU, the XDP program on eexsec0, notes for the two sections it passes over; SIGTERM detaches
    all of it."""
    cpus = online_cpus()
    cmd = ["ip", "netns", "exec", veth.name, console_script(), "attach", str(bpf_obj("eex_sections"))]
    proc, lines = start_attached(cmd, env=ENV)
    try:
        text = "".join(lines)
        assert re.search(r"attached eex_cpu_clock: .*cpu-clock 99 Hz on CPUs", text), text
        assert re.search(r"attached eex_xdp_frames: .*eexsec0", text), text
        assert "skipped program eex_bare_perf_event: section 'perf_event' is never auto-attached" in text, text
        assert "skipped program eex_devmap: section 'xdp/devmap' is never auto-attached" in text, text
        assert "2 program(s) attached" in text, text
        progs, link_ids = bpf_ids_held_by(proc.pid)
        running = links_running(progs, link_ids)
        assert sorted(name for name, _ in running) == ["eex_cpu_clock"] * len(cpus) + ["eex_xdp_frames"], running
        assert veth.xdp_prog_id() in progs
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "detached" in out, out
    assert links_running(progs, link_ids) == []
    assert veth.xdp_prog_id() == 0


@pytest.mark.root
def test_cli_names_the_bad_section(bpf_obj: Any) -> None:
    proc = subprocess.run([console_script(), "attach", str(bpf_obj("eex_sections_bad")), "--program",
                           "eex_unknown_item"], capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert proc.returncode != 0
    assert ("auto-attach program 'eex_unknown_item': section 'perf_event/type=1,config=0,frequency=99,period=5': "
            "unknown item 'period=5' (known: type, config, frequency)") in proc.stderr, proc.stderr
