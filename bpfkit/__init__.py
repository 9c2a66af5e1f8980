"""bpfkit: load eBPF objects, attach them and read what they send, from pure Python.

The top level re-exports the everyday names lazily, so ``import bpfkit`` stays cheap:

    spec = bpfkit.load_spec("prog.bpf.o")      # CollectionSpec: plain data
    with bpfkit.Collection(spec) as coll:      # maps, then programs
        ...
"""

from __future__ import annotations

import sys as _sys


def _interrupted_early(signum: int, frame: object) -> None:
    raise SystemExit(130)  # the CLI's EXIT_INTERRUPTED; SystemExit prints no traceback


# The `bpfkit` command: a Ctrl-C while the command's modules import must exit 130 quietly, not
# print a KeyboardInterrupt traceback from inside an import. So the handler is installed here,
# by the first bpfkit code that runs, before importing anything (bpfkit.cli.main puts the
# default handler back when the command proper starts).
if _sys.argv and (_sys.argv[0].endswith("/bpfkit") or _sys.argv[0] == "bpfkit"):
    try:
        import _signal  # the C module: `import signal` first builds its IntEnums (ms of work)
    except ImportError:  # not CPython
        import signal as _signal

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupted_early)

import importlib  # noqa: E402 - after the handler; already loaded by Python, cheap

__version__ = "0.1.0"

_LAZY = {
    "Map": "bpfkit.maps",
    "MapSpec": "bpfkit.maps",
    "Program": "bpfkit.program",
    "ProgramSpec": "bpfkit.program",
    "LoadOptions": "bpfkit.program",
    "load_spec": "bpfkit.collection",
    "CollectionSpec": "bpfkit.collection",
    "VariableSpec": "bpfkit.collection",
    "Collection": "bpfkit.collection",
    "MapType": "bpfkit._kernel.consts",
    "ProgType": "bpfkit._kernel.consts",
    "AttachType": "bpfkit._kernel.consts",
    "LinkType": "bpfkit._kernel.consts",
}

__all__ = sorted(_LAZY) + ["errors", "__version__"]


def __getattr__(name: str) -> "Any":  # noqa: F821 - typing is not imported: it costs ~10 ms
    module = _LAZY.get(name)
    if module is None:
        if name in ("errors", "features", "link", "events", "asm", "btf", "elf", "user_events", "usdt"):
            return importlib.import_module(f"bpfkit.{name}")
        raise AttributeError(f"module 'bpfkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
