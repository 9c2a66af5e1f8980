# SPDX-License-Identifier: Apache-2.0
"""ProgramSpec: a program as parsed from an object or written by hand, as plain data (the spec
layer: no syscalls). The kernel object loaded from it is bpfkit.program.Program.
"""

from __future__ import annotations

import dataclasses
import enum

from .._record import FrozenRecord, record_dataclass
from ..btf.ext import CORERelo
from ..errors import UsageError
from .consts import AttachType, ProgType

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ProgramSpec", "Reference", "RefKind"]


@record_dataclass  # a dataclass whose methods are not generated: see bpfkit._record
class ProgramSpec:
    """A program as parsed from an object (or written by hand), before it meets the kernel.

    ``instructions`` are final bytecode for the kernel when the spec comes out of a
    Collection's relocation step; a spec made by hand must already hold map fds etc.
    """

    name: str
    type: ProgType
    instructions: bytes = dataclasses.field(repr=False)
    license: str = "GPL"
    section: str = ""
    attach_type: AttachType | None = None  # expected_attach_type
    attach_to: str = ""  # target named in the section (``syscalls/sys_enter_openat``)
    kernel_version: int = 0
    flags: int = 0  # prog_flags (BPF_F_SLEEPABLE, ...)
    autoload: bool = True  # False for libbpf's "?sec" programs
    # func_info/line_info records (struct bpf_func_info/bpf_line_info) for the final layout,
    # passed with the collection's BTF fd.
    func_info: bytes = dataclasses.field(default=b"", repr=False)
    func_info_rec_size: int = 0
    line_info: bytes = dataclasses.field(default=b"", repr=False)
    line_info_rec_size: int = 0
    attach_btf_id: int = 0
    attach_btf_obj_fd: int = 0
    attach_prog_fd: int = 0
    # freplace (BPF_PROG_TYPE_EXT): the program whose function this one replaces, as given to
    # set_attach_target (a Program, an FD or fd number, a pinned path, or ("id", N)); the
    # Collection resolves it to attach_prog_fd/attach_btf_id when it loads.
    attach_prog: Any = dataclasses.field(default=None, repr=False)
    ifindex: int = 0
    # Filled by the ELF loader; resolved when a Collection loads the program.
    references: list[Reference] = dataclasses.field(default_factory=list)
    core_relos: list[tuple[int, CORERelo]] = dataclasses.field(default_factory=list)  # (insn index, relocation)
    functions: list[tuple[str, int]] = dataclasses.field(default_factory=list)  # (name, first insn)
    needs_kernel_version: bool = False  # the object's "version" section asked for the running kernel's
    # __ksym externs (kfunc calls, ld_imm64 of kernel symbols): (insn index, extern name),
    # resolved when a Collection loads the program (bpfkit.spec.externs).
    extern_refs: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    # BPF_PROG_LOAD's fd_array: module BTF fds that kfunc calls index with their offset
    # (slot 0 unused); set by the Collection while it loads.
    fd_array: list[int] = dataclasses.field(default_factory=list, repr=False)

    def set_attach_target(self, target: str, prog: Any = None, *, prog_id: int = 0) -> None:
        """Name what a BTF-enabled program (fentry/fexit/fmod_ret, tp_btf, lsm, iter, freplace)
        attaches to, before loading, as libbpf's bpf_program__set_attach_target does: a function
        (``do_unlinkat``, ``MODULE:function``), tracepoint, LSM hook or iterator target. It
        replaces what the section names (``SEC("fentry")`` may name nothing); the BTF id is
        resolved when a Collection loads the program.

        For an ``ext`` (``SEC("freplace/FUNC")``) program, ``target`` is the global function to
        replace and ``prog`` (or ``prog_id``) the program holding it: a loaded Program, an FD or
        fd number, or the path of a pinned program. The target must have been loaded with BTF.
        """
        self.attach_to = target
        self.attach_btf_id = 0
        self.attach_btf_obj_fd = 0
        if prog is not None and prog_id:
            raise UsageError(f"program {self.name!r}: give the target program or its id, not both")
        if prog is not None or prog_id:
            self.attach_prog = ("id", prog_id) if prog_id else prog
            self.attach_prog_fd = 0

    def copy(self) -> ProgramSpec:
        return dataclasses.replace(
            self, references=list(self.references), core_relos=list(self.core_relos),
            functions=list(self.functions), extern_refs=list(self.extern_refs), fd_array=list(self.fd_array),
        )

    @property
    def insn_count(self) -> int:
        return len(self.instructions) // 8


class RefKind(enum.IntEnum):
    """How an instruction refers to a map; the values are the ld_imm64 src_reg the kernel reads."""

    MAP_FD = 1  # BPF_PSEUDO_MAP_FD: imm = the map's fd
    MAP_VALUE = 2  # BPF_PSEUDO_MAP_VALUE: imm = fd, next imm = offset into value 0 (global data)


class Reference(FrozenRecord):
    """An ld_imm64 at instruction ``insn`` that must hold map ``map``'s fd when loaded.
    (A frozen record, bpfkit._record: a frozen dataclass's repr, equality and hashing without
    generating methods at import.)"""

    __slots__ = ("insn", "map", "kind", "offset")
    insn: int
    map: str
    kind: RefKind
    offset: int  # byte offset into the map value, for MAP_VALUE

    def __init__(self, insn: int, map: str, kind: RefKind = RefKind.MAP_FD, offset: int = 0) -> None:
        self._set_fields(insn, map, kind, offset)
