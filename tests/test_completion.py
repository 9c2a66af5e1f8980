# SPDX-License-Identifier: Apache-2.0
"""``bpfkit completion bash``: the script sourced in a real bash, its completion function driven
as bash drives it (COMP_LINE/COMP_POINT, COMP_WORDS/COMP_CWORD), its candidates checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bpfkit.cli.main import COMMANDS

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the console script the script calls back (`bpfkit completion --programs`)


def _readable_dir(path: Path) -> bool:
    """Whether ``path`` is a directory this user can look into (tracefs is root's: 0700)."""
    try:
        return path.is_dir() and os.access(path, os.R_OK | os.X_OK)
    except OSError:
        return False


TRACEFS = next((p for p in (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing")) if _readable_dir(p / "events")), None)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")

DRIVER = r'''
source "$1"; shift
for line in "$@"; do
    # As bash sets them: COMP_WORDS split at blanks and at COMP_WORDBREAKS' ':' and '='.
    COMP_LINE=$line; COMP_POINT=${#line}
    read -r -a COMP_WORDS <<< "${line//:/ : }"
    [[ $line == *" " ]] && COMP_WORDS+=( "" )
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    _bpfkit bpfkit "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\t' "${COMPREPLY[@]}"; printf '\n'
done
'''


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "bpfkit.bash"
    proc = subprocess.run([str(BIN / "bpfkit"), "completion", "bash"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    path.write_text(proc.stdout)
    return path


def complete(script: Path, *lines: str, cwd: Path = REPO) -> list[list[str]]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", DRIVER, "driver", str(script), *lines],
                          check=False, capture_output=True, text=True, timeout=60, cwd=cwd, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout.split("\n")[:-1]
    assert len(out) == len(lines), proc.stdout
    return [[c for c in row.split("\t") if c] for row in out]


def test_commands_options_and_choices(script: Path) -> None:
    top, at, opts, mode, mode_eq, link, shells, features = complete(
        script, "bpfkit ", "bpfkit at", "bpfkit attach --me", "bpfkit attach x.o --mode ", "bpfkit attach --mode=io",
        "bpfkit link ", "bpfkit completion ", "bpfkit features ringbuf ring")
    assert top == [name for name, _ in COMMANDS]
    assert at == ["attach"]
    assert opts == ["--metrics", "--metrics-config", "--metrics-web-config"]
    assert mode == ["auto", "link", "ioctl"]
    assert mode_eq == ["ioctl"]  # bash replaces the part after '=': the value alone
    assert link == ["list", "show", "pin", "detach"]
    assert shells == ["bash", "zsh"]
    assert features == ["ringbuf", "ringbuf_overwrite"]  # bpfkit.features' names, as many as given


def test_object_files_then_program_and_map_names(script: Path, bpf_obj, tmp_path: Path) -> None:
    (tmp_path / "one.bpf.o").write_bytes(b"")
    (tmp_path / "one.bpf.c").write_text("")
    (tmp_path / "sub").mkdir()
    (objects,) = complete(script, "bpfkit inspect ", cwd=tmp_path)
    assert sorted(objects) == ["one.bpf.o", "sub/"]  # *.o and directories, not the C source
    minimal, events_seq = bpf_obj("minimal"), bpf_obj("events_seq")
    progs, progs_before, maps, bad = complete(
        script, f"bpfkit attach {minimal} -p ", f"bpfkit attach -p c {minimal}", f"bpfkit attach {events_seq} --events r",
        "bpfkit attach /nonexistent.o -p ")
    assert progs == ["count_getppid"]
    assert progs_before == [str(minimal)]  # the object itself, after an option's value
    assert maps == ["rb", "rb2"]
    assert bad == []  # an unreadable object: nothing, and no error on the command line


def test_pinned_paths_under_bpffs(script: Path) -> None:
    bpffs = Path("/sys/fs/bpf")
    if not os.path.ismount(bpffs):
        pytest.skip("bpffs is not mounted on /sys/fs/bpf")
    pin_dir = bpffs / f"bpfkit-completion-{os.getpid()}"
    try:
        pin_dir.mkdir()  # bpffs takes directories (bpf_mkdir), a pin place like any other
    except PermissionError:
        pytest.skip("no permission to make a directory in bpffs (root needed)")
    try:
        start, listed = complete(script, "bpfkit prog show ", f"bpfkit map show {bpffs}/bpfkit-completion-")
    finally:
        pin_dir.rmdir()
    assert start == ["/sys/fs/bpf/"]
    assert listed == [f"{pin_dir}/"]


def test_probe_specs_from_tracefs(script: Path, bpf_obj) -> None:
    if TRACEFS is None or not (TRACEFS / "events/syscalls/sys_enter_openat").is_dir():
        pytest.skip("no tracefs this user can read with the syscalls tracepoints (CONFIG_FTRACE_SYSCALLS; tracefs is root's)")
    obj = bpf_obj("minimal")
    line = f"bpfkit attach {obj} "
    kinds, group, names, raw, funcs = complete(
        script, line + "tr", line + "tracepoint:sysc", line + "tracepoint:syscalls:sys_enter_openat",
        line + "rawtracepoint:sys_ent", line + "kprobe:vfs_rea")
    assert kinds == ["tracepoint:"]
    assert group == ["syscalls:"]  # after the last ':' (what bash replaces)
    assert names == ["sys_enter_openat", "sys_enter_openat2"] or names == ["sys_enter_openat"]
    assert raw == ["sys_enter"]  # raw_syscalls' tracepoint, not the syscalls group's ftrace events
    assert "vfs_read" in funcs and all(f.startswith("vfs_rea") for f in funcs)


# As zsh's _bash_complete (bashcompinit) sets COMP_* before it calls `compgen -F _bpfkit`, whose
# emulation (sh, ksharrays) the function then runs in.
ZSH_DRIVER = r'''
source "$1"; shift
for line in "$@"; do
    words=( ${(z)line} ); [[ $line == *" " ]] && words+=( "" )
    CURRENT=${#words}
    local -x COMP_LINE="$words" COMP_POINT COMP_CWORD
    local -a COMP_WORDS COMPREPLY
    (( COMP_POINT = ${#line} )); (( COMP_CWORD = CURRENT - 1 )); COMP_WORDS=( "${words[@]}" )
    print -r -- "${(pj:\t:)${(f)"$(compgen -F _bpfkit -- ${words[CURRENT]})"}}"
done
'''


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh (scripts/setup.sh installs it)")
def test_zsh_completes_through_bashcompinit(tmp_path: Path, bpf_obj) -> None:
    proc = subprocess.run([str(BIN / "bpfkit"), "completion", "zsh"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "bashcompinit && bashcompinit" in proc.stdout
    script = tmp_path / "bpfkit.zsh"
    script.write_text(proc.stdout)
    obj = bpf_obj("minimal")
    lines = ["bpfkit at", "bpfkit attach --mode=io", f"bpfkit attach {obj} -p ",
             f"bpfkit attach {obj} tracepoint:syscalls:sys_enter_openat"]
    # HOME: compinit writes its dump (.zcompdump) there.
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(tmp_path)}
    run = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "driver", str(script), *lines],
                         check=False, capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    rows = [[c for c in row.split("\t") if c] for row in run.stdout.split("\n")[:-1]]
    assert rows[:3] == [["attach"], ["--mode=ioctl"], ["count_getppid"]]  # zsh replaces the whole word
    if TRACEFS is not None and (TRACEFS / "events/syscalls/sys_enter_openat").is_dir():
        assert "tracepoint:syscalls:sys_enter_openat" in rows[3]


def test_completion_without_a_shell_is_a_usage_error() -> None:
    proc = subprocess.run([str(BIN / "bpfkit"), "completion"], check=False, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, "bpfkit: error: bpfkit completion: name the shell: bpfkit completion bash|zsh\n")
