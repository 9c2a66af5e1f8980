# SPDX-License-Identifier: Apache-2.0
"""Typed skeletons (bpfkit.skelgen, bpfkit.skeleton, `bpfkit gen skeleton`), without a kernel:
generation for the examples and several bpf/ objects, the generated modules under mypy --strict
(and mypy catching misuse through them), the committed example skeletons up to date, names that
need care, the spec stage (const volatile knobs set before load) and bpfkit.open's names.

The objects come from `make -C bpf` (scripts/setup.sh); tests skip when they are not built.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

import bpfkit
from bpfkit.errors import BTFValueError, UsageError
from bpfkit.skelgen import RESERVED, generate, skeleton_plan

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bpf/.output"
EXAMPLES = ("syscount", "execsnoop", "runqlat", "funclatency", "opensnoop", "execsnoop_varlen")
# bpf/ objects with maps of every value shape (maps_typed), ring buffer events (cli_opensnoop),
# histograms (hist_syscall_lat), struct_ops, iterators, CO-RE and USDT.
OBJECTS = ("maps_typed", "cli_opensnoop", "hist_syscall_lat", "struct_ops_tcp_ca", "tracing_iter", "core_task",
           "usdt_args", "loader_btf", "events_seq", "loader_mapinmap")
MYPY_CACHE = Path(tempfile.gettempdir()) / "bpfkit-test-skeleton-mypy"  # bpfkit's own types, checked once
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")


def obj(name: str) -> Path:
    path = OUT / "examples" / f"{name}.bpf.o" if name in EXAMPLES else OUT / f"{name}.bpf.o"
    if not path.exists():
        pytest.skip(f"{path} is not built (make -C bpf)")
    return path


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Skeletons of the examples and OBJECTS, written as `bpfkit gen skeleton -o` writes them."""
    out = tmp_path_factory.mktemp("skel")
    for name in EXAMPLES + OBJECTS:
        path = obj(name)
        proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", str(path), "-o",
                               str(out / f"{name}_skel.py")], check=False, capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    return out


def mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    if MYPY is None:
        pytest.skip("needs mypy (pip install -e '.[test]')")
    return subprocess.run([MYPY, "--strict", f"--cache-dir={MYPY_CACHE}", *map(str, paths)],
                          check=False, capture_output=True, text=True, cwd=REPO)


# ------------------------------------------------------------------------ generation
def test_generated_modules_pass_mypy_strict(generated: Path) -> None:
    proc = mypy(*sorted(generated.glob("*.py")))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_checks_code_through_a_skeleton(generated: Path) -> None:
    use = generated / "use_skeletons.py"
    use.write_text(
        "from syscount_skel import Syscount, data_t\n"
        "from cli_opensnoop_skel import CliOpensnoop, event\n"
        "def check(skel: Syscount, op: CliOpensnoop, raw: bytes) -> None:\n"
        "    skel.targ_pid = 'one'\n"                              # a str for a __u32 knob
        "    for pid, value in skel.counts.items():\n"
        "        reveal_type(value)\n"
        "        value.cout\n"                                     # a misspelt field
        "    e = op.decode(event, raw)\n"
        "    reveal_type(e.filename)\n"
        "    reveal_type(skel.total_calls)\n"
        "    skel.sys_enter.no_such_method()\n"
    )
    proc = mypy(use)
    out = proc.stdout
    assert 'use_skeletons.py:4: error: Incompatible types in assignment (expression has type "str", variable has type "int")' in out, out
    assert 'Revealed type is "syscount_skel.data_t"' in out, out
    assert '"data_t" has no attribute "cout"' in out, out
    assert 'use_skeletons.py:9: note: Revealed type is "str | bytes"' in out, out
    assert 'use_skeletons.py:10: note: Revealed type is "int"' in out, out
    assert '"Program" has no attribute "no_such_method"' in out, out
    assert "Found 3 errors" in out, out


@pytest.mark.parametrize("name", EXAMPLES)
def test_committed_example_skeletons_are_current(name: str) -> None:
    """The examples' skeletons are committed (readable, and mypy checks the examples without a
    build); they must be what `bpfkit gen skeleton` writes for the objects of today's sources."""
    folder = "execsnoop" if name == "execsnoop_varlen" else name  # beside execsnoop, in its directory
    committed = REPO / "examples" / folder / f"{name}_skel.py"
    command = f"bpfkit gen skeleton bpf/.output/examples/{name}.bpf.o -o examples/{folder}/{name}_skel.py"
    text = generate(bpfkit.load_spec(obj(name)), object_path=f"../../bpf/.output/examples/{name}.bpf.o", command=command)
    assert committed.read_text() == text, f"regenerate: {command}"


def test_examples_pass_mypy_strict() -> None:
    proc = mypy(REPO / "examples")  # the directory: examples/stacktool.py, which two examples import, too
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_plan_of_execsnoop() -> None:
    plan = skeleton_plan(bpfkit.load_spec(obj("execsnoop")))
    assert [(a.attr, a.name) for a in plan.programs] == [("enter_execve", "enter_execve"), ("exit_execve", "exit_execve")]
    assert [(a.attr, a.key, a.value) for a in plan.maps] == [
        ("execs", "int", "event"), ("events", "bytes", "bytes"), ("rodata", "int", "bytes"), ("bss", "int", "bytes")]
    assert [(a.attr, a.value, a.const) for a in plan.variables] == [
        ("targ_ppid", "int", True), ("ignore_failed", "bool", True), ("dropped", "int", False)]  # empty_event: static
    (rec,) = plan.records  # only the event: not task_struct & co, which CO-RE put in the BTF
    assert (rec.cls, rec.fields) == ("event", (("pid", "int"), ("ppid", "int"), ("uid", "int"), ("retval", "int"),
                                               ("args_count", "int"), ("comm", "str | bytes"),
                                               ("args", "list[str | bytes]")))


def test_names_that_need_care(tmp_path: Path) -> None:
    """A Python keyword, a method of the base class, an enum named like a variable, a struct
    named like a builtin: renamed, and the module still imports and type-checks."""
    from tests.clang_objects import build_c

    raw = build_c("""
enum units { NSEC, USEC };
struct list { __u32 n; };
struct event { struct list items; enum units u; char name[8]; };
const volatile enum units units = USEC;
__u32 load = 0;
int lambda = 1;
struct event *unused_event __attribute__((unused));
struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 4); __type(key, __u32);
         __type(value, struct list); } close SEC(".maps");
SEC("tracepoint/syscalls/sys_enter_getppid") int open(void *ctx) { return load + lambda + units; }
""", tmp_path)
    path = tmp_path / "names.bpf.o"
    path.write_bytes(raw)
    spec = bpfkit.load_spec(path)
    plan = skeleton_plan(spec)
    attrs = {a.name: a.attr for a in plan.attrs}
    assert attrs["open"] == "open_" and attrs["close"] == "close_" and attrs["load"] == "load_"
    assert attrs["lambda"] == "lambda_" and attrs["units"] == "units" and attrs[".bss"] == "bss"
    assert {e.cls for e in plan.enums} == {"units_enum"}
    assert {r.cls for r in plan.records} == {"list_struct", "event"}
    assert {a.attr: a.value for a in plan.maps}["close_"] == "list[list_struct]"  # per-CPU: one per CPU
    module = tmp_path / "names_skel.py"
    module.write_text(generate(spec, "Names", object_path="names.bpf.o"))
    proc = mypy(module)
    assert proc.returncode == 0, proc.stdout
    skel = load_module(module).Names.open()
    assert skel.units == 1 and skel.load_ == 0 and skel.lambda_ == 1
    assert {"open", "load", "attach", "close"} <= RESERVED


def test_class_name_errors() -> None:
    spec = bpfkit.load_spec(obj("execsnoop"))
    with pytest.raises(UsageError, match=r"skeleton class name 'event' is also the name of a struct or enum "
                                         r"of the object, a builtin or a name the module imports: choose another "
                                         r"with --name"):
        generate(spec, "event")
    with pytest.raises(UsageError, match=r"skeleton class name '9x' is not a Python identifier"):
        generate(spec, "9x")
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", str(obj("execsnoop")), "--name", "event"],
                          check=False, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "choose another with --name" in proc.stderr, proc.stderr


@pytest.mark.root
def test_doc_example_runs_in_a_read_only_checkout() -> None:
    """docs/skeleton.md's first example runs mypy from the checkout's root, which a VM guest
    mounts read-only (integration/vm.py): there mypy 2.4 stops with an INTERNAL ERROR creating
    .mypy_cache (--no-incremental still writes it; the 5.10 leg of issue 35), so the example
    names a cache directory of its own. Run as the guest would: the checkout bound read-only
    in a private mount namespace (root only), the interpreter's bin directory first on PATH."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    text = (REPO / "docs/skeleton.md").read_text()
    block = re.search(r"^```sh runnable\n(.*?)^```", text, re.M | re.S)
    assert block is not None
    script = (f"mount --bind {shlex.quote(str(REPO))} {shlex.quote(str(REPO))} && "
              f"mount -o remount,bind,ro {shlex.quote(str(REPO))} && cd {shlex.quote(str(REPO))} && "
              f"set -e\n{block.group(1)}")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                          check=False, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found in 1 source file" in proc.stdout, proc.stdout


# ------------------------------------------------------------------------ spec stage
def test_spec_stage_variables(generated: Path) -> None:
    """Before load, variables live in the spec's data sections: no kernel needed."""
    module = load_module(generated / "funclatency_skel.py")
    skel = module.Funclatency.open(obj("funclatency"))
    assert skel.units == 0 and skel.hist == [0] * 32 and not skel.loaded
    skel.units = module.units_enum.MSEC
    skel.targ_tgid = 4321
    assert skel.units == 2 and skel.units.name == "MSEC"
    assert skel.spec.variables["targ_tgid"].value == 4321  # the bytes load() will create .rodata with
    with pytest.raises(BTFValueError, match=r"^set variable 'targ_tgid': targ_tgid: expected const volatile __u32 "
                                           r"\(an integer in \[0, 4294967295\]\), got -1 \(out of range\)$"):
        skel.targ_tgid = -1
    with pytest.raises(AttributeError, match=r"Funclatency has no variable 'targ_pid' \(its variables: targ_tgid, units, hist\)"):
        skel.targ_pid = 1
    with pytest.raises(UsageError, match=r"program 'func_entry': Funclatency is not loaded \(call load\(\) first\)"):
        skel.func_entry  # noqa: B018
    skel.close()


def test_skeleton_refuses_another_object(generated: Path) -> None:
    module = load_module(generated / "syscount_skel.py")
    with pytest.raises(UsageError, match=r"Syscount.sys_enter: .*runqlat.bpf.o has no program 'sys_enter': the skeleton "
                                         r"was generated from another object; regenerate it \(bpfkit gen skeleton .*\)"):
        module.Syscount.open(obj("runqlat"))


def test_bpfkit_open_has_the_generated_names(generated: Path) -> None:
    for name in EXAMPLES + OBJECTS:
        module = load_module(generated / f"{name}_skel.py")
        cls = next(v for v in vars(module).values() if isinstance(v, type) and issubclass(v, bpfkit.skeleton.Skeleton)
                   and v.__module__ == module.__name__)
        dynamic = bpfkit.open(obj(name))
        assert sorted(type(dynamic)._declared()) == sorted(cls._declared()), name
        assert sorted(type(dynamic).RECORDS) == sorted(cls.RECORDS), name
        with pytest.raises(AttributeError, match=rf"{name}.bpf.o has no program, map or variable 'nope' \(it has: "):
            dynamic.nope  # noqa: B018


def test_cli_stdout_and_errors() -> None:
    path = obj("syscount")
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", str(path)],
                          check=False, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert f"    OBJECT: _ClassVar[str] = {str(path.resolve())!r}\n" in proc.stdout  # no -o: absolute
    assert f"# Regenerate: bpfkit gen skeleton {path}\n" in proc.stdout
    missing = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", "/nonexistent.bpf.o"],
                             check=False, capture_output=True, text=True, cwd=REPO)
    assert (missing.returncode, missing.stderr) == (1, "bpfkit: error: load /nonexistent.bpf.o: no such file\n")
