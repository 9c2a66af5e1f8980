# SPDX-License-Identifier: Apache-2.0
"""freplace (BPF_PROG_TYPE_EXT, 5.6): a program that replaces a global function of another,
already loaded, program.

The target is named twice, as the kernel wants it (bpf_check_attach_target):

* at load: ``attach_prog_fd`` = the target program, ``attach_btf_id`` = the id of the replaced
  function's FUNC in the *target program's* BTF (not vmlinux's). The verifier checks the
  extension against that function's prototype, so the target must carry BTF (func_info).
* at attach: BPF_LINK_CREATE with ``target_fd`` = the target program and ``target_btf_id`` = the
  same id (5.10, 4a1e7c0c63e0, also lets one extension attach to several targets), or both 0
  for the load-time target; the attach type is ignored for ext programs.

Only global (non-static) functions are replaceable: static ones are not verified on their own
and have no stable prototype.
"""

from __future__ import annotations

import errno
import os
from typing import TypeAlias

from ._kernel import bpf as _bpf
from ._kernel.fd import FD
from ._protocols import ProgramArg
from .errors import BPFKitError, KernelError, NotFoundError, UsageError

__all__ = ["FreplaceTarget", "open_target", "target_func_id", "describe_target"]

# A freplace target program: a program or its fd, a pinned path, or ("id", N).
FreplaceTarget: TypeAlias = ProgramArg | str | os.PathLike[str] | tuple[str, int]


def describe_target(target: FreplaceTarget) -> str:
    """How a target program is named in messages."""
    if isinstance(target, tuple) and len(target) == 2 and target[0] == "id":
        return f"program id {target[1]}"
    if isinstance(target, (str, os.PathLike)):
        return f"pinned program {os.fspath(target)}"
    if isinstance(target, (FD, int)):
        return f"program fd {int(target)}"
    name = getattr(target, "name", "")
    return f"program {name!r}" if name else repr(target)


def open_target(target: FreplaceTarget) -> tuple[FD | int, FD | None]:
    """(fd to pass, fd to close afterwards or None) for a target program given as a Program
    (anything with ``.fd``), an FD, an fd number, a pinned path or ``("id", N)``."""
    what = describe_target(target)
    if isinstance(target, tuple) and len(target) == 2 and target[0] == "id":
        try:
            fd = _bpf.fd_by_id("prog", int(target[1]))
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                raise NotFoundError(f"open freplace target {what}: no such program") from None
            raise exc.wrap(f"open freplace target {what}")
        return fd, fd
    if isinstance(target, (str, os.PathLike)):
        try:
            fd = _bpf.obj_get(os.fspath(target))
        except KernelError as exc:
            if exc.errno == errno.ENOENT:
                raise NotFoundError(f"open freplace target {what}: nothing is pinned there") from None
            raise exc.wrap(f"open freplace target {what}")
        if _bpf.obj_kind(fd) != "prog":
            fd.close()
            raise UsageError(f"open freplace target {what}: the pinned object is not a program")
        return fd, fd
    if isinstance(target, (FD, int)):
        return target, None
    prog_fd = getattr(target, "fd", None)
    if prog_fd is None:
        raise UsageError(f"freplace target {what}: give a Program, an fd, a pinned path or prog_id")
    return prog_fd, None


def target_func_id(target_fd: FD | int, func: str, what: str) -> int:
    """The BTF id of global function ``func`` in the BTF of the loaded program ``target_fd``
    (its bpf_prog_info.btf_id), as libbpf's libbpf_find_prog_btf_id finds it."""
    from .btf import BTF
    from .btf.types import Func, Kind

    try:
        info = _bpf.obj_info(target_fd, "struct bpf_prog_info")
        btf_id = int(info.btf_id)
        if not btf_id:
            raise UsageError(f"freplace target {what} was loaded without BTF, so its functions cannot be replaced "
                             "(load it from an object built with -g)")
        btf_fd = _bpf.fd_by_id("btf", btf_id)
        try:
            blob = _bpf.btf_blob(btf_fd)
        finally:
            btf_fd.close()
        btf = BTF.from_bytes(blob)
    except BPFKitError as exc:
        raise exc.wrap(f"read the BTF of freplace target {what}")
    found = btf.find(func, Kind.FUNC)
    if not found:
        funcs = sorted(t.name for t in btf.types if isinstance(t, Func) and t.name)
        raise NotFoundError(f"freplace target {what} has no function {func!r} "
                            f"(its BTF has {', '.join(funcs) or 'no functions'})")
    return found[0].id
