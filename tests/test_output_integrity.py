# SPDX-License-Identifier: Apache-2.0
"""Outputs an attacker cannot bend (issue 35, items 2 and 10).

Files: a symlink another user plants at the output's name, at the fixed or predictable
temporary names older bpfkit used (``F.tmp``, ``F.tmp<pid>``), or in a man page directory,
never makes bpfkit write through it: the link's target is left as it was.

Contents: names from objects and binaries (an ELF symbol holding a newline, a control
character, ESC; a section name holding a terminal escape sequence) cannot forge lines of a
folded file, make the SVG flame graph invalid XML, put a lone surrogate into pprof's
protobuf strings, or reach a terminal as an escape sequence.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bpfkit.profile import Profile, to_folded, write_profile

from .clang_objects import CLANG, build_c

VICTIM_TEXT = "root's file, not to be overwritten\n"
# What flamegraph.pl reads of a line (stackcollapse's output): the stack, then the count.
FOLDED_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")
# Names as a hostile ELF symbol table may spell them.
HOSTILE = [
    "f\nFAKE;INJECTED 99999999",        # forges a line (and a frame) in folded output
    "ctl\x01\x02\x7f",                  # C0 controls and DEL: not allowed in XML 1.0, even as &#1;
    "term\x1b]0;owned\x07\x1b[2J",      # terminal escape sequences (OSC title, clear screen)
    "c1\x85\x9b31m",                    # C1: NEL (a line break to splitlines), 8-bit CSI
    "sep\u2028\u2029",                  # Unicode line and paragraph separators
    "bidi\u202etxt.exe",                # a right-to-left override (Trojan Source)
    "sur\udcff",                        # a lone surrogate: not UTF-8, refused by protobuf
    "nonchar\ufffe\uffff",              # not characters in XML 1.0
    "cr\rtab\t<&\"'>;",                 # CR, tab, XML's specials, the folded separator
]
ACTING = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\ud800-\udfff\ufffe\uffff]")


def _victim(tmp_path: Path, name: str = "victim") -> Path:
    victim = tmp_path / name
    victim.write_text(VICTIM_TEXT)
    return victim


def _plant(link: Path, victim: Path) -> None:
    link.symlink_to(victim)


def _bpfkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The bpfkit of this interpreter, as a command."""
    return subprocess.run([sys.executable, "-m", "bpfkit.cli", *args], capture_output=True, text=True, check=False,
                          cwd=cwd, timeout=120)


# ------------------------------------------------------------------------------ symlinked outputs
def test_gen_skeleton_writes_through_no_planted_symlink(tmp_path: Path) -> None:
    obj = tmp_path / "prog.bpf.o"
    obj.write_bytes(build_c('SEC("xdp") int prog(void *c) { return 2; }\n', tmp_path))
    out = tmp_path / "prog_skel.py"
    victims = {}
    # F.tmp was the fixed temporary name; F itself a symlink is replaced, not followed.
    for name in ("prog_skel.py.tmp", "prog_skel.py"):
        victims[name] = _victim(tmp_path, f"victim-{name}")
        _plant(tmp_path / name, victims[name])
    before = set(os.listdir(tmp_path))
    proc = _bpfkit("gen", "skeleton", str(obj), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    for victim in victims.values():
        assert victim.read_text() == VICTIM_TEXT
    assert not out.is_symlink() and "class " in out.read_text()
    assert set(os.listdir(tmp_path)) == before  # no temporary file left
    assert (out.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("suffix", [".folded", ".svg", ".speedscope.json", ".pprof"])
def test_profile_writes_through_no_planted_symlink(tmp_path: Path, suffix: str) -> None:
    if suffix == ".pprof":
        pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    out = tmp_path / f"profile{suffix}"
    prof = Profile()
    prof.add(["a", "b"], 3)
    victims = []
    # F.tmp<pid> was the predictable temporary name of this process.
    for name in (f"{out.name}.tmp{os.getpid()}", out.name):
        victims.append(_victim(tmp_path, f"victim-{name}"))
        _plant(tmp_path / name, victims[-1])
    before = set(os.listdir(tmp_path))
    write_profile(prof, str(out))
    for victim in victims:
        assert victim.read_text() == VICTIM_TEXT
    assert not out.is_symlink() and out.stat().st_size > 0
    assert set(os.listdir(tmp_path)) == before


def test_man_pages_write_through_no_planted_symlink(tmp_path: Path) -> None:
    pages = tmp_path / "man1"
    pages.mkdir()
    victim = _victim(tmp_path)
    _plant(pages / "bpfkit.1", victim)
    _plant(pages / "bpfkit-attach.1", victim)
    proc = _bpfkit("man", "--directory", str(pages))
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == VICTIM_TEXT
    assert not (pages / "bpfkit.1").is_symlink() and (pages / "bpfkit.1").read_text().startswith(".")
    assert all(not p.name.startswith(".") for p in pages.iterdir())  # no temporary file left


# ------------------------------------------------------------------------------ hostile frame names
def _hostile_profile() -> Profile:
    prof = Profile(name="hostile\x1b[2J")
    for i, name in enumerate(HOSTILE):
        prof.add(["comm", name, f"leaf{i}"], 10 + i)
    return prof


def _check_folded(text: str, prof: Profile) -> None:
    lines = text.split("\n")
    assert lines[-1] == ""
    assert len(lines) - 1 == len(prof.stacks)  # one line per stack: nothing forged
    for line in lines[:-1]:
        assert not ACTING.search(line), line
        m = FOLDED_LINE.match(line)
        assert m, line
        frames = m.group(1).split(";")
        assert len(frames) == 3 and frames[0] == "comm" and frames[2].startswith("leaf"), line
    assert not any(line.startswith("FAKE") for line in lines)
    assert "comm;f\\x0aFAKE:INJECTED 99999999;leaf0 10" in lines


def test_folded_keeps_one_frame_per_field_and_one_stack_per_line(tmp_path: Path) -> None:
    prof = _hostile_profile()
    _check_folded(to_folded(prof), prof)
    out = tmp_path / "p.folded"
    write_profile(prof, str(out))
    _check_folded(out.read_bytes().decode("utf-8"), prof)  # valid UTF-8: the surrogate is escaped


def test_svg_is_well_formed_xml_whatever_the_names(tmp_path: Path) -> None:
    one = Profile()
    one.add(["comm", "ctl\x01"], 1)  # \x01 alone made the graph invalid XML
    write_profile(one, str(tmp_path / "one.svg"))
    ET.parse(tmp_path / "one.svg")
    out = tmp_path / "p.svg"
    write_profile(_hostile_profile(), str(out), title="title\x01\x1b")
    root = ET.fromstring(out.read_bytes())  # raises on any character XML 1.0 forbids
    names = [g.get("data-n") or "" for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("data-n")]
    assert "f\\x0aFAKE;INJECTED 99999999" in names and "ctl\\x01\\x02\\x7f" in names
    assert "cr\\x0dtab\\x09<&\"'>;" in names  # escaped for XML, read back as the name
    assert not any(ACTING.search(n) for n in names)
    texts = "".join(root.itertext())
    assert "title\\x01\\x1b" in texts and not ACTING.search(texts.replace("\n", ""))


def test_pprof_strings_are_utf8_without_controls(tmp_path: Path) -> None:
    pytest.importorskip("google.protobuf", reason="pprof output needs the protobuf package")
    from bpfkit.profile.pprof import from_pprof, profile_message_class

    out = tmp_path / "p.pb.gz"
    write_profile(_hostile_profile(), str(out))
    raw = out.read_bytes()
    msg = profile_message_class().FromString(gzip.decompress(raw))
    for s in msg.string_table:
        s.encode("utf-8")
        assert not ACTING.search(s), s
    back = from_pprof(raw)
    assert ("comm", "sur\\udcff", "leaf6") in back.stacks


def test_speedscope_json_escapes_and_names_are_visible(tmp_path: Path) -> None:
    out = tmp_path / "p.speedscope.json"
    write_profile(_hostile_profile(), str(out))
    text = out.read_bytes().decode("ascii")  # json.dumps escapes everything outside ASCII
    doc = json.loads(text)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert "f\\x0aFAKE;INJECTED 99999999" in names
    assert not any(ACTING.search(n) for n in names) and not ACTING.search(doc["name"])


def test_save_prints_top_frames_visibly() -> None:
    from bpfkit.profile import save

    prof = Profile()
    prof.add(["comm", "term\x1b[2J"], 5)
    err = io.StringIO()
    real = sys.stdout
    sys.stdout = io.StringIO()
    try:
        save(prof, "-", stream=err)
        folded = sys.stdout.getvalue()
    finally:
        sys.stdout = real
    assert folded == "comm;term\\x1b[2J 5\n"
    assert "\x1b" not in err.getvalue() and "term\\x1b[2J" in err.getvalue()


_HOSTILE_C = r"""
#include <stdio.h>
#include <unistd.h>
#define F(name, label) __attribute__((noinline)) void name(void) __asm__(label); \
    __attribute__((noinline)) void name(void) { __asm__ volatile(""); }
F(nl, "f\nFAKE;INJECTED 99999999")
F(ctl, "ctl@1@")
F(esc, "esc@27@[2J")
int main(void) {
    printf("%p %p %p\n", (void *)nl, (void *)ctl, (void *)esc);
    fflush(stdout);
    pause();
    return 0;
}
"""


def test_real_elf_symbols_through_every_writer(tmp_path: Path) -> None:
    """Symbols of a real binary (clang asm labels: a newline, \\x01, ESC in the names),
    resolved by bpfkit's symbolizer from a running process, through every profile writer."""
    if CLANG is None:
        pytest.skip("needs clang to build the binary")
    from bpfkit.symbols import default_symbolizer

    src, exe = tmp_path / "w.c", tmp_path / "w"
    # Bytes an asm label in C source cannot spell as escapes, written as they are.
    src.write_bytes(_HOSTILE_C.replace("@1@", "\x01").replace("@27@", "\x1b").encode())
    build = subprocess.run([CLANG, "-O1", "-o", str(exe), str(src)], capture_output=True, text=True, check=False)
    if build.returncode:
        pytest.skip(f"clang cannot build a host binary here: {build.stderr[-300:]}")
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        addrs = [int(a, 16) for a in proc.stdout.readline().split()]
        frames = default_symbolizer().user_stack(proc.pid, addrs)
    finally:
        proc.kill()
        proc.wait()
    labels = [f.label for f in frames]
    assert labels == ["f\nFAKE;INJECTED 99999999", "ctl\x01", "esc\x1b[2J"]  # what the binary holds
    prof = Profile()
    for label in labels:
        prof.add(["w", "main", label], 7)
    text = to_folded(prof)
    assert text.count("\n") == 3 and "w;main;f\\x0aFAKE:INJECTED 99999999 7\n" in text
    write_profile(prof, str(tmp_path / "w.svg"))
    ET.parse(tmp_path / "w.svg")


# ------------------------------------------------------------------------------ terminal text
def test_inspect_prints_section_names_visibly(tmp_path: Path) -> None:
    if CLANG is None:
        pytest.skip("needs clang to build the object")
    obj = tmp_path / "hostile.bpf.o"
    # A section name holding ESC, BEL and a newline (clang takes the raw bytes; a '\x1b' escape
    # is refused in a section name's literal).
    section = "xdp/@27@]0;owned@7@@27@[2J\\nFORGED"
    source = f'SEC("{section}") int evil(void *c) {{ return 2; }}\n'.replace("@27@", "\x1b").replace("@7@", "\x07")
    obj.write_bytes(build_c(source, tmp_path))
    proc = _bpfkit("inspect", str(obj))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "xdp/\\x1b]0;owned\\x07\\x1b[2J\\x0aFORGED" in proc.stdout
    assert not any(line.startswith("FORGED") for line in proc.stdout.splitlines())
    # --json: the name as it is, in JSON's own escapes.
    proc = _bpfkit("inspect", "--json", str(obj))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\\u001b" in proc.stdout
    assert json.loads(proc.stdout)["programs"][0]["section"] == "xdp/\x1b]0;owned\x07\x1b[2J\nFORGED"


def test_tables_records_and_show_lines_are_visible() -> None:
    """What prog/map/link list and show print (bpfkit.cli.output), given names with controls."""
    from bpfkit.cli.output import RecordPrinter, print_record, print_table

    out = io.StringIO()
    print_table([{"id": 7, "name": "m\x1b[2J", "tags": ["a\nb"]}], [("id", "ID"), ("name", "NAME"), ("tags", "TAGS")],
                out)
    assert out.getvalue().count("\n") == 2 and "m\\x1b[2J" in out.getvalue() and "a\\x0ab" in out.getvalue()
    real = sys.stdout
    sys.stdout = out = io.StringIO()
    try:
        print_record({"name": "p\x9b31m", "btf": None}, as_json=False)
    finally:
        sys.stdout = real
    assert "p\\x9b31m" in out.getvalue() and "\x9b" not in out.getvalue()
    out = io.StringIO()
    RecordPrinter("ev\x1b", out=out)(b"\x01\x02")
    assert "\x1b" not in out.getvalue() and out.getvalue().startswith("ev\\x1b ")


def test_errors_and_warnings_print_names_visibly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bpfkit.cli.main prints every error and warning: a name in one (here a path) holding ESC
    and a newline prints as escapes; a message's own continuation lines stay lines."""
    from bpfkit.cli.main import _one_line_warning, report
    from bpfkit.errors import UsageError

    proc = _bpfkit("inspect", str(tmp_path / "no\x1b[2Jsuch\n.o"))
    assert proc.returncode != 0 and "\x1b" not in proc.stderr
    # A newline stays a continuation line, indented under the message: it cannot pass for one.
    assert proc.stderr == f"bpfkit: error: inspect {tmp_path}/no\\x1b[2Jsuch\n{' ' * 15}.o: no such file\n"
    report(UsageError("section 'x\x1b]0;t\x07'\nsecond line"), verbose=False)
    _one_line_warning(UserWarning("map 'm\x9b2J' skipped"), UserWarning, "f.py", 1)
    err = capsys.readouterr().err
    assert err == ("bpfkit: error: section 'x\\x1b]0;t\\x07'\n               second line\n"
                   "bpfkit: warning: map 'm\\x9b2J' skipped\n")


def test_attach_refuses_an_output_it_could_not_write_before_loading(tmp_path: Path) -> None:
    """A FIFO, a device or a missing directory as --output is refused at once, not after a
    profile was sampled (the object is not even read: it does not exist here)."""
    os.mkfifo(tmp_path / "p.svg")
    base = ["attach", str(tmp_path / "none.bpf.o"), "profile:hz:99", "--stacks", "counts", "--output"]
    proc = _bpfkit(*base, str(tmp_path / "p.svg"))
    assert proc.returncode != 0 and proc.stderr == (
        f"bpfkit: error: profile {tmp_path}/p.svg is a FIFO: bpfkit writes a new file and renames it onto that "
        "name, which would replace it; give the path of a regular file\n")
    proc = _bpfkit(*base, str(tmp_path / "none" / "p.svg"))
    assert proc.stderr == f"bpfkit: error: write profile {tmp_path}/none/p.svg: no such directory {tmp_path}/none\n"
