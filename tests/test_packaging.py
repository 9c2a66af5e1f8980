# SPDX-License-Identifier: Apache-2.0
"""The distributions, built from the checkout with `python -m build` (about 4 s): the wheel
built from the sdist has the same files and bytes as one built from the tree, holds what the
package needs (tests/packaging_support.py: py.typed, the pre-generated cffi module, the example
source, the licence texts, byte for byte the checkout's) and nothing else, `twine check` passes,
and each extra asks for the versions the test extra does (the lowest-versions leg of
scripts/wheel-legs.sh installs them all at once, so a looser bound in one extra would go untested).
Where bpfkit is an installed wheel (that script's legs run the suite from a copy without bpfkit/),
the installed files are checked instead."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

import bpfkit
from tests.packaging_support import REPO, REQUIRED, wheel_differences, wheel_members, wheel_metadata, wheel_problems

from_checkout = (REPO / "bpfkit" / "__init__.py").is_file()
needs_checkout = pytest.mark.skipif(not from_checkout, reason="builds the distributions from the checkout's bpfkit/, absent here "
                                    "(the suite runs against an installed wheel: scripts/wheel-legs.sh)")


def _backend_installed() -> bool:
    """Whether this environment has what pyproject.toml's build-system requires (the test extra
    brings setuptools): then the builds skip making three fresh environments (about 3x faster);
    scripts/wheel-legs.sh's build leg builds in isolation."""
    import tomllib

    from packaging.requirements import Requirement

    for line in tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]:
        req = Requirement(line)
        try:
            if not req.specifier.contains(metadata.version(req.name), prereleases=True):
                return False
        except metadata.PackageNotFoundError:
            return False
    return True


def _build(out: Path, *args: str) -> Path:
    isolation = ["--no-isolation"] if _backend_installed() else []
    proc = subprocess.run([sys.executable, "-m", "build", *isolation, *args, "-o", str(out), str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, f"python -m build {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the directory with the sdist and the wheel built from it, the one with a wheel built from the tree)."""
    pytest.importorskip("build", reason="needs the build package (the test extra)")
    egg_info = REPO / "bpfkit.egg-info"  # setuptools' egg_info step writes it into the source tree
    if not os.access(egg_info if egg_info.exists() else REPO, os.W_OK):
        pytest.skip(f"python -m build writes {egg_info}, which this user cannot write (run as the checkout's owner)")
    tmp = tmp_path_factory.mktemp("dists")
    # setuptools stages the sdist and egg-info inside the checkout: a second copy of the suite
    # building at the same moment (scripts/test-twice.sh) broke this one's ("No such file or
    # directory: 'bpfkit-0.1.0/bpfkit/usdt'"). One build at a time per checkout: a lock on it.
    checkout = os.open(REPO, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(checkout, fcntl.LOCK_EX)
        # setuptools copies the package into build/lib and never removes what left the tree: a
        # module moved since the last build would be in the wheel built from the tree.
        shutil.rmtree(REPO / "build", ignore_errors=True)
        built = _build(tmp / "dist"), _build(tmp / "direct", "--wheel")
    finally:
        os.close(checkout)  # releases the lock
    yield built


@needs_checkout
def test_wheel_from_sdist_equals_wheel_from_tree(dists: tuple[Path, Path]) -> None:
    assert wheel_differences(*(next(d.glob("*.whl")) for d in dists)) == []


@needs_checkout
def test_wheel_holds_the_package_and_licences(dists: tuple[Path, Path]) -> None:
    wheel = next(dists[0].glob("*.whl"))
    names = sorted(wheel_members(wheel))
    assert wheel_problems(names) == []
    with zipfile.ZipFile(wheel) as z:
        for name in names:
            if "/licenses/" in name:
                assert z.read(name) == (REPO / name.split("/licenses/", 1)[1]).read_bytes(), name
    assert wheel_metadata(wheel)["License-Expression"] == "Apache-2.0 AND (GPL-2.0-only OR BSD-2-Clause)"


@needs_checkout
def test_twine_check_passes(dists: tuple[Path, Path]) -> None:
    twine = shutil.which("twine", path=str(Path(sys.executable).parent))
    if twine is None:
        pytest.skip("needs twine (the test extra)")
    files = [str(p) for p in sorted(dists[0].iterdir())]
    proc = subprocess.run([twine, "check", "--strict", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_extra_asks_what_the_test_extra_does() -> None:
    from packaging.requirements import Requirement

    dist = metadata.distribution("bpfkit")
    by_extra: dict[str, dict[str, str]] = {}
    for line in dist.requires or []:
        req = Requirement(line)
        for extra in dist.metadata.get_all("Provides-Extra") or []:
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                by_extra.setdefault(extra, {})[req.name.lower()] = str(req.specifier)
    test = by_extra.pop("test")
    differ = {f"{extra}: {name}{spec}": f"test: {name}{test.get(name)}"
              for extra, reqs in by_extra.items() for name, spec in reqs.items() if test.get(name) != spec}
    assert differ == {}


@pytest.mark.skipif(from_checkout, reason="checks an installed wheel's files; bpfkit here is the checkout (scripts/wheel-legs.sh runs it)")
def test_installed_wheel_has_its_files() -> None:
    """Run by scripts/wheel-legs.sh's legs: bpfkit comes from the wheel, not from a tree."""
    files = metadata.files("bpfkit") or []
    # RECORD also lists the installer's bytecode and the console script (outside site-packages).
    assert wheel_problems([str(f) for f in files if not str(f).startswith("..") and "__pycache__" not in str(f)]) == []
    package = Path(bpfkit.__file__).parent
    assert all((package.parent / name).is_file() for name in REQUIRED)
