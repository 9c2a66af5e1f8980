# SPDX-License-Identifier: Apache-2.0
"""Fitting an object to the running kernel while a Collection loads it: CO-RE relocations,
``__kconfig``/``__ksym`` externs and kfunc calls, and the BTF the kernel will accept.

The pure parts live in bpfkit.btf.core (relocations), bpfkit.spec.externs (externs) and
bpfkit.btf.sanitize (BTF rewrites); this module gathers what they need from the kernel (its
BTF, configuration, symbols, feature probes, module BTF fds) and applies the results to a
program's instructions. One :class:`KernelFit` serves every program of a collection, so kernel
BTF is searched once per root type (as libbpf's per-object candidate cache).
"""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Mapping

from .btf import BTF
from .errors import BPFKitError, NotFoundError, UsageError, VerifierError
from .spec import core as spec_core
from .spec.core import btf_arg

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from .btf.core import CoreResolution
    from .spec.collection import CollectionSpec

__all__ = ["KernelFit", "resolve_core"]

_INSN = struct.Struct("<BBhi")
_I32 = struct.Struct("<i")
_PSEUDO_BTF_ID = 3
_PSEUDO_KFUNC_CALL = 2


def _feature(name: str) -> bool:
    from . import features

    return features.probe(name).supported


def kernel_btf_arg(value: BTF | str | os.PathLike[str] | None) -> BTF | None:
    """A ``kernel_btf=`` argument (a BTF or a path to one) as a BTF (None stays None)."""
    return None if value is None else btf_arg(value)


def _kernel_targets() -> list[BTF]:
    """[vmlinux's BTF], for CO-RE against the running kernel."""
    from . import kernel_btf as kernel

    try:
        return [kernel.vmlinux()]
    except BPFKitError as exc:
        raise exc.wrap("CO-RE relocations are resolved against the kernel's BTF (pass kernel_btf= "
                       "with a BTF file for kernels without /sys/kernel/btf/vmlinux)")


def _relocator(local: BTF, kernel_btf: BTF | None) -> Any:
    from . import kernel_btf as kernel
    from .btf import core

    if kernel_btf is not None:
        return core.CORERelocator(local, [kernel_btf])
    return core.CORERelocator(local, _kernel_targets(), kernel.modules)


def resolve_core(spec: CollectionSpec, kernel_btf: BTF | str | os.PathLike[str] | None = None
                 ) -> dict[str, list[CoreResolution]]:
    """Every program's CO-RE relocations resolved against the running kernel (or
    ``kernel_btf``), without loading anything: {program: [bpfkit.btf.core.CoreResolution]}.
    The computation is the spec layer's (bpfkit.spec.core); this reads the kernel's BTF for it."""
    if kernel_btf is not None:
        return spec_core.resolve_core(spec, [btf_arg(kernel_btf)])
    if spec.btf is None or not any(p.core_relos for p in spec.programs.values()):
        return {name: [] for name in spec.programs}
    from . import kernel_btf as kernel

    return spec_core.resolve_core(spec, _kernel_targets(), kernel.modules)


class KernelFit:
    """Per-collection state for fitting programs to the kernel. Owns module BTF fds while
    programs load (:meth:`close` releases them)."""

    def __init__(self, spec: Any, kernel_btf: BTF | str | os.PathLike[str] | None = None,
                 kconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None) -> None:
        self.spec = spec
        self.kernel_btf = kernel_btf_arg(kernel_btf)
        self.kconfig = kconfig
        self.core_resolutions: dict[str, list[Any]] = {}
        self.btf_rewrites: list[str] = []
        self.kconfig_source = ""
        self._relocator: Any = None
        self._ksyms: dict[str, Any] = {}
        self._module_fds: dict[str, Any] = {}  # module name -> FD
        self._fd_array: list[int] = []  # [0, module fds...]: kfunc calls index it with insn.off
        self._fd_index: dict[str, int] = {}

    # ------------------------------------------------------------------------- BTF
    def object_btf(self) -> bytes | None:
        """The object's BTF as the running kernel accepts it (newer kinds rewritten)."""
        btf = self.spec.btf
        if btf is None:
            return None
        from .btf.sanitize import sanitize

        clean, self.btf_rewrites = sanitize(btf, _feature)
        return clean.to_bytes()

    # --------------------------------------------------------------------- externs
    def resolve_externs(self, programs: list[Any]) -> bytes | None:
        """Resolve the __ksym externs ``programs`` use and every __kconfig one; returns the
        .kconfig map's value (None without __kconfig). (libbpf resolves every extern of the
        object; a kernel symbol only an unloaded program needs does not stop the others here.)"""
        externs = self.spec.externs
        if not externs:
            return None
        from .spec.externs import ExternKind

        used = {name for p in programs for _, name in p.extern_refs}
        try:
            ksyms = [e for e in externs.values() if e.kind == ExternKind.KSYM and e.name in used]
            if ksyms:
                self._resolve_ksyms(ksyms)
            if any(e.kind == ExternKind.KCONFIG for e in externs.values()):
                return self._kconfig_data()
        except BPFKitError as exc:
            raise exc.wrap("resolve externs")
        return None

    def _kconfig_data(self) -> bytes:
        from ._kernel import kinfo
        from .spec.externs import ExternKind, kconfig_data, parse_kconfig

        kcfg = [e for e in self.spec.externs.values() if e.kind == ExternKind.KCONFIG]
        config: dict[str, str] | None = None
        if any(e.name.startswith("CONFIG_") for e in kcfg):
            if isinstance(self.kconfig, Mapping):
                config = {k: _config_text(v) for k, v in self.kconfig.items()}
                self.kconfig_source = "the kconfig mapping given"
            else:
                try:
                    text, self.kconfig_source = kinfo.read_kconfig(os.fspath(self.kconfig) if self.kconfig else None)
                    config = parse_kconfig(text)
                except NotFoundError as exc:
                    strong = [e.name for e in kcfg if e.name.startswith("CONFIG_") and not e.weak]
                    if self.kconfig is not None or strong:
                        raise exc.wrap(f"__kconfig extern {(strong or [kcfg[0].name])[0]!r}")
                    warnings.warn(f"bpfkit: {exc}; __weak CONFIG_* externs are 0", RuntimeWarning, stacklevel=4)
        names = {e.name for e in kcfg}
        virtual: dict[str, Any] = {}
        if "LINUX_KERNEL_VERSION" in names:
            from .features.probes import kernel_version_code

            virtual["LINUX_KERNEL_VERSION"] = kernel_version_code()
        if "LINUX_HAS_SYSCALL_WRAPPER" in names:
            virtual["LINUX_HAS_SYSCALL_WRAPPER"] = kinfo.has_syscall_wrapper()
        if "LINUX_HAS_BPF_COOKIE" in names:
            virtual["LINUX_HAS_BPF_COOKIE"] = _feature("bpf_cookie")
        return kconfig_data(self.spec.externs, config, virtual, self.kconfig_source)

    def _resolve_ksyms(self, ksyms: list[Any]) -> None:
        from . import kernel_btf as kernel
        from ._kernel import kinfo
        from .spec.externs import resolve_ksym

        kallsyms = None
        if any(not e.typed and not e.is_func for e in ksyms):
            kallsyms = kinfo.read_kallsyms()
        btfs: list[BTF] = []
        if any(e.typed or e.is_func for e in ksyms):
            btfs = [kernel.vmlinux()]
        for ext in ksyms:
            target = resolve_ksym(ext, self.spec.btf, btfs, kernel.modules, kallsyms)
            self._ksyms[ext.name] = target
            if target.found and target.module and target.module not in self._module_fds:
                from ._kernel import bpf as _bpf

                self._module_fds[target.module] = _bpf.kernel_btf_fd(target.module)

    def _module_index(self, module: str) -> int:
        """The fd_array slot of a module's BTF fd (slot 0 is never used: off 0 means vmlinux)."""
        if module not in self._fd_index:
            if not self._fd_array:
                self._fd_array.append(0)
            self._fd_index[module] = len(self._fd_array)
            self._fd_array.append(int(self._module_fds[module]))
        return self._fd_index[module]

    # ------------------------------------------------------------------- programs
    def fit(self, pspec: Any, code: bytearray) -> list[int]:
        """Apply CO-RE relocations and extern references to ``code`` (the program's
        instructions, patched in place); returns the fd_array the program needs ([] if none)."""
        if pspec.core_relos:
            from .btf import core

            if self._relocator is None:
                if self.spec.btf is None:
                    raise UsageError(f"program {pspec.name!r} has CO-RE relocations but the spec has no BTF")
                self._relocator = _relocator(self.spec.btf, self.kernel_btf)
                self._relocator.prefetch(r for p in self.spec.programs.values() for _, r in p.core_relos)
            resolutions = []
            for index, (insn, relo) in enumerate(pspec.core_relos):
                res = self._relocator.resolve(relo, pspec.name, insn, index)
                core.patch_insn(code, res)
                resolutions.append(res)
            self.core_resolutions[pspec.name] = resolutions
        needs_fds = False
        for insn, name in pspec.extern_refs:
            needs_fds |= self._patch_extern(pspec, code, insn, name)
        return list(self._fd_array) if needs_fds else []

    def _patch_extern(self, pspec: Any, code: bytearray, insn: int, name: str) -> bool:
        from .spec.externs import POISON_KFUNC_BASE

        ext = self.spec.externs.get(name)
        target = self._ksyms.get(name)
        where = f"program {pspec.name!r}: extern {name!r} at instruction {insn}"
        if ext is None or target is None:
            raise NotFoundError(f"{where}: the spec has no resolved extern of that name")
        at = insn * 8
        op = code[at] if at < len(code) else -1
        if op == 0x85:  # BPF_JMP | BPF_CALL: a kfunc call
            if not target.found:
                _INSN.pack_into(code, at, 0x85, 0, 0, POISON_KFUNC_BASE + ext.index)
                return False
            off = self._module_index(target.module) if target.module else 0
            _INSN.pack_into(code, at, 0x85, _PSEUDO_KFUNC_CALL << 4, off, target.btf_id)
            return bool(off)
        if op == 0x18 and at + 16 <= len(code):  # ld_imm64: the symbol's address
            dst = code[at + 1] & 0x0F
            if target.found and target.btf_id:
                fd = int(self._module_fds[target.module]) if target.module else 0
                _INSN.pack_into(code, at, 0x18, dst | (_PSEUDO_BTF_ID << 4), 0, target.btf_id)
                _I32.pack_into(code, at + 12, fd)
            else:
                addr = target.address & 0xFFFFFFFFFFFFFFFF
                _INSN.pack_into(code, at, 0x18, dst, 0, _signed(addr & 0xFFFFFFFF))
                _I32.pack_into(code, at + 12, _signed(addr >> 32))
            return False
        raise UsageError(f"{where}: instruction {op:#04x} is neither a call nor an ld_imm64")

    # -------------------------------------------------------------------- errors
    def explain(self, exc: VerifierError, program: str) -> None:
        """Add to a verifier rejection which poisoned CO-RE relocation or missing kfunc the
        rejected instruction stands for (the verifier only knows "invalid func unknown#N")."""
        import re

        from .btf.core import POISON_HELPER, poisoned_insns
        from .spec.externs import POISON_KFUNC_BASE

        log = exc.log or ""
        notes = []
        poisoned = [r for r in self.core_resolutions.get(program, []) if r.poisoned]
        if poisoned and f"unknown#{POISON_HELPER}" in log:
            at = set(poisoned_insns(log))
            hits = [r for r in poisoned if r.insn in at] or poisoned
            exc.core_relocations = hits  # type: ignore[attr-defined]
            for r in hits:
                notes.append(f"the rejected call to helper {POISON_HELPER:#x} is a poisoned {r.explain()}")
        for m in re.finditer(r"unknown#(\d+)", log):
            index = int(m.group(1)) - POISON_KFUNC_BASE
            if 0 <= index < 1 << 16:
                ext = next((e for e in self.spec.externs.values() if e.index == index), None)
                if ext is not None:
                    note = (f"the rejected call {m.group(0)} is __weak kfunc {ext.name!r}, which this kernel lacks "
                            f"({self._ksyms[ext.name].why}); guard its calls with bpf_ksym_exists()")
                    if note not in notes:
                        notes.append(note)
        missing = re.search(r"failed to find the address for kernel symbol '([^']+)'", log)
        if missing:
            notes.append(f"the kernel looks __ksym variables up in kallsyms, which lacks {missing.group(1)!r}: "
                         "typed __ksym variables need CONFIG_KALLSYMS_ALL=y")
        if notes:
            exc.message = exc.message.rstrip("\n") + "\n" + "\n".join(notes)
            exc.args = (exc.message,)

    def close(self) -> None:
        for fd in self._module_fds.values():
            fd.close()
        self._module_fds.clear()
        self._fd_array.clear()
        self._fd_index.clear()


def _signed(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _config_text(value: Any) -> str:
    """A kconfig= mapping value as the configuration file spells it."""
    if value is True:
        return "y"
    if value is False or value is None:
        return "n"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if text in ("y", "n", "m") or text.startswith('"'):
        return text
    try:
        int(text, 0)
        return text
    except ValueError:
        return '"' + text + '"'
