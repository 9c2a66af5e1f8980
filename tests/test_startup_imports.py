# SPDX-License-Identifier: Apache-2.0
"""What `bpfkit load` imports (docs/performance.md, Start-up): the modules on its path import
``typing`` for the type checker only (~2 ms to import), and Map stays subscriptable at run time."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import bpfkit
from bpfkit.maps import Map

REPO = Path(__file__).resolve().parent.parent
PKG = Path(bpfkit.__file__).resolve().parent  # the checkout's, or an installed wheel's (scripts/wheel-legs.sh)

# test_load_imports_no_typing checks every module a real load imports; this, the main ones without root.
LOAD_PATH = ["maps.py", "_kernel/bpf.py", "_closing.py", "btf/values.py", "btf/types.py", "btf/spec.py", "spec/maps.py",
             "spec/collection.py", "spec/programs.py", "spec/consts.py", "program.py", "collection.py", "kernelfit.py",
             "features/__init__.py", "features/_btf_kinds.py", "_no_typing.py", "_record.py"]

# What `from bpfkit.events import RingBuffer` (or PerfBuffer) runs, issue 38: a tool's first reader.
READER_PATH = ["events/__init__.py", "events/_common.py", "events/records.py", "events/ringbuf.py", "events/perf.py",
               "_kernel/ring.py", "_kernel/perf.py", "_lazy.py"]


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Modules imported at module level outside ``if TYPE_CHECKING:`` blocks."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                found.append(sub.module)
            elif isinstance(sub, ast.Import):
                found.extend(a.name for a in sub.names)
    return found


@pytest.mark.parametrize("path", LOAD_PATH + READER_PATH)
def test_load_path_imports_typing_for_the_type_checker_only(path: str) -> None:
    tree = ast.parse((PKG / path).read_text())
    assert not {"typing", "typing_extensions"} & set(_runtime_imports(tree))


def test_map_is_generic_at_run_time() -> None:
    alias = Map[int, bytes]
    assert typing.get_origin(alias) is Map and typing.get_args(alias) == (int, bytes)
    assert repr(alias) == "bpfkit.maps.Map[int, bytes]"


def test_the_abi_needs_only_cffis_backend() -> None:
    # The generated out-of-line module (_abi_ffi.py) imports _cffi_backend; the cffi package
    # (~1.5 ms) is imported only to parse CDEF (abi.build_ffi, scripts/gen_abi.py).
    code = ("import sys; from bpfkit._kernel import abi; "
            "print(abi.ffi.sizeof('union bpf_attr') > 0, 'cffi' in sys.modules, '_cffi_backend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.split() == ["True", "False", "True"], out.stdout + out.stderr


def test_the_command_handles_signals_without_signal_py() -> None:
    # bpfkit.cli uses the C module _signal (signal.py makes three enums on import, ~0.4 ms),
    # falling back to signal where an interpreter lacks it: both must have what it calls.
    import _signal
    import signal

    import bpfkit.cli as cli

    for module in (_signal, signal):
        for name in ("signal", "getsignal", "setitimer", "SIGINT", "SIGTERM", "SIGALRM", "ITIMER_REAL"):
            assert hasattr(module, name), (module, name)
    assert cli._signal.SIGINT == signal.SIGINT and cli._signal.getsignal is not None
    code = "import sys, bpfkit.cli; print('signal' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "False", out.stdout + out.stderr


@pytest.mark.root
def test_the_command_imports_neither_gettext_nor_locale(bpf_obj, tmp_path: Path) -> None:
    # bpfkit.cli.argparse_without_gettext: ~2 ms of `bpfkit load` and `--help`; the collector's
    # young generation every 20,000 allocations (bpfkit.cli.start_command): ~1.2 ms; the end
    # without the interpreter's finalization (bpfkit.cli.main._end_process): ~5 ms, atexit
    # callbacks still run (the report below is one), stdout flushed, the exit code kept.
    # resource and fcntl (shared libraries, ~0.15 ms each): only before 5.11, or to move an fd off 0.
    pin_dir = f"/sys/fs/bpf/bpfkit-test-{os.getpid()}"
    code = ("import atexit, gc, sys; sys.argv = ['bpfkit', 'load', sys.argv[1], sys.argv[2]]\n"
            "class Finalized:\n    def __del__(self): print('finalized')\n"
            "left = Finalized()\n"
            "def report():\n"
            "    absent = ('gettext', 'locale', 'shutil', 'resource', 'fcntl')"
            "  + (('inspect',) if sys.version_info < (3, 13) else ())\n"  # 3.13's dataclasses needs inspect
            "    print([m for m in absent if m in sys.modules], gc.get_freeze_count() > 0, gc.get_threshold()[0])\n"
            "    import gettext, argparse; print(hasattr(gettext, 'translation'), argparse._('x'), argparse.ngettext('a', 'b', 2))\n"
            "atexit.register(report)\n"
            "from bpfkit.cli.main import main; main(); print('not reached')")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(bpf_obj("minimal")), pin_dir], capture_output=True, text=True,
                             check=False, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert os.path.isdir(pin_dir), out.stdout + out.stderr
    finally:
        subprocess.run(["rm", "-rf", pin_dir], check=False)
    assert out.returncode == 0 and out.stdout.splitlines()[-2:] == ["[] True 20000", "True x b"], out.stdout + out.stderr
    assert "not reached" not in out.stdout and "finalized" not in out.stdout, out.stdout


def test_a_failing_command_keeps_its_exit_code_and_output(tmp_path: Path) -> None:
    # _end_process ends the process with the command's own code, its output flushed.
    missing = tmp_path / "missing.bpf.o"
    out = subprocess.run([sys.executable, "-m", "bpfkit", "inspect", str(missing)], capture_output=True, text=True,
                         check=False, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 1 and str(missing) in out.stderr and "Traceback" not in out.stderr, (out.returncode, out.stderr)


@pytest.mark.parametrize("lang", ["de", "de_DE.UTF-8", "fr:de", "C.UTF-8", "C", "", "../de", "de::fr", ".."])
@pytest.mark.parametrize("catalog", [None, "de", "de_DE.UTF-8", "fr_FR.ISO8859-1", "C.UTF-8", "LC_MESSAGES"])
def test_no_catalog_only_when_gettext_finds_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 lang: str, catalog: str | None) -> None:
    """argparse gets the untranslated stand-in only when gettext.find, with the same
    environment and directory, finds no messages.mo; else the real gettext decides."""
    import gettext

    from bpfkit import cli

    localedir = tmp_path / "share" / "locale"
    if catalog is not None:
        mo = localedir / catalog / "LC_MESSAGES" / "messages.mo"
        mo.parent.mkdir(parents=True)
        mo.write_bytes(b"")
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path))
    path_like = "/" in lang or any(part == "" or part.startswith(".") for part in lang.split(":")) if lang else False
    no_catalog = cli._no_catalog()
    if no_catalog:
        assert gettext.find("messages", str(localedir), all=True) == []
    # Any catalog at all, or a language that could name a path outside the directory: gettext decides.
    assert no_catalog == (catalog is None and not path_like)
    assert cli._Untranslated("gettext").gettext("x") == "x"
    assert cli._Untranslated("gettext").ngettext("a", "b", 1) == "a"


@pytest.mark.root
@pytest.mark.parametrize("command", ["load", "features"])
def test_the_command_imports_no_typing(bpf_obj, command: str) -> None:
    """`bpfkit load` of a CO-RE object (the 1-program path is a subset) and `bpfkit features`
    import no typing (~1.5-2.5 ms of their start-up): every bpfkit module they import imports it
    for the type checker only."""
    pin_dir = f"/sys/fs/bpf/bpfkit-test-{os.getpid()}"
    args = [str(bpf_obj("loader_core")), pin_dir] if command == "load" else []
    code = (f"import atexit, sys; sys.argv = ['bpfkit', {command!r}, *sys.argv[1:]]; "
            "atexit.register(lambda: print('typing' in sys.modules, "
            "*sorted(m.__file__ for n, m in sys.modules.items() if n.startswith('bpfkit') and m.__file__))); "
            "from bpfkit.cli.main import main; main()")  # the command ends the process (atexit runs)
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                             text=True, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        subprocess.run(["rm", "-rf", pin_dir], check=False)
    typing_imported, *files = out.stdout.splitlines()[-1].split()
    assert len(files) > 30, out.stdout + out.stderr
    importers = {str(Path(f).relative_to(PKG)) for f in files
                 if {"typing", "typing_extensions"} & set(_runtime_imports(ast.parse(Path(f).read_text())))}
    assert (importers, typing_imported) == (set(), "False")


def test_a_signal_during_the_final_flush_still_ends_quietly() -> None:
    """A SIGINT that lands while the command's end (_end_process) flushes stdout runs the
    handler inside that flush; the handler's own flush is then a reentrant call, RuntimeError
    (the Python 3.13 leg met it in test_ctrl_c_during_start_up_prints_no_bpfkit_traceback's
    sweep). No kernel can be made to deliver the signal at that instant on demand, so the flush
    here is a stand-in that raises what io raised there; the handler must still end the process
    with 128+N and no traceback."""
    code = ("import signal, sys, bpfkit.cli as cli\n"
            "class Busy:\n"
            "    def flush(self): raise RuntimeError(\"reentrant call inside <_io.BufferedWriter name='<stdout>'>\")\n"
            "sys.stdout = Busy()\n"
            "cli._exit_quietly(signal.SIGINT, None)\n"
            "print('not reached', file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (out.returncode, out.stderr) == (130, ""), (out.returncode, out.stderr)


# Loaded by neither reader's import (issue 38: they were ~95% of a first RingBuffer's set-up):
# typing (~3 ms), the perf record dataclasses and Decoder (~10 ms: fifteen generated classes),
# record decoders and the BTF value codecs behind them, DWARF, numpy (a few hundred ms).
NOT_FOR_A_READER = {"typing", "typing_extensions", "bpfkit.events._perf_records", "bpfkit.btf.records",
                    "bpfkit.btf.values", "bpfkit.btf.layout", "bpfkit.btf.dwarf", "elftools", "numpy"}


@pytest.mark.parametrize("reader", ["RingBuffer", "PerfBuffer"])
def test_a_readers_import_loads_no_record_classes_nor_typing(reader: str) -> None:
    """A tool that has its maps imports its reader: what that loads (a fresh interpreter, after
    bpfkit.maps as a skeleton tool has it), then what the perf records' names load on first use."""
    code = ("import json, sys; import bpfkit.maps\n"
            "before = set(sys.modules)\n"
            f"from bpfkit.events import {reader}\n"
            "reader = sorted(set(sys.modules) - before)\n"
            "from bpfkit.events import records\n"
            "lazy = 'bpfkit.events._perf_records' in sys.modules\n"
            "sample, decoder = records.Sample, records.Decoder\n"
            "print(json.dumps([reader, lazy, sample.__module__, 'bpfkit.events._perf_records' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    reader_modules, loaded_early, module, loaded_late = json.loads(out.stdout)
    assert f"bpfkit.events.{'ringbuf' if reader == 'RingBuffer' else 'perf'}" in reader_modules, reader_modules
    assert not NOT_FOR_A_READER & set(reader_modules), reader_modules
    if reader == "RingBuffer":  # the perf enums too (PerfBuffer needs them: PERF_RECORD_SAMPLE/LOST)
        assert "bpfkit._kernel.perf_consts" not in reader_modules, reader_modules
    assert (loaded_early, module, loaded_late) == (False, "bpfkit.events._perf_records", True)


def test_the_perf_record_names_stay_in_bpfkit_events_records() -> None:
    """Every name bpfkit.events.records had is there still, the lazy ones the very objects of the
    module that defines them, and every public name of that module is reachable from records."""
    from bpfkit.btf import records as btf_records
    from bpfkit.events import _perf_records, records

    for name in records.__all__:
        assert getattr(records, name) is not None, name
    for name in records._PERF_RECORDS:
        assert getattr(records, name) is getattr(_perf_records, name), name
    defined = {name for name, value in vars(_perf_records).items()
               if not name.startswith("_") and getattr(value, "__module__", None) == _perf_records.__name__}
    assert defined and not defined - set(records._PERF_RECORDS)
    assert records.RecordDecoder is btf_records.RecordDecoder
    assert records.Record is records.PerfEventRecord and issubclass(records.Mmap2, records.Mmap)
    namespace: dict[str, object] = {}
    exec("from bpfkit.events.records import *", namespace)
    assert set(records.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        records.Nonesuch  # noqa: B018
