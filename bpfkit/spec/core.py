# SPDX-License-Identifier: Apache-2.0
"""CO-RE computation for a spec against BTF that is given (a BTF or a file), without loading:
how each program's relocations resolve. The spec layer: no syscalls. Resolving against the
running kernel's BTF reads /sys/kernel/btf, which is the kernel side's (bpfkit.kernelfit) and
passes the BTF in through ``targets``/``modules``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ..btf import BTF
from ..errors import KernelError, NotFoundError

TYPE_CHECKING = False  # not typing's (start-up time); names for the type checker only
if TYPE_CHECKING:
    from ..btf.core import CoreResolution
    from .collection import CollectionSpec

__all__ = ["btf_arg", "resolve_core"]

BTFSource = BTF | str | os.PathLike[str]


def btf_arg(value: BTFSource) -> BTF:
    """A ``kernel_btf=`` argument (a BTF, or the path of a BTF blob or an ELF file with .BTF) as a BTF."""
    if isinstance(value, BTF):
        return value
    from ..btf.file import load_file

    try:
        return load_file(value)
    except KernelError:  # read_regular's, naming what it read (a KernelError is an OSError too)
        raise
    except OSError as exc:
        raise NotFoundError(f"kernel BTF file {os.fspath(value)}: {exc.strerror}") from None


def resolve_core(spec: CollectionSpec, targets: Sequence[BTF],
                 modules: Callable[[], Sequence[BTF]] | None = None) -> dict[str, list[CoreResolution]]:
    """Every program's CO-RE relocations resolved against ``targets`` (then, for types they
    lack, ``modules()``): {program: [CoreResolution]}, empty lists without CO-RE."""
    if spec.btf is None or not any(p.core_relos for p in spec.programs.values()):
        return {name: [] for name in spec.programs}
    from ..btf.core import CORERelocator, relocate  # only objects with CO-RE relocations get here

    relocator = CORERelocator(spec.btf, targets, modules)
    relocator.prefetch(r for p in spec.programs.values() for _, r in p.core_relos)
    out: dict[str, list[CoreResolution]] = {}
    for name, pspec in spec.programs.items():
        # Patched as a load would (a copy): that is where loads that cannot be resized are
        # poisoned and instructions that do not hold what the compiler said are refused.
        _, out[name] = relocate(name, pspec.instructions, pspec.core_relos, relocator)
    return out
