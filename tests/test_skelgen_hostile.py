# SPDX-License-Identifier: Apache-2.0
"""Skeletons of hostile objects (issue 35): importing a generated module must run no code the
object's author chose, and every name the object gives must reach the module intact.

`bpfkit gen skeleton` copied names from the object raw into comments and docstrings, so a
section name with a line break (or a struct name with three double quotes) wrote Python
that ran on import; names that are no Python identifier, that Python reads as another one
(NFKC) or that are names of the skeleton class itself broke the module. The objects:
bpf/skel_hostile.bpf.c (section names ending the line), bpf/skel_hostile_names.bpf.c (names),
specs built here in Python (what C cannot name: a struct with quotes in its name, two enums of
one name), and a property test over specs whose names hypothesis draws from all of Unicode.
The spec stage only: no kernel.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import shutil
import subprocess
import sys
import types
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpfkit
from bpfkit.btf import BTF, Array, Const, Enum, EnumValue, Int, IntEncoding, Member, Struct, Typedef, Volatile
from bpfkit.errors import UsageError
from bpfkit.skeleton import DynamicSkeleton, MapAttr, ProgramAttr, Skeleton, Variable, dynamic_class
from bpfkit.skelgen import RESERVED, generate, python_name, skeleton_plan
from bpfkit.spec.collection import CollectionSpec, VariableSpec
from bpfkit.spec.consts import MapType, ProgType
from bpfkit.spec.maps import MapSpec
from bpfkit.spec.programs import ProgramSpec
from tests.test_skeleton import mypy  # mypy --strict, bpfkit's own types cached across runs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("BPFKIT_SKELGEN_EXAMPLES", "300"))  # the property test's; raise it to hunt longer
EXIT = bytes([0x95]) + bytes(7)  # BPF_EXIT: a program's instructions are not looked at here
# Look-alikes Python reads as ASCII (NFKC), spelt as escapes: fullwidth "open", "m" and "H", a
# black-letter H, fullwidth low lines around "init".
OPEN = "\uff4f\uff50\uff45\uff4e"
FW_M, FW_H, BLACK_H = "\uff4d", "\uff28", "\u210c"
FW_DUNDER_INIT = "\uff3f\uff3finit\uff3f\uff3f"


# ------------------------------------------------------------------------- helpers
def gen_cli(obj: Path, out: Path, *extra: str) -> str:
    """`bpfkit gen skeleton OBJ -o OUT` as a user runs it; the module's text."""
    proc = subprocess.run([sys.executable, "-m", "bpfkit.cli", "gen", "skeleton", str(obj), "-o", str(out), *extra],
                          check=False, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


def import_in(directory: Path, module: str, code: str = "") -> str:
    """Import MODULE in a fresh interpreter whose working directory is DIRECTORY (where an
    injected `touch PWNED` would land), then run CODE; its stdout."""
    proc = subprocess.run([sys.executable, "-c", f"import {module} as m\n{code}"], check=False,
                          capture_output=True, text=True, cwd=directory)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def load_text(text: str, name: str = "hostile_skel") -> types.ModuleType:
    """TEXT compiled as import compiles a file's bytes (line ends as the tokenizer reads them)."""
    module = types.ModuleType(name)
    module.__file__ = f"/nonexistent/{name}.py"
    exec(compile(text.encode("utf-8"), module.__file__, "exec", dont_inherit=True), module.__dict__)
    return module


_DESCRIPTOR_CALLS = {"ProgramAttr", "MapAttr", "Variable"}
_ANNOTATION_NODES = (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp, ast.BitOr, ast.Tuple, ast.Load)


def check_statements(text: str) -> ast.Module:
    """The module holds only what the generator writes: a docstring, its imports, __all__ and
    classes (enum, Record, Skeleton) whose bodies are docstrings, annotations, int members and
    descriptor calls with literal arguments. Anything else came from the object."""
    tree = ast.parse(text)
    body = list(tree.body)
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), ast.dump(body[0])
    imports = [ast.unparse(s) for s in body[1:] if isinstance(s, (ast.Import, ast.ImportFrom))]
    assert set(imports) <= {"from __future__ import annotations", "import enum as _enum",
                            "from typing import ClassVar as _ClassVar", "from bpfkit import skeleton as _skel",
                            "from bpfkit.btf.values import Record as _Record"}, imports
    rest = [s for s in body[1:] if not isinstance(s, (ast.Import, ast.ImportFrom))]
    assert isinstance(rest[0], ast.Assign) and ast.unparse(rest[0].targets[0]) == "__all__"
    assert all(isinstance(e, ast.Constant) for e in ast.walk(rest[0].value) if isinstance(e, ast.expr)
               and not isinstance(e, ast.List))
    for cls in rest[1:]:
        assert isinstance(cls, ast.ClassDef) and not cls.decorator_list and not cls.keywords, ast.dump(cls)
        assert [ast.unparse(b) for b in cls.bases] in (["_enum.IntEnum"], ["_Record"], ["_skel.Skeleton"])
        for stmt in cls.body:
            if isinstance(stmt, ast.Expr):
                assert isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
            elif isinstance(stmt, ast.Assign):  # an enum member
                assert isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int
            elif isinstance(stmt, ast.AnnAssign):
                assert all(isinstance(n, _ANNOTATION_NODES) for n in ast.walk(stmt.annotation)), ast.dump(stmt)
                value = stmt.value
                if isinstance(value, ast.Call):
                    assert ast.unparse(value.func) in {f"_skel.{c}" for c in _DESCRIPTOR_CALLS}, ast.dump(value)
                    assert all(isinstance(a, ast.Constant) for a in value.args + [k.value for k in value.keywords])
                else:
                    assert value is None or isinstance(value, ast.Constant) or (isinstance(value, ast.Dict) and all(
                        isinstance(k, ast.Constant) and isinstance(v, ast.Name) for k, v in zip(value.keys, value.values)))
            else:
                assert isinstance(stmt, ast.Pass), ast.dump(stmt)
    return tree


def skeleton_class(module: types.ModuleType) -> type[Skeleton]:
    (cls,) = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Skeleton)
              and v.__module__ == module.__name__]
    return cls


def check_reachable(cls: type[Skeleton], spec: CollectionSpec) -> None:
    """Every program, map and non-static variable is one attribute of ``cls`` (by its Python
    name, as user code spells it), the base class's names are the base class's, and an
    instance is made (Skeleton.__init__ and its checks: a ``_codecs`` variable recursed)."""
    declared = cls._declared()
    by_kind: dict[type, set[str]] = {ProgramAttr: set(), MapAttr: set(), Variable: set()}
    for attr, d in declared.items():
        assert attr.isidentifier() and unicodedata.normalize("NFKC", attr) == attr, attr
        assert getattr(cls, attr) is d, attr
        by_kind[type(d)].add(d.name)
    assert len(declared) == len(spec.programs) + len(spec.maps) + sum(not v.static for v in spec.variables.values())
    assert by_kind[ProgramAttr] == set(spec.programs)
    assert by_kind[MapAttr] == set(spec.maps)
    assert by_kind[Variable] == {n for n, v in spec.variables.items() if not v.static}
    base = cls.__bases__[0]
    for name in RESERVED - {"OBJECT", "RECORDS"} | {"__init__", "__setattr__", "__getattr__"}:
        assert inspect.getattr_static(cls, name, None) is inspect.getattr_static(base, name, None), name
    skel = cls(spec, "hostile.bpf.o")
    assert not skel.loaded


# ------------------------------------------------------------------ specs in Python
def hostile_spec(*, programs: dict[str, str] = {}, maps: tuple[str, ...] = (),  # noqa: B006
                 variables: dict[str, str] = {}, section: str = ".data",  # noqa: B006
                 structs: dict[str, tuple[str, ...]] = {},  # noqa: B006
                 enums: tuple[tuple[str, tuple[str, ...]], ...] = (), name: str = "hostile") -> CollectionSpec:
    """A spec as bpfkit.load_spec gives it, named as the caller likes: ``programs`` {name:
    section}; ``maps`` (u32 -> u32 arrays); ``variables`` {name: typedef name} of u32 in the
    data section ``section``; ``structs`` {name: field names} (u32 fields; each the value of a
    map ``s<i>``); ``enums`` (name, members) each the type of a variable ``v_enum<i>``."""
    btf = BTF()
    u32 = btf.add(Int(0, "unsigned int", 4, IntEncoding.NONE, 0, 32))
    spec = CollectionSpec(name=name, btf=btf, license="GPL")
    for prog, sec in programs.items():
        spec.programs[prog] = ProgramSpec(prog, ProgType.TRACEPOINT, EXIT, section=sec)
    for m in maps:
        spec.maps[m] = MapSpec(m, MapType.ARRAY, 4, 4, 1, btf_key_type_id=u32, btf_value_type_id=u32, btf=btf)
    for i, (struct, fields) in enumerate(structs.items()):
        sid = btf.add(Struct(0, struct, 4 * len(fields), [Member(f, u32, 32 * j) for j, f in enumerate(fields)]))
        spec.maps[f"s{i}"] = MapSpec(f"s{i}", MapType.ARRAY, 4, 4 * len(fields), 1, btf_key_type_id=u32,
                                     btf_value_type_id=sid, btf=btf)
    typed: list[tuple[str, int]] = []
    for var, type_name in variables.items():
        typed.append((var, btf.add(Typedef(0, type_name, u32))))
    for i, (enum_name, members) in enumerate(enums):
        eid = btf.add(Enum(0, enum_name, 4, [EnumValue(m, j) for j, m in enumerate(members)]))
        typed.append((f"v_enum{i}", btf.add(Volatile(0, "", eid))))
    if typed:
        data = MapSpec(section, MapType.ARRAY, 4, 4 * len(typed), 1, data=bytes(4 * len(typed)), btf=btf)
        spec.maps[section] = data
        for i, (var, tid) in enumerate(typed):
            spec.variables[var] = VariableSpec(var, section, 4 * i, 4, tid, btf, data)
    return spec


def check_spec(spec: CollectionSpec, class_name: str = "Hostile") -> types.ModuleType:
    """Generate, check the statements, import, reach everything; the same for bpfkit.open's class."""
    text = generate(spec, class_name, object_path="hostile.bpf.o", command="bpfkit gen skeleton hostile.bpf.o")
    text.encode("utf-8")  # the module file is written as UTF-8: no lone surrogate may remain
    check_statements(text)
    module = load_text(text)
    check_reachable(skeleton_class(module), spec)
    check_reachable(dynamic_class(spec, "hostile.bpf.o"), spec)
    return module


# ------------------------------------------------------------ section names (clang)
def test_section_names_do_not_become_code(bpf_obj, tmp_path: Path) -> None:
    """`\\n`, a bare `\\r` (Python ends a line there too) and `\\n` after three double quotes
    in SEC(): the comment after each program holds the section's repr()."""
    text = gen_cli(bpf_obj("skel_hostile"), tmp_path / "hostile_skel.py")
    out = import_in(tmp_path, "hostile_skel", "print(sorted(d.name for d in m.SkelHostile._declared().values()))")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("PWNED")) == []
    assert out == "['after_cr', 'after_lf', 'after_quotes']\n"
    check_statements(text)
    spec = bpfkit.load_spec(bpf_obj("skel_hostile"))
    for prog in spec.programs.values():
        assert f"_skel.ProgramAttr({prog.name!r})  # {prog.section!r}\n" in text


def test_object_file_name_does_not_become_code(bpf_obj, tmp_path: Path) -> None:
    """The object's file name goes into the class docstring and the `# Regenerate:` line."""
    # No dot (the object's name ends at one); an undecodable byte (os.fsdecode: a lone surrogate).
    name = "x\"\"\"\nopen('PWNED_NAME', 'w')\n\"\"\"y\udcff"
    obj = tmp_path / f"{name}.bpf.o"
    shutil.copy(bpf_obj("minimal"), obj)
    text = gen_cli(obj, tmp_path / "named_skel.py", "--name", "Named")
    out = import_in(tmp_path, "named_skel", "print(repr(m.Named.__doc__))")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("PWNED")) == []
    doc = f"Programs, maps and global variables of {name}.bpf.o.".encode("utf-8", "backslashreplace").decode()
    assert out == repr(doc) + "\n"
    check_statements(text)
    assert f"# Regenerate: {f'bpfkit gen skeleton {obj} -o {tmp_path}/named_skel.py --name Named'!r}\n" in text


# ------------------------------------------------------------- names (clang)
def test_names_that_broke_the_module(bpf_obj, tmp_path: Path) -> None:
    """`_skel` hid the module's alias (AttributeError on import), a fullwidth `open` became `open`
    (TypeError in open()), `default_object` and `_codecs` replaced the base class's
    (TypeError; RecursionError), `q²` is no identifier (SyntaxError), `ﬁx` and `fix` were one
    attribute, enum member `mro` (ValueError). Renamed, and each rename said."""
    path = bpf_obj("skel_hostile_names")
    text = gen_cli(path, tmp_path / "names_skel.py")
    check_statements(text)
    out = import_in(tmp_path, "names_skel", "s = m.SkelHostileNames.open()\n"
                    "print(s.fix, s.fix_var, s.default_object_, s._codecs_, s.mode, [e.name for e in m.skel_hostile_mode])")
    assert out == "4 3 1 2 3 ['mro_', 'value_', 'plain']\n"
    attrs = {a.name: a.attr for a in skeleton_plan(bpfkit.load_spec(path)).attrs}
    assert attrs == {"_skel": "_skel_", OPEN: "open_", "q²": "q2", ".rodata": "rodata", ".data": "data",
                     "mode": "mode", "default_object": "default_object_", "_codecs": "_codecs_", "ﬁx": "fix_var",
                     "fix": "fix"}
    assert f"ProgramAttr('{OPEN}')  # 'tracepoint/syscalls/sys_enter_getppid'; '{OPEN}' renamed open_: NFKC " \
           "makes it 'open', a name of Skeleton\n" in text
    assert "Variable('ﬁx', 4, const=False)  # '__u32' in '.data'; 'ﬁx' renamed fix_var: NFKC makes it 'fix', " \
           "fix is taken\n" in text
    assert "    mro_ = 1  # 'mro' renamed mro_: a name of IntEnum\n" in text
    # Fields keep their C names (the decoder sets them): undeclared where the class body would
    # declare another name (ﬁeld is field) or hide a later annotation's type (str, list).
    assert "    # fields not declared (getattr() reads them): 'str', 'list', 'ﬁeld'\n    comm: str | bytes\n" in text

    skel = bpfkit.open(path)  # the same names at run time
    assert (skel.fix, skel.fix_var, skel.default_object_, skel._codecs_) == (4, 3, 1, 2)
    assert sorted(type(skel)._declared()) == sorted(attrs.values())


def test_names_module_passes_mypy_strict(bpf_obj, tmp_path: Path) -> None:
    """Also for mypy: an enum member `value` (incompatible with Enum.value), fields that hide
    `str` and `list` from later annotations."""
    module = tmp_path / "names_skel.py"
    gen_cli(bpf_obj("skel_hostile_names"), module)
    proc = mypy(module)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------- names C cannot give
def test_struct_enum_and_type_names_stay_in_their_literals() -> None:
    """Struct and enum names went into \"\"\"docstrings\"\"\", type names into comments."""
    inject = "x\"\"\"\n__import__('builtins').PWNED = 1\n\"\"\""
    spec = hostile_spec(structs={inject: ("a",)}, enums=((inject, ("A",)),), variables={"v": "t\nPWNED = 1"},
                        programs={"p": "tracepoint/x\rPWNED = 1"})
    module = check_spec(spec)
    assert not hasattr(module, "PWNED") and not hasattr(builtins, "PWNED")
    (record,) = skeleton_plan(spec).records
    assert getattr(module, record.cls).__doc__ == f"struct {inject} (4 bytes)"


def test_two_enums_of_one_name_and_names_equal_after_nfkc() -> None:
    spec = hostile_spec(enums=(("mode", ("A",)), ("mode", ("B", "B")), (FW_M + "ode", ("ﬁ", "fi", "class", "_X"))),
                        structs={"ﬁx": ("a",), "fix": ("b",)})
    module = check_spec(spec)
    plan = skeleton_plan(spec)
    assert [(e.name, e.cls, [m[0] for m in e.members]) for e in plan.enums] == [
        ("mode", "mode", ["A"]), ("mode", "mode_enum", ["B", "B_2"]), (FW_M + "ode", "mode_enum_2", ["fi_2", "fi", "class_"])]
    assert [e.hidden for e in plan.enums] == [(), (), ("_X",)]
    assert module.mode_enum_2.fi_2 == 0 and module.mode_enum_2.class_ == 2
    assert {r.name: r.cls for r in plan.records} == {"ﬁx": "fix", "fix": "fix_struct"}


def test_keywords_dunders_and_reserved_names() -> None:
    names = ["class", "__init__", "__dict__", "__x", "_skel", "_Record", "annotations", "int", "dict", "type",
             "load", "spec", "_views", "OBJECT", "RECORDS", "__class__", "", "9lives", "a-b", BLACK_H, FW_DUNDER_INIT]
    spec = hostile_spec(programs={n: "xdp" for n in names}, maps=tuple(f"m{n}" for n in names),
                        variables={f"v{n}": "u32" for n in names} | {"class_": "u32"})
    check_spec(spec)
    attrs = {a.name: a.attr for a in skeleton_plan(spec).programs}
    assert attrs["__init__"] == "_init__" and attrs[FW_DUNDER_INIT] == "_init___prog" and attrs[""] == "_"
    assert attrs["9lives"] == "_9lives" and attrs[BLACK_H] == "H" and attrs["a-b"] == "a_b"
    assert attrs["class"] == "class__prog"  # the variable class_ is named so in C: it claims its name first
    assert attrs["int"] == "int_" and attrs["_skel"] == "_skel_" and attrs["load"] == "load_"
    # No attribute starts with two underscores, however it is made (a class body mangles __x):
    spec = hostile_spec(programs={"": "x", "___class__": "y"}, maps=("",), variables={"": "t"}, section=".___init__")
    check_spec(spec)
    assert [(a.name, a.attr) for a in skeleton_plan(spec).attrs] == [
        ("", "_"), ("___class__", "_class__"), ("", "_map"), (".___init__", "_init__"), ("", "_var")]


def test_deeply_nested_arrays_and_structs() -> None:
    """C allows any depth: Python's parser takes at most 200 nested brackets (`list[list[...]]`),
    and a walk of 500 nested structs hit the recursion limit."""
    spec = hostile_spec(variables={"v": "u32", "w": "u32"})
    btf = spec.btf
    assert btf is not None
    tid = sid = spec.variables["v"].type_id
    for _ in range(300):
        tid = btf.add(Array(0, "", tid, tid, 1))
    for i in range(500):
        sid = btf.add(Struct(0, f"s{i}", 4, [Member("m", sid, 0)]))
    for name, type_id in (("v", tid), ("w", sid)):
        old = spec.variables[name]
        spec.variables[name] = VariableSpec(name, old.section, old.offset, 4, btf.add(Const(0, "", type_id)), btf,
                                            old.map_spec)
    check_spec(spec)


def test_class_name_python_reads_as_another() -> None:
    spec = hostile_spec(programs={"p": "xdp"})
    with pytest.raises(UsageError, match=rf"^skeleton class name '{FW_H}ostile' is not what Python reads: it "
                                         r"normalises identifiers \(NFKC\) to 'Hostile'; choose another with --name$"):
        generate(spec, FW_H + "ostile")
    with pytest.raises(UsageError, match=r"^skeleton class name '_skel' is also the name of a struct or enum of the "
                                         r"object, a builtin or a name the module imports: choose another with --name$"):
        generate(spec, "_skel")


def test_python_name() -> None:
    assert [python_name(n) for n in (OPEN, "ﬁx", "q²", "a-b", "", "9", "\u0301a", "⑴", "x\udcff")] == \
        ["open", "fix", "q2", "a_b", "_", "_9", "_\u0301a", "_1_", "x_"]


def test_reserved_covers_the_skeleton_class() -> None:
    """An attribute named like anything of Skeleton's but its dunders replaces it."""
    skel = DynamicSkeleton(hostile_spec(), "x.bpf.o")
    names = {n for n in set(dir(DynamicSkeleton)) | set(vars(skel)) if not (n.startswith("__") and n.endswith("__"))}
    assert names <= RESERVED, sorted(names - RESERVED)


# ---------------------------------------------------------------- property test
# Names from all of Unicode (surrogates too: a file name can hold them), mixed with the ones
# that matter to Python: keywords, Skeleton's names, the module's, NFKC look-alikes, line breaks.
SPECIAL = [*sorted(RESERVED), "class", "None", "__init__", "__class__", "_skel", "_Record", "_enum", "_ClassVar",
                              "annotations", "int", "list", "str", "mro", "name", "value", "to_dict", "_fields",
                              OPEN, "ﬁx", "fix", "q²", "\n", "\r", "\r\n", '"""', "'''", "\\", "#", "\x00",
                              "\u2028", "\x85", "\x0c", "\ufeff", "\u202e"]
any_char = st.characters(exclude_categories=())
name = st.one_of(st.text(any_char, max_size=6), st.sampled_from(SPECIAL),
                 st.lists(st.one_of(st.sampled_from(SPECIAL), st.text(any_char, max_size=3)), max_size=3).map("".join))
names = st.lists(name, max_size=5, unique=True)


@st.composite
def hostile_specs(draw: st.DrawFn) -> CollectionSpec:
    return hostile_spec(programs={n: draw(name) for n in draw(names)}, maps=tuple(draw(names)),
                        variables={n: draw(name) for n in draw(names)}, section="." + draw(name),
                        structs={n: tuple(draw(names)) or ("a",) for n in draw(names)},
                        enums=tuple((draw(name), tuple(draw(names))) for _ in range(draw(st.integers(0, 3)))),
                        name=draw(name))


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_specs())
def test_any_names_give_a_module_that_imports_and_reaches_everything(spec: CollectionSpec) -> None:
    check_spec(spec, "Hostile")


@pytest.fixture(autouse=True)
def _no_pwned() -> Iterator[None]:
    yield
    assert not hasattr(builtins, "PWNED") and not list(Path.cwd().glob("PWNED*"))
