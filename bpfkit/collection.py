# SPDX-License-Identifier: Apache-2.0
"""Collections: every map and program of one object loaded into the kernel (Collection), from a
CollectionSpec (plain data, defined in the spec layer, bpfkit.spec, and re-exported here with
load_spec).

    spec = bpfkit.load_spec("opensnoop.bpf.o")        # pure data, no syscalls
    spec.variables["targ_pid"].value = 1234            # const volatile knobs, before load
    with bpfkit.Collection(spec) as coll:               # maps first, then programs
        coll.programs["handle_open"], coll.maps["events"]

Loading order (as libbpf): BTF is loaded; maps are created (pinned maps reused), global data
written and .rodata frozen; then programs are relocated (map fds patched into their ld_imm64
instructions) and loaded; last, prog-array and map-in-map initialisers are written and maps
pinned. A failure anywhere closes everything made so far and removes the pins it made.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import struct
import warnings
from collections.abc import Iterable, Mapping, Sequence

from ._closing import ClosesOnExit
from .btf import BTF
from .errors import BPFKitError, KernelError, NotFoundError, UsageError, VerifierError
from .maps import Map, MapSpec, PinType
from .program import LoadOptions, Program, ProgramSpec, RefKind
from .spec.collection import CollectionSpec, VariableSpec
from .spec.load import load_spec as load_spec  # re-exported (bpfkit.collection.load_spec)
from .spec.load import object_name as object_name
from .spec.load import spec_from_file as spec_from_file

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from typing import Any

    from ._kernel.fd import FD
    from .attach import AttachedLinks
    from .kernelfit import KernelFit
    from .link.perf_event import AttachMode

__all__ = ["CollectionSpec", "VariableSpec", "Collection", "load_spec", "DEFAULT_PIN_DIR"]

DEFAULT_PIN_DIR = "/sys/fs/bpf"  # libbpf's default for LIBBPF_PIN_BY_NAME


# ------------------------------------------------------------------------ collection
def _kernel_version_code() -> int:
    """LINUX_VERSION_CODE of the running kernel, from uname's release (as libbpf does)."""
    release = os.uname().release
    parts = []
    for piece in release.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    while len(parts) < 3:
        parts.append(0)
    major, minor, patch = parts
    return (major << 16) | (minor << 8) | min(patch, 255)


# What a struct_ops type needs, for the error when the kernel lacks it (the kernel's Kconfig
# and the release that added the type).
_STRUCT_OPS_NEEDS = {
    "sched_ext_ops": "sched_ext: CONFIG_SCHED_CLASS_EXT, 6.12",
    "tcp_congestion_ops": "TCP congestion control in BPF: CONFIG_BPF_JIT and CONFIG_INET, 5.6",
    "hid_bpf_ops": "HID-BPF: CONFIG_HID_BPF, 6.11",
    "Qdisc_ops": "qdiscs in BPF: CONFIG_NET_SCH_BPF, 6.16",
}


def _adjust_ringbuf_size(size: int) -> int:
    """The kernel wants a ring buffer's max_entries to be a power-of-2 multiple of the page
    size; round up as libbpf does (0 stays 0 so the kernel reports the mistake)."""
    page = os.sysconf("SC_PAGE_SIZE")
    if size == 0 or (size % page == 0 and ((size // page) & (size // page - 1)) == 0):
        return size
    mul = 1
    while mul * page <= size:
        mul <<= 1
    return mul * page


class Collection(ClosesOnExit):
    """The maps and programs of a CollectionSpec, loaded into the kernel.

    ``programs`` and ``maps`` map names to :class:`Program` and :class:`Map`. Closing the
    collection closes them all (pinned objects stay in bpffs); maps given through
    ``map_replacements`` belong to the caller and are left open.

    Keyword arguments:
      pin_dir           directory for maps declared with LIBBPF_PIN_BY_NAME (default /sys/fs/bpf)
      map_replacements  {name: Map} used instead of creating those maps
      programs          names of the programs to load (default: every auto-loaded program); an
                        item that is a sequence of names is a group of alternatives: the first
                        the kernel loads is kept, the others are not loaded (``not_loaded``
                        says why), as libbpf-tools choose between a tp_btf and a raw_tp variant
      options           LoadOptions (verifier log level, whole-log errors)
      kernel_btf        BTF (or a path to a BTF/ELF file) to resolve CO-RE relocations against
                        instead of the running kernel's /sys/kernel/btf (docs/core.md)
      kconfig           kernel configuration for __kconfig externs: a path (default
                        /boot/config-$(uname -r), /proc/config.gz, then /usr/lib/modules/$(uname -r)/config) or {CONFIG_X: value}

    ``core_resolutions`` says how each program's CO-RE relocations resolved; ``not_loaded``
    maps each alternative passed over to the kernel's reason.
    """

    def __init__(
        self,
        spec: CollectionSpec,
        *,
        pin_dir: str | os.PathLike[str] | None = None,
        map_replacements: Mapping[str, Map] | None = None,
        programs: Iterable[str | Sequence[str]] | None = None,
        options: LoadOptions | None = None,
        kernel_btf: BTF | str | os.PathLike[str] | None = None,
        kconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    ) -> None:
        from .kernelfit import KernelFit

        self.spec = spec
        self.programs: dict[str, Program] = {}
        self.not_loaded: dict[str, str] = {}  # alternatives the kernel refused -> why
        self.maps: dict[str, Map] = {}
        self.btf_fd: FD | None = None
        self.pin_dir = os.fspath(pin_dir) if pin_dir is not None else DEFAULT_PIN_DIR
        self._borrowed: set[str] = set()
        self._pinned_here: list[Map] = []
        self._made_dirs: list[str] = []
        self._pin_paths: dict[str, str] = {}  # map name -> its checked pin path (LIBBPF_PIN_BY_NAME)
        self.btf_error: BPFKitError | None = None
        self._closed = False
        self._fit: KernelFit | None = None
        self._struct_ops_progs: dict[str, tuple[int, int, str]] = {}  # program -> (type id, member, module)
        self._struct_ops_layouts: dict[str, Any] = {}  # map -> bpfkit.struct_ops.Plan
        self._struct_ops_types: dict[str, Any] = {}  # type name -> bpfkit.struct_ops.KernelStructOps
        try:
            self._fit = KernelFit(spec, kernel_btf, kconfig)
            self._load(map_replacements or {}, programs, options or LoadOptions())
        except BaseException:
            self._abort()
            raise

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> Collection:
        """``Collection(load_spec(path), **kwargs)``."""
        return cls(load_spec(path), **kwargs)

    # ------------------------------------------------------------------------- loading
    def _load(self, replacements: Mapping[str, Map], selected: Iterable[str | Sequence[str]] | None, options: LoadOptions) -> None:
        spec = self.spec
        groups = self._select(selected)
        names = [name for group in groups for name in group]
        unknown = set(replacements) - set(spec.maps)
        if unknown:
            raise NotFoundError(f"map_replacements name maps the object does not have: {', '.join(sorted(unknown))}")
        for name in names:
            self._check_loadable(spec.programs[name])
        self._find_struct_ops_types(replacements)
        by_name = [n for n, m in spec.maps.items() if m.pinning == PinType.BY_NAME and n not in replacements]
        if by_name:
            # The names come from the object: each must be one path component that stays in
            # the pin directory, checked before anything is created (docs/security.md).
            from ._kernel.bpffs import pin_path

            for n in by_name:
                pin_path(self.pin_dir, n, "map pinned by name")
            self._prepare_pin_dir()
            for n in by_name:
                self._pin_paths[n] = pin_path(self.pin_dir, n, "map pinned by name")
        self._load_btf()
        assert self._fit is not None
        kconfig_data = self._fit.resolve_externs([spec.programs[n] for n in names])
        for name, declared in spec.maps.items():
            mspec = declared
            if name == ".kconfig" and kconfig_data is not None:
                mspec = dataclasses.replace(declared, data=kconfig_data)
            if mspec.struct_ops is not None and name not in replacements:
                if mspec.struct_ops.autocreate:
                    self._create_struct_ops_map(name, mspec)
                continue
            if name in replacements:
                self._use_replacement(name, mspec, replacements[name])
            else:
                self._create_map(name, mspec)
        for group in groups:
            self._load_group(group, options)
        self._fill_struct_ops()
        for name, mspec in spec.maps.items():
            if mspec.contents and name not in self._borrowed and not self._reused(name):
                self._fill_contents(name, mspec)
        self._fit.close()  # module BTF fds: the kernel holds its own references now

    def _load_group(self, group: tuple[str, ...], options: LoadOptions) -> None:
        """Load the one program of ``group``, or the first of its alternatives the kernel
        accepts: an alternative refused (BPF_PROG_LOAD, or its attach target missing from the
        kernel's BTF) is noted in ``not_loaded`` and the next one tried."""
        refused: list[tuple[str, BPFKitError]] = []
        for name in group:
            try:
                self.programs[name] = self._load_program(name, options)
                break
            except BPFKitError as exc:
                if len(group) == 1:
                    raise
                refused.append((name, exc))
        else:
            why = "".join(f"{alt}: {err}; " for alt, err in refused[:-1])
            raise refused[-1][1].wrap(f"none of the alternative programs {' | '.join(group)} loaded: {why}{group[-1]}")
        for alt, err in refused:
            self.not_loaded[alt] = str(err)

    def _load_program(self, name: str, options: LoadOptions) -> Program:
        from ._kernel.consts import ProgType

        assert self._fit is not None
        pspec = self.spec.programs[name]
        kversion = _kernel_version_code() if pspec.needs_kernel_version else 0
        target_btf = None  # a module's BTF fd (attach_btf_obj_fd), held until the load is done
        try:
            if self._is_ext(pspec):
                target_btf, pspec = self._ext_target(pspec)  # target_btf: the opened target prog
            elif pspec.type == ProgType.STRUCT_OPS and not pspec.attach_btf_id:
                target_btf, pspec = self._struct_ops_target(pspec)
            elif self._needs_attach_btf_id(pspec):
                type_id, module = self._attach_btf_id(pspec)
                if module:
                    target_btf = self._module_btf_fd(pspec, module)
                pspec = dataclasses.replace(pspec, attach_btf_id=type_id,
                                            attach_btf_obj_fd=int(target_btf) if target_btf is not None else 0)
            relocated = self._relocate(pspec, kversion)
            try:
                return Program(relocated, options, btf_fd=int(self.btf_fd) if self.btf_fd is not None else 0)
            except BPFKitError as exc:
                if isinstance(exc, VerifierError):
                    self._fit.explain(exc, name)
                if self.btf_error is not None and pspec.func_info:
                    # Global functions and callbacks need func_info, hence BTF.
                    first = str(self.btf_error).splitlines()[0]
                    raise exc.wrap(f"loaded without BTF because the kernel refused the object's BTF ({first})")
                raise
        finally:
            if target_btf is not None:
                target_btf.close()

    @property
    def core_resolutions(self) -> dict[str, list[Any]]:
        """{program: [bpfkit.btf.core.CoreResolution]} for the loaded programs with CO-RE relocations."""
        return self._fit.core_resolutions if self._fit is not None else {}

    @property
    def btf_rewrites(self) -> list[str]:
        """What was rewritten in the object's BTF for this kernel (bpfkit.btf.sanitize)."""
        return self._fit.btf_rewrites if self._fit is not None else []

    def _select(self, selected: Iterable[str | Sequence[str]] | None) -> list[tuple[str, ...]]:
        """The programs to load, as groups: one name each, or the alternatives of one group
        (a sequence of names, first preferred)."""
        from ._kernel.consts import ProgType

        progs = self.spec.programs
        if selected is None:
            # As libbpf: a struct_ops program no created struct_ops map points to is not
            # loaded (it could not be: its attach type is the member it fills).
            used = {p for m in self.spec.maps.values() if m.struct_ops is not None and m.struct_ops.autocreate
                    for p in m.struct_ops.programs.values()}
            return [(name,) for name, p in progs.items()
                    if p.autoload and (p.type != ProgType.STRUCT_OPS or name in used or p.attach_btf_id)]
        groups = [(item,) if isinstance(item, str) else tuple(item) for item in selected]
        names = [n for group in groups for n in group]
        missing = [n for n in names if n not in progs]
        if missing:
            raise NotFoundError(
                f"no program named {', '.join(map(repr, missing))} in the object (it has {', '.join(progs) or 'none'})"
            )
        if any(not group for group in groups) or len(set(names)) != len(names):
            raise UsageError(f"programs: each name once, and no empty group of alternatives (got {groups})")
        return groups

    def _check_loadable(self, pspec: ProgramSpec) -> None:
        if int(pspec.type) == 0:
            raise UsageError(
                f"program {pspec.name!r}: section {pspec.section!r} is not one libbpf knows, so its program "
                "type is unknown; rename the section or set spec.programs[...].type"
            )

    # ----------------------------------------------------------------------- struct_ops
    def _find_struct_ops_types(self, replacements: Mapping[str, Map]) -> None:
        """Find the kernel's type of every struct_ops map to create, before externs are
        resolved: a kernel without the type lacks its kfuncs too (scx_bpf_*), and "no FUNC
        named" would hide the reason. The answers are kept for _create_struct_ops_map."""
        for name, mspec in self.spec.maps.items():
            ops = mspec.struct_ops
            if ops is None or not ops.autocreate or name in replacements or ops.kernel_type_name in self._struct_ops_types:
                continue
            from .struct_ops import find_kernel_struct_ops  # here: an object with no struct_ops map imports none of it

            kind = ops.kernel_type_name
            try:
                self._struct_ops_types[kind] = find_kernel_struct_ops(kind)
            except NotFoundError as exc:
                needs = f" ({_STRUCT_OPS_NEEDS[kind]})" if kind in _STRUCT_OPS_NEEDS else ""
                raise NotFoundError(f"struct_ops map {name!r}: {kind}: the running kernel has no struct_ops type "
                                    f"{kind!r}{needs}: {exc}") from None
            except BPFKitError as exc:
                raise exc.wrap(f"struct_ops map {name!r}")

    def _create_struct_ops_map(self, name: str, mspec: MapSpec) -> None:
        """Create a STRUCT_OPS map for the kernel's struct bpf_struct_ops_<type> and note
        which member each of its programs fills (bpfkit.struct_ops)."""
        from ._kernel import bpf as _bpf
        from ._kernel.consts import MapFlag
        from .struct_ops import find_kernel_struct_ops, plan

        ops = mspec.struct_ops
        assert ops is not None  # _load calls this for struct_ops maps only
        try:
            kernel = self._struct_ops_types.get(ops.kernel_type_name) or find_kernel_struct_ops(ops.kernel_type_name)
            layout = plan(name, ops, kernel)
        except BPFKitError as exc:
            raise exc.wrap(f"struct_ops map {name!r}")
        for member, (index, _) in layout.slots.items():
            prog = ops.programs[member]
            want = (kernel.type_id, index, kernel.module)
            have = self._struct_ops_progs.setdefault(prog, want)
            if have != want:
                raise UsageError(f"program {prog!r} fills member {member!r} of struct_ops map {name!r} and another "
                                 "member or struct_ops type elsewhere; a struct_ops program serves one member of one type")
        kspec = dataclasses.replace(mspec, value_size=kernel.value_size, btf_key_type_id=0, btf_value_type_id=0,
                                    btf_vmlinux_value_type_id=kernel.value_type_id)
        module_fd = _bpf.kernel_btf_fd(kernel.module) if kernel.module else None
        if module_fd is not None:
            kspec.flags |= int(MapFlag.VTYPE_BTF_OBJ_FD)
        if self.btf_fd is None:
            raise UsageError(f"struct_ops map {name!r}: the kernel needs the object's BTF to create it, and "
                             f"loading that BTF failed ({self.btf_error})")
        btf_fd = int(self.btf_fd)
        try:
            try:
                m = Map(kspec, btf_fd=btf_fd, value_type_btf_obj_fd=int(module_fd) if module_fd is not None else 0)
            except KernelError as exc:
                if exc.errno != errno.EINVAL or not kspec.flags & int(MapFlag.LINK):
                    raise
                # Before 6.4 (68b04864ca42) STRUCT_OPS maps take no BPF_F_LINK: register by
                # map update only, as .struct_ops maps are.
                kspec = dataclasses.replace(kspec, flags=kspec.flags & ~int(MapFlag.LINK))
                m = Map(kspec, btf_fd=btf_fd, value_type_btf_obj_fd=int(module_fd) if module_fd is not None else 0)
        finally:
            if module_fd is not None:
                module_fd.close()
        m.struct_ops = ops  # type: ignore[attr-defined]
        m.struct_ops_kernel = kernel  # type: ignore[attr-defined]
        m.struct_ops_value = bytes(layout.value)  # type: ignore[attr-defined]
        self._struct_ops_layouts[name] = layout
        self.maps[name] = m

    def _struct_ops_target(self, pspec: ProgramSpec) -> tuple[Any, ProgramSpec]:
        found = self._struct_ops_progs.get(pspec.name)
        if found is None:
            raise UsageError(f"program {pspec.name!r} (section {pspec.section!r}) is a struct_ops callback, but no "
                             "created struct_ops map points to it; set it in a .struct_ops variable (or leave it out)")
        type_id, index, module = found
        module_fd = self._module_btf_fd(pspec, module) if module else None
        # expected_attach_type is the member's index here, not an enum bpf_attach_type value.
        attach_type: Any = index
        return module_fd, dataclasses.replace(
            pspec, attach_btf_id=type_id, attach_type=attach_type,
            attach_btf_obj_fd=int(module_fd) if module_fd is not None else 0,
        )

    def _fill_struct_ops(self) -> None:
        """Put each loaded program's fd in its slot of every struct_ops map's value."""
        if not self._struct_ops_layouts:
            return
        from .struct_ops import fill_programs

        fds = {name: int(p.fd) for name, p in self.programs.items()}
        for name, layout in self._struct_ops_layouts.items():
            m = self.maps[name]
            m.struct_ops_value = fill_programs(layout, m.struct_ops, fds)  # type: ignore[attr-defined]

    def struct_ops_maps(self) -> dict[str, Map]:
        """The struct_ops maps of this collection (attach each with bpfkit.link.struct_ops)."""
        return {name: m for name, m in self.maps.items() if getattr(m, "struct_ops", None) is not None}

    @staticmethod
    def _is_ext(pspec: ProgramSpec) -> bool:
        from ._kernel.consts import ProgType

        return pspec.type == ProgType.EXT and not (pspec.attach_prog_fd and pspec.attach_btf_id)

    @staticmethod
    def _ext_target(pspec: ProgramSpec) -> tuple[Any, ProgramSpec]:
        """(fd to close after the load or None, spec with attach_prog_fd/attach_btf_id) for an
        ext (freplace) program: the kernel verifies it against the replaced function's
        prototype in the target program's BTF, so both are fixed at load (bpfkit.freplace)."""
        from .freplace import describe_target, open_target, target_func_id

        target = pspec.attach_prog if pspec.attach_prog is not None else (pspec.attach_prog_fd or None)
        func = pspec.attach_to
        if target is None or not func:
            raise UsageError(
                f"program {pspec.name!r}: an ext (freplace) program needs a target program and the global function "
                f"it replaces{f' (section {pspec.section!r} names {func!r})' if func else ''}; name them before loading: "
                f"spec.programs[{pspec.name!r}].set_attach_target({func or 'FUNC'!r}, prog=TARGET) with TARGET a "
                "loaded Program, an fd or a pinned path (or prog_id=N)"
            )
        fd, owned = open_target(target)
        try:
            btf_id = target_func_id(fd, func, describe_target(target))
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        return owned, dataclasses.replace(pspec, attach_prog_fd=int(fd), attach_btf_id=btf_id)

    @staticmethod
    def _needs_attach_btf_id(pspec: ProgramSpec) -> bool:
        from ._kernel.consts import ProgType
        from .sections import SecFlag, match_section

        if pspec.attach_btf_id or pspec.attach_prog_fd or pspec.type not in (ProgType.TRACING, ProgType.LSM):
            return False
        definition = match_section(pspec.section).definition
        return definition is not None and bool(definition.flags & SecFlag.ATTACH_BTF)

    def _attach_btf_id(self, pspec: ProgramSpec) -> tuple[int, str]:
        """(BTF id, module or '' for vmlinux) of what a tp_btf/fentry/fexit/fmod_ret/lsm/iter
        program attaches to, named as libbpf names it (btf_trace_<tp>, bpf_lsm_<hook>,
        bpf_iter_<target>). ``MODULE:NAME`` looks in that module's BTF only; a bare name in
        vmlinux, then in every module with BTF (as libbpf does)."""
        from ._kernel import sysfs_btf as _sysfs_btf
        from ._kernel.consts import AttachType
        from .btf.spec import scan_type_id
        from .btf.types import Kind

        target = pspec.attach_to
        if not target:
            raise UsageError(f"program {pspec.name!r}: section {pspec.section!r} names no attach target; "
                             f"name one before loading: spec.programs[{pspec.name!r}].set_attach_target(NAME)")
        module, _, func = target.rpartition(":")
        prefix, kind = {
            AttachType.TRACE_RAW_TP: ("btf_trace_", Kind.TYPEDEF),
            AttachType.LSM_MAC: ("bpf_lsm_", Kind.FUNC),
            AttachType.LSM_CGROUP: ("bpf_lsm_", Kind.FUNC),
            AttachType.TRACE_ITER: ("bpf_iter_", Kind.FUNC),
        }.get(pspec.attach_type, ("", Kind.FUNC))  # type: ignore[arg-type]
        wanted = prefix + func
        try:
            if not module:
                type_id = scan_type_id(_sysfs_btf.vmlinux_btf(), wanted, kind)
                if type_id:
                    return type_id, ""
            # Module BTF is split BTF: its names continue vmlinux's string table, so it is
            # searched parsed (a module's BTF is small) rather than scanned.
            from . import kernel_btf as _kernel_btf

            for mod in [module] if module else _sysfs_btf.module_btf_names():
                found = _kernel_btf.module(mod).find(wanted, kind, own_only=True)
                if found:
                    return found[0].id, mod
        except BPFKitError as exc:
            raise exc.wrap(f"program {pspec.name!r}: find attach target {target!r}")
        where = f"kernel module {module!r}'s BTF" if module else "the kernel's BTF (vmlinux and modules)"
        raise NotFoundError(
            f"program {pspec.name!r}: {where} has no {kind.name} {wanted!r} (attach target of section {pspec.section!r})"
        )

    @staticmethod
    def _module_btf_fd(pspec: ProgramSpec, module: str) -> Any:
        """An fd of kernel module ``module``'s BTF object for attach_btf_obj_fd (5.11,
        290248a5b7d8: targets in modules)."""
        from ._kernel import bpf as _bpf

        try:
            return _bpf.kernel_btf_fd(module)
        except BPFKitError as exc:
            raise exc.wrap(f"program {pspec.name!r}: open the BTF of kernel module {module!r} (needs Linux 5.11+)")

    def _load_btf(self) -> None:
        btf = self.spec.btf
        if btf is None:
            return
        from ._kernel import bpf as _bpf

        assert self._fit is not None
        try:
            blob = self._fit.object_btf()
            assert blob is not None
            self.btf_fd = _bpf.btf_load(blob)
        except BPFKitError as exc:
            # libbpf carries on without BTF too: programs lose func/line info, maps their
            # key/value types, but still load.
            warnings.warn(f"bpfkit: loading the object's BTF failed, continuing without it: {exc}", RuntimeWarning,
                          stacklevel=3)
            self.btf_error = exc

    def _map_for_kernel(self, mspec: MapSpec) -> MapSpec:
        from ._kernel.consts import MapType
        from ._kernel.cpus import num_possible_cpus

        fixed = mspec
        if mspec.type == MapType.PERF_EVENT_ARRAY and mspec.max_entries == 0:
            fixed = dataclasses.replace(mspec, max_entries=num_possible_cpus())
        elif mspec.type == MapType.RINGBUF:
            size = _adjust_ringbuf_size(mspec.max_entries)
            if size != mspec.max_entries:
                fixed = dataclasses.replace(mspec, max_entries=size)
        return fixed

    def _create_map(self, name: str, mspec: MapSpec) -> None:
        kspec = self._map_for_kernel(mspec)
        path = self._pin_paths.get(name)
        if mspec.pinning == PinType.BY_NAME and path is not None:
            existing = self._open_pin(path, kspec)
            if existing is not None:
                self.maps[name] = existing
                return
        btf_fd = int(self.btf_fd) if self.btf_fd is not None else 0
        if mspec.inner is not None:
            inner_spec = self._map_for_kernel(mspec.inner)
            with Map(inner_spec, btf_fd=btf_fd) as inner:
                m = Map(kspec, inner_map_fd=int(inner.fd), btf_fd=btf_fd)
        else:
            m = Map(kspec, btf_fd=btf_fd)
        self.maps[name] = m
        if mspec.data is not None:
            try:
                if len(mspec.data) != kspec.value_size:
                    raise UsageError(f"map {name!r}: initial data is {len(mspec.data)} bytes, value_size is {kspec.value_size}")
                m.update(0, mspec.data)
                if mspec.freeze:
                    m.freeze()
            except BPFKitError as exc:
                raise exc.wrap(f"initialise global data map {name!r}")
        if mspec.pinning == PinType.BY_NAME and path is not None:
            self._pin_or_reuse(name, m, kspec, path)

    def _pin_or_reuse(self, name: str, m: Map, kspec: MapSpec, path: str) -> None:
        """Pin the map just made at ``path`` (pin_dir/name, checked), before any program refers
        to it. Another process may have pinned the same name since :meth:`_open_pin` looked
        (BPF_OBJ_PIN then fails with EEXIST): as libbpf's bpf_object__create_maps retry, drop
        the map made here and reuse the pinned one if it is compatible."""
        try:
            self._pin(m, path)
            return
        except KernelError as exc:
            if exc.errno != errno.EEXIST:
                raise
        existing = self._open_pin(path, kspec)
        if existing is None:  # unpinned again in between: a third party is churning the name
            raise KernelError(f"pin map {name!r} at {path}", errno.EEXIST,
                              "the path was taken and then removed while this load ran")
        m.close()
        self.maps[name] = existing

    def _open_pin(self, path: str, kspec: MapSpec) -> Map | None:
        """The map already pinned at ``path`` if compatible with ``kspec``; None if no pin."""
        if not os.path.lexists(path):
            return None
        try:
            m = Map.load_pinned(path)
        except NotFoundError:
            return None
        why = kspec.compatible_with(m.info())
        if why:
            m.close()
            raise UsageError(f"map {kspec.name!r}: the map pinned at {path} is incompatible: {why}")
        m.name = kspec.name
        m.spec = kspec
        m._reused_pin = True  # type: ignore[attr-defined]
        return m

    def _reused(self, name: str) -> bool:
        return bool(getattr(self.maps.get(name), "_reused_pin", False))

    def _use_replacement(self, name: str, mspec: MapSpec, replacement: Map) -> None:
        why = self._map_for_kernel(mspec).compatible_with(replacement.info())
        if why:
            raise UsageError(f"map_replacements[{name!r}] cannot replace the object's map: {why}")
        self.maps[name] = replacement
        self._borrowed.add(name)

    def _relocate(self, pspec: ProgramSpec, kversion: int) -> ProgramSpec:
        """A copy of ``pspec`` fitted to this kernel (CO-RE relocations, externs; see
        bpfkit.kernelfit) whose ld_imm64 instructions hold this collection's map fds."""
        code = bytearray(pspec.instructions)
        assert self._fit is not None
        fd_array = self._fit.fit(pspec, code)
        pack_imm = struct.Struct("<i").pack_into
        for ref in pspec.references:
            m = self.maps.get(ref.map)
            if m is None:
                raise NotFoundError(f"program {pspec.name!r} refers to map {ref.map!r}, which the collection lacks")
            at = ref.insn * 8
            if at + 16 > len(code) or code[at] != 0x18:
                raise UsageError(f"program {pspec.name!r}: instruction {ref.insn} is not an ld_imm64 to relocate")
            code[at + 1] = (code[at + 1] & 0x0F) | (int(ref.kind) << 4)
            pack_imm(code, at + 4, m.fd.raw)
            pack_imm(code, at + 12, ref.offset if ref.kind == RefKind.MAP_VALUE else 0)
        changes: dict[str, Any] = {"instructions": bytes(code)}
        if fd_array:
            changes["fd_array"] = fd_array
        if pspec.needs_kernel_version:
            changes["kernel_version"] = kversion
        return dataclasses.replace(pspec, **changes)

    def _fill_contents(self, name: str, mspec: MapSpec) -> None:
        from ._kernel.consts import MapType

        m = self.maps[name]
        for key, initial in mspec.contents:
            value = initial
            if isinstance(initial, str):
                if mspec.type == MapType.PROG_ARRAY:
                    target: Any = self.programs.get(value)
                    if target is None:
                        continue  # a program not selected for loading
                else:
                    target = self.maps.get(value)
                    if target is None:
                        raise NotFoundError(f"map {name!r}: initial value names map {value!r}, which does not exist")
                value = struct.pack("<I", target.fd.raw)
            try:
                m.update(key, value)
            except BPFKitError as exc:
                raise exc.wrap(f"initialise map {name!r} slot {key}")

    def _prepare_pin_dir(self) -> None:
        """Make sure the pin directory is on bpffs (mounting /sys/fs/bpf if needed), checked
        before any part of it is created, then create what is missing."""
        from ._kernel.bpffs import check_pin_dir, make_dirs

        try:
            self.pin_dir = check_pin_dir(self.pin_dir)
            make_dirs(self.pin_dir, self._made_dirs)
        except BPFKitError as exc:  # first: a KernelError is an OSError too
            raise exc.wrap(f"prepare pin directory {self.pin_dir}")
        except OSError as exc:
            raise KernelError(f"create pin directory {self.pin_dir}", exc.errno or 0) from None

    def _pin(self, m: Map, path: str) -> None:
        m.pin(path)
        self._pinned_here.append(m)

    def _abort(self) -> None:
        """Undo a failed construction: remove the pins and directories made, close all."""
        for m in self._pinned_here:
            m.unpin()
        for path in reversed(self._made_dirs):
            try:
                os.rmdir(path)
            except OSError:
                pass
        self.close()

    # ----------------------------------------------------------------------- lifecycle
    def attach_all(self, *, mode: AttachMode | str = "auto", pid: int | None = None, cookie: int = 0,
                   programs: Iterable[str] | None = None, cgroup: str | int | None = None,
                   netkit: str | int | None = None) -> AttachedLinks:
        """Attach every program whose section names a target (cgroup programs to ``cgroup``)
        and register the struct_ops maps: :func:`bpfkit.attach.attach_all` on this collection."""
        from .attach import attach_all

        return attach_all(self, mode=mode, pid=pid, cookie=cookie, programs=programs, cgroup=cgroup, netkit=netkit)

    def close(self) -> None:
        """Close every program and map this collection made (pins stay)."""
        if self._closed:
            return
        self._closed = True
        for m in self.maps.values():
            registration = getattr(m, "_struct_ops_registration", None)
            if registration is not None and not registration.closed and registration.pinned_path is None:
                try:
                    registration.close()  # a map-only struct_ops registration would outlive the process
                except BPFKitError:
                    pass
        for prog in self.programs.values():
            prog.close()
        for name, m in self.maps.items():
            if name not in self._borrowed:
                m.close()
        if self.btf_fd is not None:
            self.btf_fd.close()
        if self._fit is not None:
            self._fit.close()


    def __repr__(self) -> str:
        return f"Collection({len(self.programs)} programs, {len(self.maps)} maps)"
