# SPDX-License-Identifier: Apache-2.0
"""Programs: Program (a loaded program owning its fd), loaded from a ProgramSpec (plain data,
defined in the spec layer, bpfkit.spec.programs, and re-exported here)."""

from __future__ import annotations

import dataclasses
import errno

from ._kernel import bpf as _bpf
from ._kernel.bpffs import PinnableObject
from ._kernel.consts import AttachType, ProgType
from ._kernel.fd import FD
from ._kernel.rlimit import bump_memlock
from ._lazy import lazy_getattr
from .errors import BPFKitError, KernelError, NotSupportedError, VerifierError, permission_hint
from .spec.programs import ProgramSpec as ProgramSpec  # the spec names, re-exported (bpfkit.program.ProgramSpec)
from .spec.programs import Reference as Reference
from .spec.programs import RefKind as RefKind

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from ._kernel.info import ProgramInfo as ProgramInfo  # what Program.info() gives: bpfkit.program.ProgramInfo

__all__ = ["ProgramSpec", "Program", "ProgramInfo", "LoadOptions", "Reference", "RefKind"]
# ProgramInfo is bpfkit._kernel.info's, re-exported on first use (as Program.info() imports it):
# that module is ~0.4 ms of every start-up, most of which never ask a program for its info.
__getattr__ = lazy_getattr(__name__, {"ProgramInfo": "bpfkit._kernel.info"}, globals())


@dataclasses.dataclass
class LoadOptions:
    """How programs are loaded.

    ``log_level``: 0 loads without a log and retries with level 1 only if the verifier
    rejects (the fast path); 1 or 2 always log (``Program.verifier_log`` keeps it).
    ``log_whole``: VerifierError messages show the whole log instead of its tail.
    """

    log_level: int = 0
    log_whole: bool = False


class Program(PinnableObject):
    """A loaded BPF program. Close with :meth:`close` or ``with``; a pinned program stays."""

    KIND = "program"

    def __init__(self, spec: ProgramSpec, options: LoadOptions | None = None, btf_fd: int = 0) -> None:
        bump_memlock()  # kernels before 5.11 charge programs to RLIMIT_MEMLOCK
        options = options or LoadOptions()
        kwargs: dict[str, Any] = dict(
            prog_type=int(spec.type),
            insns=spec.instructions,
            license=spec.license,
            expected_attach_type=int(spec.attach_type) if spec.attach_type is not None else 0,
            kern_version=spec.kernel_version,
            prog_flags=spec.flags,
            attach_btf_id=spec.attach_btf_id,
            attach_btf_obj_fd=spec.attach_btf_obj_fd,
            attach_prog_fd=spec.attach_prog_fd,
            ifindex=spec.ifindex,
        )
        if spec.fd_array:
            kwargs["fd_array"] = spec.fd_array
        if btf_fd and (spec.func_info or spec.line_info):
            kwargs.update(
                prog_btf_fd=btf_fd,
                func_info=spec.func_info,
                func_info_rec_size=spec.func_info_rec_size,
                line_info=spec.line_info,
                line_info_rec_size=spec.line_info_rec_size,
            )
        self.verifier_log = ""
        sink: list[str] = []
        try:
            if options.log_level:
                fd = _bpf.prog_load_with_log(spec.name, log_level=options.log_level, log_sink=sink, **kwargs)
                self.verifier_log = sink[-1] if sink else ""
            else:
                try:
                    fd = _bpf.prog_load(name=spec.name, **kwargs)
                except KernelError as exc:
                    if exc.errno not in (errno.EACCES, errno.EINVAL, errno.EPERM, errno.E2BIG, errno.ENOSPC,
                                         errno.ENOENT):
                        raise
                    # Load again with a log: the verifier explains EACCES/EINVAL there (and
                    # ENOENT: a __ksym whose address kallsyms lacks). A refusal before
                    # verification (EPERM, no log) raises VerifierError too.
                    fd = _bpf.prog_load_with_log(spec.name, log_level=1, **kwargs)
        except VerifierError as exc:
            if options.log_whole:
                # Rebuild the message around the whole log instead of its tail.
                exc.TAIL_LINES = 1 << 30
                exc.__init__(exc.op, exc.errno, exc.name, exc.log, exc.truncated)  # type: ignore[misc]
            _explain_permission(exc, spec)
            _explain_trampoline_refusal(exc, spec)
            _explain_session_refusal(exc, spec)
            _refuse_unknown_callbacks(exc, spec)
            raise exc.wrap(f"load program {spec.name!r} ({spec.type.kernel_name})")
        except BPFKitError as exc:
            raise exc.wrap(f"load program {spec.name!r} ({spec.type.kernel_name})")
        self._init(fd, spec)

    def _init(self, fd: FD, spec: ProgramSpec) -> None:
        self.fd = fd
        self.spec = spec
        self.name = spec.name
        self.type = spec.type
        self.attach_type = spec.attach_type
        self.section = spec.section  # the ELF section ("tracepoint/syscalls/sys_enter_openat")
        self.attach_to = spec.attach_to  # its target ("syscalls/sys_enter_openat"), for auto-attach
        self.pinned_path: str | None = None

    @classmethod
    def from_fd(cls, fd: FD, name: str | None = None) -> Program:
        """Adopt ``fd`` (ownership moves to the Program), described by the kernel's info."""
        from ._kernel import info as _info

        info = _info.read_adopted(fd, lambda f: _info.program_info(f, with_map_ids=False))
        spec = ProgramSpec(
            name=name or info.name,
            type=ProgType(info.type),
            instructions=b"",
        )
        self = cls.__new__(cls)
        self.verifier_log = ""
        self._init(fd, spec)
        return self

    @classmethod
    def load_pinned(cls, path: str) -> Program:
        self = cls.from_fd(cls._open_pinned(path))
        self.pinned_path = path
        return self

    @classmethod
    def from_id(cls, prog_id: int) -> Program:
        return cls.from_fd(_bpf.fd_by_id("prog", prog_id))

    def info(self) -> ProgramInfo:
        """The kernel's description of this program (struct bpf_prog_info, BPF_OBJ_GET_INFO_BY_FD),
        with the ids of the maps it uses."""
        from ._kernel.info import program_info

        return program_info(self.fd)

    @property
    def id(self) -> int:
        from ._kernel.info import object_id

        return object_id(self.fd, "prog")

    def test_run(self, data: bytes = b"", data_out_size: int = 0, ctx: bytes = b"", ctx_out_size: int = 0,
                 repeat: int = 1, flags: int = 0) -> tuple[int, bytes]:
        """Run the program in the kernel with BPF_PROG_TEST_RUN; returns (retval, data_out)."""
        try:
            retval, out, _, _ = _bpf.prog_test_run(self.fd, data, data_out_size, ctx, ctx_out_size, repeat, flags)
        except BPFKitError as exc:
            raise exc.wrap(f"test run of program {self.name!r}")
        return retval, out

    def __repr__(self) -> str:
        return f"Program({self.name!r}, {self.type.kernel_name}, fd={self.fd!r})"


def _takes_callback_address(instructions: bytes) -> bool:
    """Whether some ld_imm64 loads a sub-program's address (src_reg BPF_PSEUDO_FUNC)."""
    # BPF_LD|BPF_DW|BPF_IMM (0x18) with src_reg 4
    return any(instructions[at] == 0x18 and instructions[at + 1] >> 4 == 4 for at in range(0, len(instructions) - 7, 8))


def _refuse_unknown_callbacks(exc: VerifierError, spec: ProgramSpec) -> None:
    """EINVAL for a program passing a callback (bpf_loop, bpf_for_each_map_elem, timers) on a
    kernel older than 5.13, which rejects it with an unrelated-looking func_info complaint."""
    if exc.errno != errno.EINVAL or not _takes_callback_address(spec.instructions):
        return
    from .features import probe

    result = probe("callbacks")
    if not result.supported:
        raise NotSupportedError(
            f"load program {spec.name!r} ({spec.type.kernel_name}): it passes a callback "
            "(BPF_PSEUDO_FUNC: bpf_loop, bpf_for_each_map_elem, timers)", result.reason, result.min_version
        ) from exc


_SESSIONS = {
    AttachType.TRACE_KPROBE_SESSION: ("kprobe_session", "kprobe sessions (BPF_TRACE_KPROBE_SESSION)", "6.10"),
    AttachType.TRACE_UPROBE_SESSION: ("uprobe_session", "uprobe sessions (BPF_TRACE_UPROBE_SESSION)", "6.13"),
}


def _explain_session_refusal(exc: VerifierError, spec: ProgramSpec) -> None:
    """A kprobe.session/uprobe.session program refused by a kernel without sessions: the
    verifier's complaint (an unknown kfunc, a helper) hides that the whole kind is missing."""
    session = _SESSIONS.get(spec.attach_type) if spec.attach_type is not None else None
    if session is None:
        return
    feature, what, release = session
    from .features import probe

    result = probe(feature)
    if result.supported:
        return
    exc.add_hint(f"{what} need Linux {release}: {result.reason}")


def _explain_trampoline_refusal(exc: VerifierError, spec: ProgramSpec) -> None:
    """EPERM with an empty log for an fentry/fexit/fmod_ret/lsm program: the kernel refused
    the BPF trampoline before the verifier ran; say so (seen on kernels that forbid them)."""
    if exc.errno != errno.EPERM or exc.log.strip() or spec.type not in (ProgType.TRACING, ProgType.LSM, ProgType.EXT):
        return
    if spec.type != ProgType.EXT and spec.attach_type in (AttachType.TRACE_ITER, AttachType.TRACE_RAW_TP):
        return
    exc.add_hint(
        "BPF trampoline programs (fentry/fexit/fmod_ret/lsm/freplace) need trampoline support on this kernel "
        "(bpfkit.features.probe('tracing_programs') tells whether any fentry program loads here)"
    )


def _explain_permission(exc: VerifierError, spec: ProgramSpec) -> None:
    """Rephrase the EPERM hint for this program's type: tracing types need CAP_PERFMON,
    networking ones CAP_NET_ADMIN, besides CAP_BPF (kernel/bpf/syscall.c bpf_prog_load)."""
    old = getattr(exc, "hint", "")
    if exc.errno != errno.EPERM or exc.log.strip() or not old:
        return
    from ._kernel import caps as _caps

    new = permission_hint(exc.op, exc.errno, _caps.prog_type_needs(int(spec.type)))
    if new and new != old:
        exc.replace_hint(old, new)
        exc.hint = new


def program_ids() -> Any:
    """The ids of every program loaded in the system, ascending (BPF_PROG_GET_NEXT_ID, 4.13;
    needs CAP_SYS_ADMIN). Open one with :meth:`Program.from_id` (it may be gone by then: ENOENT)."""
    return _bpf.iter_ids("prog")
