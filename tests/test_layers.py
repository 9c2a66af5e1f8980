# SPDX-License-Identifier: Apache-2.0
"""bpfkit's layers and import rules (docs/architecture.md), checked.

* No module-level import cycle in bpfkit/: the top-level imports of every module (read with
  ast, nothing is imported) form a graph without cycles. Counting imports inside functions
  too, no import tangle either (a strongly connected set of modules).
* Each module imports, at module level, only modules of its own layer or of a layer below
  (LAYERS, lowest first). The spec layer imports nothing above it even lazily (inside a
  function), except the few imports listed in SPEC_LAZY_UP, each with its reason.
* In a fresh interpreter, parsing and inspecting specs (load_spec, variables, maps, programs,
  struct_ops specs, CO-RE resolved against a BTF file given as a path) imports no module of
  bpfkit._kernel, bpfkit.link or bpfkit.events, nor any other kernel-side module.
* cffi stays inside bpfkit._kernel: no module outside it imports cffi or an ``ffi``, or names
  a ``.ffi`` attribute (``_ue.ffi.new``); the kernel modules hand out bytes, ints and classes.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import package_dir

REPO = Path(__file__).resolve().parent.parent
# The bpfkit being tested: the checkout's, or an installed wheel's (scripts/wheel-legs.sh).
PACKAGE = package_dir()

# Layers, lowest first: a module may import modules of its own layer or of the layers before
# it. A module belongs to the first layer one of whose prefixes names it or a package above
# it (no exceptions: a module of the running kernel lives outside the spec packages).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Shared by all: the exception tree, bounded reads of regular files, lazy re-exports, the
    # version (bpfkit.__version__, `bpfkit --version`), the `with` mixin (ClosesOnExit), the
    # records that stand in for generated dataclass methods, typing's run-time no-ops.
    ("base", ("bpfkit.errors", "bpfkit._files", "bpfkit._lazy", "bpfkit._version", "bpfkit._closing", "bpfkit._record",
              "bpfkit._no_typing", "bpfkit._visible")),
    # The spec layer: object files, BTF, section names, instructions, CO-RE against a given
    # BTF, and the spec dataclasses. No syscalls; aya-obj's role.
    ("spec", ("bpfkit.spec", "bpfkit.elf", "bpfkit.btf", "bpfkit.sections", "bpfkit.asm", "bpfkit.skelgen")),
    # The kernel ABI: syscalls, struct layouts, /sys, tracefs (bpf(2), perf_event_open(2));
    # and the protocols that type kernel objects at the layers' boundaries (an fd, a type, a name).
    ("abi", ("bpfkit._kernel", "bpfkit._protocols")),
    # Addresses -> symbols: /proc/kallsyms, /proc/PID/maps, binaries and their debug files
    # (through the spec layer's ELF reader); stack-trace values decoded. Files only, no bpf(2):
    # below the objects, so Map decodes stack-trace maps with it and the tracker resolves with it.
    ("symbols", ("bpfkit.symbols",)),
    # Kernel objects made from specs (each owns an fd), fitting a spec to the running kernel,
    # the running kernel's BTF, feature probes.
    ("objects", ("bpfkit.maps", "bpfkit.program", "bpfkit.collection", "bpfkit.kernelfit",
                 "bpfkit.struct_ops", "bpfkit.freplace", "bpfkit.features", "bpfkit.kernel_btf",
                 "bpfkit.hist")),
    # Attaching programs: links, probe specs, USDT.
    # Skeletons: an object's programs, maps and variables as attributes, attached like attach_all.
    ("links", ("bpfkit.link", "bpfkit.probespec", "bpfkit.usdt", "bpfkit.attach", "bpfkit.probelist", "bpfkit.skeleton")),
    # Reading what programs send, and user events.
    ("events", ("bpfkit.events", "bpfkit.user_events")),
    # Maps and events shipped to monitoring systems (Prometheus, OpenTelemetry): a library layer
    # above the objects and readers it serves, below the command line.
    ("metrics", ("bpfkit.metrics",)),
    # Profiles: stack maps read into counted stacks, symbolized, written as folded stacks,
    # pprof, speedscope JSON, SVG flame graphs (docs/stacks.md).
    ("profile", ("bpfkit.profile",)),
    # The command line; and the package's own lazy front door.
    ("cli", ("bpfkit.cli",)),
    ("top", ("bpfkit",)),
]

# Imports inside functions from the spec layer to a layer above it: (importer, imported) ->
# why. Each runs only when the caller asks for the running kernel.
SPEC_LAZY_UP = {
    ("bpfkit.spec.collection", "bpfkit.kernelfit"):
        "CollectionSpec.resolve_core() with no kernel_btf resolves against the running kernel's BTF "
        "(/sys/kernel/btf), which the kernel side reads",
}

# What spec use may import beyond the spec layer: module -> why. (Empty: none.)
SPEC_USE_ALLOWED: dict[str, str] = {}
KERNEL_PREFIXES = ("bpfkit._kernel", "bpfkit.link", "bpfkit.events")


# ------------------------------------------------------------------------------ graph
def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        found[".".join(parts)] = (path, is_pkg)
    return found


MODULES = _modules()


def _imports(name: str, top_level_only: bool) -> set[str]:
    """The bpfkit modules ``name`` imports: at module level (not under TYPE_CHECKING), or
    anywhere. Importing a.b.c imports packages a and a.b first, except those the importer is
    inside (already being imported: no new edge); ``from . import sub`` imports just sub."""
    path, is_pkg = MODULES[name]
    package = name if is_pkg else name.rpartition(".")[0]
    named: set[str] = set()

    def add(node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
            return
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES]
        named.update(subs)
        if not (len(subs) == len(node.names) and (name + ".").startswith(mod + ".")):
            named.add(mod)

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                add(node)
            elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                visit(node.orelse)  # never run: annotations only
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or not top_level_only:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, field, None) or []
                    visit([c for c in children if isinstance(c, ast.stmt)])
                    for handler in children:
                        if isinstance(handler, ast.ExceptHandler):
                            visit(handler.body)

    visit(ast.parse(path.read_text()).body)
    own = name.split(".")
    out = set()
    for mod in named:
        if not mod.startswith("bpfkit"):
            continue
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            candidate = ".".join(parts[:i])
            if candidate not in MODULES or candidate == name:
                continue
            if i < len(parts) and parts[:i] == own[:i]:
                continue  # a package the importer is inside
            out.add(candidate)
    return out


GRAPH = {name: _imports(name, top_level_only=True) for name in MODULES}
# With the imports made inside functions: the modules each one may import when it runs.
LAZY_GRAPH = {name: _imports(name, top_level_only=False) for name in MODULES}


def layer_of(name: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{name} is in no layer of tests/test_layers.py: add it to LAYERS")


def _layer_index(label: str) -> int:
    return [label_ for label_, _ in LAYERS].index(label)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, and self-imports (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


# ------------------------------------------------------------------------------ tests
def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle() -> None:
    found = cycles(GRAPH)
    assert not found, "module-level import cycles in bpfkit/: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_tangle_even_counting_imports_inside_functions() -> None:
    found = cycles(LAZY_GRAPH)
    assert not found, ("import tangles in bpfkit/, counting imports inside functions (move the shared piece "
                       "down into its own module, or pass a value in instead of importing back up): "
                       + "; ".join(" <-> ".join(c) for c in found))


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        layer_of(name)


def test_module_level_imports_go_down_the_layers() -> None:
    wrong = []
    for name, imported in sorted(GRAPH.items()):
        for target in sorted(imported):
            if layer_of(target) > layer_of(name):
                wrong.append(f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    assert not wrong, "imports up the layers:\n" + "\n".join(wrong)


def test_spec_layer_imports_nothing_above_it_even_lazily() -> None:
    spec = _layer_index("spec")
    wrong = []
    seen = set()
    for name in sorted(MODULES):
        if layer_of(name) > spec:
            continue
        for target in sorted(_imports(name, top_level_only=False)):
            if layer_of(target) <= spec:
                continue
            seen.add((name, target))
            if (name, target) not in SPEC_LAZY_UP:
                wrong.append(f"{name} imports {target} ({LAYERS[layer_of(target)][0]})")
    assert not wrong, "the spec layer reaches the kernel side:\n" + "\n".join(wrong)
    stale = set(SPEC_LAZY_UP) - seen
    assert not stale, f"SPEC_LAZY_UP lists imports that no longer exist: {sorted(stale)}"


# The spec layer in order, lowest first: the bpf(2) enums; the formats an object is made of
# (ELF, BTF, instructions); libbpf's section names; then the specs built from them, and
# skeletons. Checked counting imports inside functions: the ELF reader serves the symbolizer
# and uprobes without the specs, and nothing below spec/ reaches back into it.
SPEC_ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("enums", ("bpfkit.spec.consts",)),
    ("formats", ("bpfkit.elf", "bpfkit.btf", "bpfkit.asm")),
    ("section names", ("bpfkit.sections",)),
    ("specs", ("bpfkit.spec", "bpfkit.skelgen")),
]


def _spec_rank(name: str) -> int | None:
    for rank, (_, prefixes) in enumerate(SPEC_ORDER):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_spec_layer_is_ordered() -> None:
    """elf/, btf/, asm and sections import nothing of spec/ but its enums. Importing
    bpfkit.spec.consts imports the bpfkit.spec package first, which holds only a lazy table
    (checked here), so that edge does not count."""
    package_imports = _imports("bpfkit.spec", top_level_only=False)
    assert package_imports <= {"bpfkit._lazy"}, f"bpfkit/spec/__init__.py imports {sorted(package_imports)}"
    wrong = []
    for name in sorted(MODULES):
        rank = _spec_rank(name)
        if rank is None or layer_of(name) != _layer_index("spec"):
            continue
        for target in sorted(_imports(name, top_level_only=False)):
            target_rank = _spec_rank(target) if target != "bpfkit.spec" else 0
            if target_rank is not None and target_rank > rank:
                wrong.append(f"{name} ({SPEC_ORDER[rank][0]}) imports {target} ({SPEC_ORDER[target_rank][0]})")
    assert not wrong, "the spec layer's order (SPEC_ORDER) is broken:\n" + "\n".join(wrong)
    every = [name for name in MODULES if layer_of(name) == _layer_index("spec") and _spec_rank(name) is None]
    assert not every, f"spec-layer modules in no group of SPEC_ORDER: {every}"


def _cffi_uses(tree: ast.AST) -> list[str]:
    """Where ``tree`` reaches cffi: ``import cffi``, ``from ... import ffi``, ``x.ffi``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "cffi"]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "cffi" or any(a.name == "ffi" for a in node.names):
                found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import "
                             + ", ".join(a.name for a in node.names))
        elif isinstance(node, ast.Attribute) and node.attr == "ffi":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_cffi_finder_finds_cffi() -> None:
    tree = ast.parse("import cffi\nfrom .._kernel.abi import ffi, libc\nfrom . import ffi\nx = _ue.ffi.new('int *')\n"
                     "ffi_note = 'ffi'  # ffi in a comment\n")
    assert [use.split(":")[0] for use in _cffi_uses(tree)] == ["line 1", "line 2", "line 3", "line 4"]


def test_cffi_stays_inside_the_kernel_modules() -> None:
    """Buffers, pointers and casts belong to bpfkit._kernel (issue #36: a narrow syscall
    layer): above it, values are bytes, ints and the kernel modules' own classes."""
    wrong = []
    for name, (path, _) in sorted(MODULES.items()):
        if name == "bpfkit._kernel" or name.startswith("bpfkit._kernel."):
            continue
        wrong += [f"{name} {use}" for use in _cffi_uses(ast.parse(path.read_text()))]
    assert not wrong, "cffi used outside bpfkit._kernel (add a typed function there instead):\n" + "\n".join(wrong)


SPEC_USE = r"""
import json, sys
import bpfkit
obj = sys.argv[1]
spec = bpfkit.load_spec(obj + "/cli_opensnoop.bpf.o")
seen = {"load_spec": sorted(m for m in sys.modules if m.startswith("bpfkit"))}
# inspect-style use: variables, maps, programs
for v in spec.variables.values():
    v.value, v.type_name, v.constant
spec.variables["targ_pid"].value = 1234
for m in spec.maps.values():
    m.type.kernel_name, m.key_size, m.value_size, m.copy()
for p in spec.programs.values():
    p.type.kernel_name, p.section, p.attach_to, p.insn_count, p.copy()
spec.copy()
bpfkit.load_spec(open(obj + "/loader_basic.bpf.o", "rb").read())
# struct_ops specs
from bpfkit.spec.struct_ops import describe
ops = bpfkit.load_spec(obj + "/struct_ops_tcp_ca.bpf.o")
for m in ops.maps.values():
    if m.struct_ops is not None:
        describe(m.struct_ops), m.struct_ops.kernel_type_name, m.struct_ops.programs
# CO-RE computation against a BTF file given as a path
core = bpfkit.load_spec(obj + "/core_task.bpf.o")
resolved = core.resolve_core(sys.argv[2])
assert resolved["core_task"], resolved
for r in resolved["core_task"]:
    r.explain()
seen["all"] = sorted(m for m in sys.modules if m.startswith("bpfkit"))
print(json.dumps(seen))
"""


def _spec_use_modules(bpf_dir: Path, btf_file: Path) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", SPEC_USE, str(bpf_dir), str(btf_file)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result: dict[str, list[str]] = json.loads(out.stdout.splitlines()[-1])
    return result


def _kernel_side(modules: list[str]) -> list[str]:
    spec = _layer_index("spec")
    return [m for m in modules if m not in SPEC_USE_ALLOWED
            and (m.startswith(KERNEL_PREFIXES) or (m in MODULES and layer_of(m) > spec and m != "bpfkit"))]


def test_spec_use_imports_no_kernel_module() -> None:
    bpf_dir = REPO / "bpf" / ".output"
    # A BTF file standing in for a kernel's: the BTF of vmlinux where the kernel has it, else
    # core_task's own object (an ELF file with .BTF, enough to resolve its relocations).
    btf_file = Path("/sys/kernel/btf/vmlinux")
    if not btf_file.exists():
        btf_file = bpf_dir / "core_task.bpf.o"
    for needed in ("cli_opensnoop", "loader_basic", "struct_ops_tcp_ca", "core_task"):
        if not (bpf_dir / f"{needed}.bpf.o").exists():
            pytest.skip(f"bpf/.output/{needed}.bpf.o is not built (scripts/setup.sh builds bpf/)")
    seen = _spec_use_modules(bpf_dir, btf_file)
    assert not _kernel_side(seen["load_spec"]), f"load_spec() imported: {_kernel_side(seen['load_spec'])}"
    assert not _kernel_side(seen["all"]), f"spec use imported: {_kernel_side(seen['all'])}"
    assert "bpfkit.spec.collection" in seen["load_spec"]


SPEC_LAYER_PATHS = ["bpfkit/spec", "bpfkit/elf", "bpfkit/btf", "bpfkit/sections.py", "bpfkit/asm.py",
                    "bpfkit/errors.py", "bpfkit/_files.py", "bpfkit/_record.py", "bpfkit/_no_typing.py"]


def test_spec_layer_passes_mypy_strict(tmp_path: Path) -> None:
    """The spec layer (and the base it stands on) is fully typed: parse_object returns a
    CollectionSpec, every builder is annotated (mypy --strict, imports followed silently)."""
    pytest.importorskip("mypy", reason="mypy is not installed (.venv/bin/pip install mypy)")
    top = PACKAGE.parent
    if top != REPO:
        # An installed wheel's: from site-packages mypy would take every module beside bpfkit
        # for the user's own (and refuse mypy_extensions.py).
        (tmp_path / "bpfkit").symlink_to(PACKAGE)
        top = tmp_path
    # No cache: a cache shared with other runs (a VM mounting this tree) made mypy fail internally.
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
                          "--cache-dir=/dev/null", f"--config-file={REPO / 'pyproject.toml'}", *SPEC_LAYER_PATHS],
                         cwd=top, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
