# SPDX-License-Identifier: Apache-2.0
"""__kconfig and __ksym externs (bpfkit.spec.externs): what the ELF loader records, the BTF
fix-ups, the .kconfig layout and value encoding, and ksym resolution against hand-made
kernel BTF and symbol tables. Pure: no kernel needed."""

from __future__ import annotations

import pytest

import bpfkit
from bpfkit.btf import (
    BTF,
    Func,
    FuncProto,
    Int,
    IntEncoding,
    Kind,
    Linkage,
    Member,
    Param,
    Pointer,
    Struct,
    Var,
    VarLinkage,
)
from bpfkit.errors import NotFoundError, UsageError
from bpfkit.spec.externs import (
    ExternKind,
    ExternSpec,
    KconfigType,
    kconfig_data,
    parse_kconfig,
    resolve_ksym,
)


@pytest.fixture(scope="module")
def spec():
    from conftest import bpf_object

    return bpfkit.load_spec(bpf_object("core_externs"))


def test_externs_are_recorded(spec):
    ex = spec.externs
    assert {n for n, e in ex.items() if e.kind == ExternKind.KCONFIG} == {
        "LINUX_KERNEL_VERSION", "LINUX_HAS_SYSCALL_WRAPPER", "CONFIG_HZ", "CONFIG_BPF_SYSCALL",
        "CONFIG_DEBUG_INFO_BTF", "CONFIG_DEFAULT_HOSTNAME", "CONFIG_BPFKIT_NO_SUCH_OPTION"}
    assert ex["CONFIG_BPF_SYSCALL"].kconfig_type == KconfigType.TRISTATE
    assert ex["CONFIG_DEBUG_INFO_BTF"].kconfig_type == KconfigType.BOOL
    assert ex["CONFIG_DEFAULT_HOSTNAME"].kconfig_type == KconfigType.CHAR_ARRAY
    assert (ex["CONFIG_HZ"].kconfig_type, ex["CONFIG_HZ"].signed) == (KconfigType.INT, True)
    assert not ex["LINUX_KERNEL_VERSION"].weak and ex["CONFIG_HZ"].weak
    assert ex["runqueues"].typed and not ex["runqueues"].is_func
    assert not ex["schedule"].typed
    assert ex["bpf_rcu_read_lock"].is_func and ex["bpf_rcu_read_lock"].weak


def test_kconfig_layout_and_map(spec):
    kcfg = sorted((e for e in spec.externs.values() if e.kind == ExternKind.KCONFIG), key=lambda e: e.offset)
    # libbpf's order: larger alignment first, then smaller size, then name.
    assert [e.name for e in kcfg] == [
        "CONFIG_BPFKIT_NO_SUCH_OPTION", "CONFIG_BPF_SYSCALL", "CONFIG_HZ", "LINUX_KERNEL_VERSION",
        "CONFIG_DEBUG_INFO_BTF", "LINUX_HAS_SYSCALL_WRAPPER", "CONFIG_DEFAULT_HOSTNAME"]
    assert [e.offset for e in kcfg] == [0, 4, 8, 12, 16, 17, 18]
    m = spec.maps[".kconfig"]
    assert m.value_size == 34 and m.freeze and m.kernel_name == "core_ex.kconfig"
    refs = [r for r in spec.programs["core_externs"].references if r.map == ".kconfig"]
    assert sorted(r.offset for r in refs) == [0, 4, 8, 12, 16, 17, 18]


def test_btf_is_fixed_up_for_the_kernel(spec):
    btf = spec.btf
    kconfig = btf.lookup(".kconfig", Kind.DATASEC)
    assert kconfig.size == 34 and [v.offset for v in kconfig.vars] == [0, 4, 8, 12, 16, 17, 18]
    ksyms = btf.lookup(".ksyms", Kind.DATASEC)
    assert ksyms.size == 4 * len(ksyms.vars) and all(v.size == 4 for v in ksyms.vars)
    assert all(isinstance(btf.types[v.type], Var) for v in ksyms.vars)  # FUNCs went behind a dummy
    assert btf.lookup("bpf_rcu_read_lock").linkage == Linkage.GLOBAL
    assert all(t.linkage != VarLinkage.EXTERN for t in btf.types if isinstance(t, Var))


def test_ksym_references_are_recorded(spec):
    names = {n for _, n in spec.programs["core_externs"].extern_refs}
    assert names == {"schedule", "bpfkit_no_such_symbol", "bpfkit_no_such_var", "bpf_rcu_read_lock",
                     "bpf_rcu_read_unlock", "bpfkit_no_such_kfunc"}
    assert {n for _, n in spec.programs["core_percpu"].extern_refs} == {"runqueues"}


# ----------------------------------------------------------------------- kconfig values
def kext(name: str, kind: KconfigType, size: int, offset: int = 0, weak: bool = False, signed: bool = False):
    return ExternSpec(name, ExternKind.KCONFIG, weak, 0, kconfig_type=kind, size=size, align=min(size, 8),
                      signed=signed, offset=offset)


CONFIG = parse_kconfig("""
# comment
CONFIG_A=y
CONFIG_M=m
# CONFIG_OFF is not set
CONFIG_HZ=250
CONFIG_HEX=0x10
CONFIG_NEG=-3
CONFIG_NAME="(none)"
""")


def test_parse_kconfig():
    assert CONFIG == {"CONFIG_A": "y", "CONFIG_M": "m", "CONFIG_HZ": "250", "CONFIG_HEX": "0x10",
                      "CONFIG_NEG": "-3", "CONFIG_NAME": '"(none)"'}


@pytest.mark.parametrize("ext, expected", [
    (kext("CONFIG_A", KconfigType.BOOL, 1), b"\x01"),
    (kext("CONFIG_A", KconfigType.TRISTATE, 4), (1).to_bytes(4, "little")),
    (kext("CONFIG_M", KconfigType.TRISTATE, 4), (2).to_bytes(4, "little")),
    (kext("CONFIG_M", KconfigType.CHAR, 1), b"m"),
    (kext("CONFIG_HZ", KconfigType.INT, 4, signed=True), (250).to_bytes(4, "little")),
    (kext("CONFIG_HEX", KconfigType.INT, 8), (16).to_bytes(8, "little")),
    (kext("CONFIG_NEG", KconfigType.INT, 2, signed=True), (-3).to_bytes(2, "little", signed=True)),
    (kext("CONFIG_NAME", KconfigType.CHAR_ARRAY, 16), b"(none)" + bytes(10)),
    (kext("CONFIG_NAME", KconfigType.CHAR_ARRAY, 4), b"(no\0"),
    (kext("CONFIG_OFF", KconfigType.BOOL, 1, weak=True), b"\0"),
])
def test_kconfig_values(ext, expected):
    assert kconfig_data({ext.name: ext}, CONFIG, {}) == expected


@pytest.mark.parametrize("ext, message", [
    (kext("CONFIG_M", KconfigType.BOOL, 1), "value 'm' needs enum libbpf_tristate or char"),
    (kext("CONFIG_HZ", KconfigType.BOOL, 1), "250 is not a boolean"),
    (kext("CONFIG_HZ", KconfigType.INT, 1, signed=True), "does not fit in 1 signed bytes"),
    (kext("CONFIG_NAME", KconfigType.INT, 4), "needs a char array"),
    (kext("CONFIG_A", KconfigType.INT, 4), "needs bool, enum libbpf_tristate or char"),
])
def test_kconfig_type_mismatches(ext, message):
    with pytest.raises(UsageError, match=message):
        kconfig_data({ext.name: ext}, CONFIG, {})


def test_unset_options_need_weak():
    strong = kext("CONFIG_OFF", KconfigType.BOOL, 1)
    with pytest.raises(NotFoundError, match="'CONFIG_OFF' is not set in /boot/x; declare it __weak"):
        kconfig_data({strong.name: strong}, CONFIG, {}, "/boot/x")
    with pytest.raises(NotFoundError, match="no kernel configuration found"):
        kconfig_data({strong.name: strong}, None, {})
    weak = kext("CONFIG_A", KconfigType.BOOL, 1, weak=True)
    assert kconfig_data({weak.name: weak}, None, {}) == b"\0"


def test_virtual_values():
    exts = {"LINUX_KERNEL_VERSION": kext("LINUX_KERNEL_VERSION", KconfigType.INT, 4),
            "LINUX_HAS_SYSCALL_WRAPPER": kext("LINUX_HAS_SYSCALL_WRAPPER", KconfigType.BOOL, 1, offset=4)}
    data = kconfig_data(exts, None, {"LINUX_KERNEL_VERSION": 0x060112, "LINUX_HAS_SYSCALL_WRAPPER": True})
    assert data == (0x060112).to_bytes(4, "little") + b"\x01"
    odd = {"LINUX_FOO": kext("LINUX_FOO", KconfigType.INT, 4)}
    with pytest.raises(NotFoundError, match="not a LINUX_"):
        kconfig_data(odd, None, {})


# -------------------------------------------------------------------------- ksyms
def _kernel() -> tuple[BTF, BTF]:
    """A vmlinux with a per-CPU VAR and a kfunc, and a module with another kfunc."""
    vm = BTF(name="vmlinux")
    i32 = vm.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    rq = vm.add(Struct(0, "rq", 8, [Member("cpu", i32, 0)]))
    vm.add(Var(0, "runqueues", rq, VarLinkage.GLOBAL))
    proto = vm.add(FuncProto(0, "", 0, []))
    vm.add(Func(0, "bpf_rcu_read_lock", proto, Linkage.GLOBAL))
    mod = BTF(base=vm, name="nf_conntrack")
    mproto = mod.add(FuncProto(0, "", i32, [Param("x", i32)]))
    mod.add(Func(0, "bpf_ct_thing", mproto, Linkage.GLOBAL))
    return vm, mod


def _local() -> tuple[BTF, dict[str, int]]:
    btf = BTF()
    ids = {}
    ids["int"] = btf.add(Int(0, "int", 4, IntEncoding.SIGNED, 0, 32))
    ids["rq"] = btf.add(Struct(0, "rq", 4, []))
    ids["void_proto"] = btf.add(FuncProto(0, "", 0, []))
    ids["int_proto"] = btf.add(FuncProto(0, "", ids["int"], [Param("", ids["int"])]))
    ids["ptr"] = btf.add(Pointer(0, "", ids["int"]))
    return btf, ids


def ksym(name, type_id=0, is_func=False, weak=False) -> ExternSpec:
    return ExternSpec(name, ExternKind.KSYM, weak, 0, type_id, is_func)


def test_typed_ksyms_and_kfuncs_resolve_through_btf():
    vm, mod = _kernel()
    local, ids = _local()
    t = resolve_ksym(ksym("runqueues", ids["rq"]), local, [vm], lambda: [mod], None)
    assert t.found and t.btf_id == vm.lookup("runqueues", Kind.VAR).id and t.module == ""
    t = resolve_ksym(ksym("bpf_rcu_read_lock___v2", ids["void_proto"], True), local, [vm], None, None)
    assert t.found and t.btf_id == vm.lookup("bpf_rcu_read_lock").id  # flavor dropped
    t = resolve_ksym(ksym("bpf_ct_thing", ids["int_proto"], True), local, [vm], lambda: [mod], None)
    assert t.found and t.module == "nf_conntrack" and t.btf_id == mod.lookup("bpf_ct_thing").id


def test_ksym_type_mismatches():
    vm, mod = _kernel()
    local, ids = _local()
    with pytest.raises(UsageError, match="'runqueues': declared as int, but the kernel has struct rq"):
        resolve_ksym(ksym("runqueues", ids["int"]), local, [vm], None, None)
    with pytest.raises(UsageError, match="bpf_rcu_read_lock"):
        resolve_ksym(ksym("bpf_rcu_read_lock", ids["int_proto"], True), local, [vm], None, None)
    weak = resolve_ksym(ksym("bpf_rcu_read_lock", ids["int_proto"], True, weak=True), local, [vm], None, None)
    assert not weak.found and "prototype" in weak.why


def test_missing_ksyms():
    vm, mod = _kernel()
    local, ids = _local()
    with pytest.raises(NotFoundError, match="has no FUNC named 'nope'"):
        resolve_ksym(ksym("nope", ids["void_proto"], True), local, [vm], lambda: [mod], None)
    assert not resolve_ksym(ksym("nope", ids["void_proto"], True, weak=True), local, [vm], None, None).found
    assert not resolve_ksym(ksym("nope", weak=True), local, [], None, {"schedule": 1}).found
    with pytest.raises(NotFoundError, match="not in /proc/kallsyms"):
        resolve_ksym(ksym("nope"), local, [], None, {"schedule": 1})


def test_untyped_ksyms_come_from_kallsyms():
    local, _ = _local()
    t = resolve_ksym(ksym("schedule"), local, [], None, {"schedule": 0xFFFFFFFF81000000})
    assert t.found and t.address == 0xFFFFFFFF81000000
    with pytest.raises(UsageError, match="several addresses"):
        resolve_ksym(ksym("dup"), local, [], None, {"dup": -1})
    with pytest.raises(UsageError, match="kptr_restrict"):
        resolve_ksym(ksym("schedule"), local, [], None, {"schedule": 0, "other": 0})


# ------------------------------------------------------------ patching (bpfkit.kernelfit)
class _FakeFD:
    """Stands in for a module BTF fd (a real one needs the module loaded)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value

    def close(self) -> None:
        pass


def test_extern_instructions_are_patched():
    from bpfkit import asm
    from bpfkit.kernelfit import KernelFit
    from bpfkit.program import ProgramSpec
    from bpfkit.spec.externs import POISON_KFUNC_BASE, KsymTarget

    class Spec:
        btf = None
        externs = {
            "k_vm": ksym("k_vm", 5, True), "k_mod": ksym("k_mod", 5, True),
            "k_gone": ExternSpec("k_gone", ExternKind.KSYM, True, 0, 5, True, index=7),
            "v_typed": ksym("v_typed", 3), "v_addr": ksym("v_addr"), "v_gone": ksym("v_gone", weak=True),
        }

    fit = KernelFit(Spec())
    fit._ksyms = {
        "k_vm": KsymTarget("k_vm", True, btf_id=100), "k_mod": KsymTarget("k_mod", True, btf_id=200, module="m"),
        "k_gone": KsymTarget("k_gone", False, why="not in the kernel's BTF"),
        "v_typed": KsymTarget("v_typed", True, btf_id=300, module="m"),
        "v_addr": KsymTarget("v_addr", True, address=0xFFFFFFFF81234567), "v_gone": KsymTarget("v_gone", False),
    }
    fit._module_fds = {"m": _FakeFD(42)}
    call = asm.insn(0x85, src=1, imm=-1)  # what clang emits for an extern call
    code = bytearray(call * 3 + asm.ld_imm64(1, 0) * 3)
    pspec = ProgramSpec("p", 0, bytes(code), extern_refs=[
        (0, "k_vm"), (1, "k_mod"), (2, "k_gone"), (3, "v_typed"), (5, "v_addr"), (7, "v_gone")])
    fd_array = fit.fit(pspec, code)
    assert bytes(code[0:8]) == asm.insn(0x85, src=2, imm=100)  # BPF_PSEUDO_KFUNC_CALL, vmlinux
    assert bytes(code[8:16]) == asm.insn(0x85, src=2, off=1, imm=200)  # fd_array[1]
    assert bytes(code[16:24]) == asm.insn(0x85, imm=POISON_KFUNC_BASE + 7)
    assert fd_array == [0, 42]
    assert bytes(code[24:40]) == asm.ld_imm64(1, 300 | (42 << 32), src=3)  # BPF_PSEUDO_BTF_ID + module fd
    assert bytes(code[40:56]) == asm.ld_imm64(1, 0xFFFFFFFF81234567)
    assert bytes(code[56:72]) == asm.ld_imm64(1, 0)
