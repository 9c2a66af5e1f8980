# SPDX-License-Identifier: Apache-2.0
"""Every source file says its licence in an SPDX line, and the BPF objects' `license` sections
say what their sources say.

The licences (pyproject.toml's `license` expression; texts in LICENSE and LICENSES/):
- bpfkit's Python code, scripts, tests, benchmarks and user-space C: Apache-2.0;
- BPF C (everything in bpf/, the examples' and the bundled example's *.bpf.c / *.bpf.h):
  GPL-2.0-only OR BSD-2-Clause, as libbpf-tools license theirs, and their objects'
  `char LICENSE[] SEC("license") = "Dual BSD/GPL";` (which the kernel counts as GPL-compatible:
  license_is_gpl_compatible() in kernel/module/main.c, so GPL-only helpers stay callable).

The files checked: bpfkit/**/*.py, bpf/** (*.c, *.h, Makefile), examples/** (*.py, *.c, *.h),
scripts/* (every file), benchmarks/** (*.py, *.c, *.h, *.sh), tests/**/*.py, integration/**
(*.py, *.c, *.sh) and conftest.py. Left out, and why: skeletons (examples/*/*_skel.py) are
`bpfkit gen skeleton`'s output, whose licence is the user's (tests/test_skeleton.py checks they
are current); tests/corpus/ holds data; bpf/.output/ and __pycache__/ are build products;
docs/, deploy/ (Kubernetes manifests), the Dockerfile and pyproject.toml are not source code
(they fall under the package's Apache-2.0 by the LICENSE at the root).
The SPDX line is the first line, or the second after a `#!` line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import bpfkit
from bpfkit.errors import VerifierError
from conftest import checkout_relative, source_path

REPO = Path(__file__).resolve().parent.parent
BPF_LICENCE = "GPL-2.0-only OR BSD-2-Clause"
PY_LICENCE = "Apache-2.0"
# What the kernel and libbpf-tools write in the license section for GPL-2.0 OR BSD-2-Clause.
BPF_LICENSE_SECTION = "Dual BSD/GPL"

# (directory, glob patterns); every pattern is searched recursively below the directory.
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bpfkit", ("*.py", "*.c", "*.h")),
    ("bpf", ("*.c", "*.h", "Makefile")),
    ("examples", ("*.py", "*.c", "*.h")),
    ("scripts", ("*",)),
    ("benchmarks", ("*.py", "*.c", "*.h", "*.sh")),
    ("tests", ("*.py",)),
    ("integration", ("*.py", "*.c", "*.sh")),
)
SKIPPED_DIRS = {".output", "__pycache__", "corpus"}


def source_files() -> Iterator[Path]:
    yield REPO / "conftest.py"
    for top, patterns in SOURCES:
        seen: set[Path] = set()
        for pattern in patterns:
            for path in sorted(source_path(top).rglob(pattern)):
                rel = Path(checkout_relative(path))
                if (not path.is_file() or path in seen or SKIPPED_DIRS & set(rel.parts)
                        or path.name.endswith("_skel.py")):
                    continue
                seen.add(path)
                yield path


def is_bpf_source(rel: str) -> bool:
    return rel.startswith("bpf/") or rel.endswith((".bpf.c", ".bpf.h"))


def expected_line(path: Path) -> str:
    rel = checkout_relative(path)
    expr = BPF_LICENCE if is_bpf_source(rel) else PY_LICENCE
    if path.suffix == ".c":
        return f"// SPDX-License-Identifier: {expr}"
    if path.suffix == ".h":
        return f"/* SPDX-License-Identifier: {expr} */"  # headers: the kernel's comment style
    return f"# SPDX-License-Identifier: {expr}"


def spdx_line(path: Path) -> str:
    lines = path.read_text().splitlines()[:2]
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    return lines[0] if lines else ""


def test_every_source_file_has_its_spdx_line() -> None:
    files = list(source_files())
    assert len(files) > 300, f"only {len(files)} source files found: is SOURCES still right?"
    wrong = [f"{checkout_relative(p)}: {spdx_line(p)!r}, expected {expected_line(p)!r}"
             for p in files if spdx_line(p) != expected_line(p)]
    assert not wrong, "\n".join(wrong)


def test_licence_texts_are_there() -> None:
    for name in ("LICENSE", "LICENSES/Apache-2.0.txt", "LICENSES/GPL-2.0-only.txt", "LICENSES/BSD-2-Clause.txt"):
        assert (REPO / name).stat().st_size > 1000, name
    assert (REPO / "LICENSE").read_text() == (REPO / "LICENSES/Apache-2.0.txt").read_text()


LICENSE_SECTION = re.compile(r'SEC\("license"\)\s*=\s*"([^"]*)"')
LOCAL_INCLUDE = re.compile(r'^#include\s+"([^"]+\.c)"', re.M)


def source_licence(source: Path) -> str | None:
    """The license section a BPF C source defines, following `#include "x.c"` (as
    bpf/cli_opensnoop.bpf.c includes the bundled example)."""
    text = source.read_text()
    found = LICENSE_SECTION.findall(text)
    for inc in LOCAL_INCLUDE.findall(text):
        # The include as the checkout names it (an installed wheel's run has bpfkit/'s elsewhere).
        included = source_path(checkout_relative((source.parent / inc).resolve()))
        found += [lic for lic in [source_licence(included)] if lic]
    assert len(found) <= 1, f"{source}: more than one license section: {found}"
    return found[0] if found else None


def bpf_objects() -> list[tuple[Path, str]]:
    """(source, object name in bpf/.output) of every BPF program the Makefile builds."""
    out = [(src, src.name.removesuffix(".c")) for src in sorted((REPO / "bpf").glob("*.bpf.c"))]
    out += [(src, "examples/" + src.name.removesuffix(".c")) for src in sorted((REPO / "examples").glob("*/*.bpf.c"))]
    return out


def test_bpf_sources_define_the_dual_licence() -> None:
    wrong = [f"{checkout_relative(src)}: {source_licence(src)!r}" for src, _ in bpf_objects()
             if source_licence(src) != BPF_LICENSE_SECTION]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("source", "obj"), bpf_objects(), ids=[o for _, o in bpf_objects()])
def test_object_license_section_matches_its_source(bpf_obj, source: Path, obj: str) -> None:
    path = bpf_obj(obj.removesuffix(".bpf"))
    assert bpfkit.load_spec(path).license == source_licence(source), path


@pytest.mark.root
def test_kernel_takes_dual_licence_as_gpl_compatible(bpf_obj) -> None:
    """events_seq calls bpf_perf_event_output, a GPL-only helper (gpl_only in its
    bpf_func_proto): the verifier refuses it to a non-GPL-compatible licence ("cannot call
    GPL-restricted function from non-GPL compatible program"), so loading proves the kernel
    takes "Dual BSD/GPL" as GPL-compatible."""
    spec = bpfkit.load_spec(bpf_obj("events_seq"))
    assert spec.license == BPF_LICENSE_SECTION
    with bpfkit.Collection(spec) as coll:
        assert coll.programs
    for prog in spec.programs.values():  # the contrast: the same object under a non-GPL licence
        prog.license = "Proprietary"
    with pytest.raises(VerifierError, match="cannot call GPL-restricted function from non-GPL compatible program"):
        bpfkit.Collection(spec).close()
