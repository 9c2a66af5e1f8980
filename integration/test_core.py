# SPDX-License-Identifier: Apache-2.0
"""CO-RE, externs and kfuncs on a real kernel: bpf/core_*.bpf.c, compiled once against the
build host's vmlinux.h, load unmodified and read the right values here and, through
``python integration/vm.py --kernel 6.1 --kernel 5.10 -- integration/test_core.py``, on Debian's
6.1 and 5.10 kernels. Expectations that differ per kernel key on BPFKIT_VM_KERNEL (unset on
the host): task_struct's ``state`` became ``__state`` in 5.14, struct bpf_dynptr came in 5.19,
BPF_FUNC_cgrp_storage_get and bpf_rcu_read_lock() in 6.2.

The values are checked against the kernel itself: /proc for pids and names, /proc/kallsyms
for addresses, the kernel's configuration for CONFIG_* (Debian kernels only ship it in
/boot, which the VM does not see: the VM runner's cached copy is used there).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import threading

import pytest

from bpfkit import Collection, load_spec
from bpfkit.btf import Array, Enum, Int, Kind, Pointer
from bpfkit import kernel_btf
from bpfkit.errors import NotFoundError, VerifierError

VM = os.environ.get("BPFKIT_VM_KERNEL")  # "5.10", "6.1", ... in integration/vm.py; None here
KERNEL = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())


def trigger(coll: Collection, program: str) -> None:
    from bpfkit import link

    with link.tracepoint("syscalls", "sys_enter_getppid", coll.programs[program]):
        os.getppid()


def decode(btf, struct_name: str, raw: bytes) -> dict:
    """A struct's members from raw bytes, by its BTF: ints (signed as declared), char arrays
    as strings."""
    st = btf.lookup(struct_name, Kind.STRUCT)
    out = {}
    for m in st.members:
        t = btf.resolve(m.type)
        off = m.bit_offset // 8
        if isinstance(t, (Int, Enum)):
            out[m.name] = int.from_bytes(raw[off : off + t.size], "little", signed=t.signed)
        elif isinstance(t, Pointer):
            out[m.name] = int.from_bytes(raw[off : off + 8], "little")
        elif isinstance(t, Array):
            size = btf.size_of(m.type)
            out[m.name] = raw[off : off + size].split(b"\0", 1)[0].decode()
    return out


def proc_ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@contextlib.contextmanager
def reset_on_fork():
    """Set SCHED_RESET_ON_FORK on this thread (task_struct.sched_reset_on_fork = 1)."""
    param = os.sched_param(0)
    os.sched_setscheduler(0, os.SCHED_OTHER | os.SCHED_RESET_ON_FORK, param)
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, param)


def kernel_config_path() -> str | None:
    """The running kernel's configuration file: where bpfkit looks by itself, else (in a VM)
    the copy integration/vm.py's kernel cache unpacked from the Debian package."""
    release = os.uname().release
    from bpfkit._kernel.kinfo import kconfig_candidates

    if any(os.path.exists(path) for path in kconfig_candidates()):
        return None  # bpfkit finds it
    cache = os.environ.get("BPFKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bpfkit")
    # Debian's packages up to 6.x keep it in /boot; sid's split packages (7.x) beside the modules.
    found = [hit for pattern in (("boot", f"config-{release}"), ("usr", "lib", "modules", release, "config"))
             for hit in glob.glob(os.path.join(cache, "kernels", "*", "root", *pattern))]
    return found[0] if found else None


def config_values() -> dict[str, str]:
    from bpfkit._kernel.kinfo import read_kconfig
    from bpfkit.spec.externs import parse_kconfig

    return parse_kconfig(read_kconfig(kernel_config_path())[0])


def kallsyms() -> dict[str, int]:
    from bpfkit._kernel.kinfo import read_kallsyms

    return read_kallsyms()


# --------------------------------------------------------------------------- CO-RE
@pytest.fixture(scope="module")
def task_result():
    from conftest import bpf_object

    spec = load_spec(bpf_object("core_task"))
    spec.variables["target_tgid"].value = os.getpid()
    with Collection(spec) as coll, reset_on_fork():
        trigger(coll, "core_task")
        raw = coll.maps[".bss"][0]
        resolutions = coll.core_resolutions["core_task"]
        TASK_LOAD.update(btf_error=coll.btf_error, btf_rewrites=coll.btf_rewrites)
    return spec, decode(spec.btf, "core_result", raw), resolutions


TASK_LOAD: dict = {}  # how core_task's own BTF fared (set by the fixture)


def test_core_read_chains(task_result):
    _, r, _ = task_result
    assert r["hits"] == 1
    assert r["pid"] == threading.get_native_id() and r["tgid"] == os.getpid() == r["leader_pid"]
    assert r["ppid"] == os.getppid()
    assert r["gppid"] == proc_ppid(os.getppid())  # task->real_parent->real_parent->tgid
    with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
        assert r["comm"] == f.read().strip()
    assert r["nodename"] == os.uname().nodename  # task->nsproxy->uts_ns->name.nodename


def test_flavors_for_the_renamed_state_field(task_result):
    _, r, _ = task_result
    renamed = KERNEL >= (5, 14)
    assert (r["has_new_state"], r["has_old_state"]) == ((1, 0) if renamed else (0, 1))
    assert r["state_flavor"] == (1 if renamed else 2)
    assert r["state"] == 0  # TASK_RUNNING: the task is making a system call
    assert r["has_fake_field"] == 0
    if VM == "5.10":
        assert KERNEL == (5, 10) and not renamed


def test_type_relocations(task_result):
    spec, r, _ = task_result
    vmlinux = kernel_btf.vmlinux()
    task = vmlinux.lookup("task_struct", Kind.STRUCT)
    assert (r["has_task_struct"], r["has_missing_type"]) == (1, 0)
    assert r["has_bpf_dynptr"] == (1 if KERNEL >= (5, 19) else 0)
    assert r["task_size"] == task.size
    assert r["comm_size"] == 16 and r["comm_offset"] == task.member("comm").byte_offset
    assert r["local_type_id"] == spec.btf.lookup("task_struct", Kind.STRUCT).id
    assert r["kernel_type_id"] == task.id
    assert (r["list_head_matches"], r["list_head_bad_matches"]) == (1, 0)


def test_enum_relocations(task_result):
    _, r, resolutions = task_result
    func_id = kernel_btf.vmlinux().lookup("bpf_func_id", Kind.ENUM)
    values = {v.name: v.value for v in func_id.values}
    assert r["has_cgrp_storage_get"] == (1 if KERNEL >= (6, 2) else 0) == int("BPF_FUNC_cgrp_storage_get" in values)
    assert r["has_fake_enumval"] == 0
    assert r["func_max_id"] == values["__BPF_FUNC_MAX_ID"]
    assert r["ringbuf_type"] == 27
    (max_id,) = [x for x in resolutions if x.kind.label == "enumval_value" and "__BPF_FUNC_MAX_ID" in x.local.describe()]
    assert max_id.result.new == values["__BPF_FUNC_MAX_ID"]
    if VM and KERNEL < (6, 2):  # compiled against the host's enum, which 6.2 last grew: the value moved
        assert max_id.result.orig != max_id.result.new


def test_bitfield_relocations(task_result):
    _, r, _ = task_result
    assert r["tgid_bits"] == os.getpid() and r["tgid_signed"] == 1
    assert r["reset_on_fork"] == 1 and r["in_execve"] == 0


def test_offsets_moved_on_other_kernels(task_result):
    _, _, resolutions = task_result
    moved = [x for x in resolutions if x.kind.label == "field_byte_offset" and not x.poisoned
             and x.result.orig != x.result.new]
    if VM:
        assert any("task_struct.pid" in x.local.describe() for x in moved)
    poisoned = [x for x in resolutions if x.poisoned]
    # The branch for the flavor this kernel lacks is poisoned (and dead code).
    assert [x.local.describe().split()[2] for x in poisoned] == [
        "task_struct___o.state" if KERNEL >= (5, 14) else "task_struct___n.__state"]


def test_object_btf_is_sanitised_for_this_kernel(task_result):
    # Built against a 6.18 vmlinux.h, the object's BTF has a signed enum (the kind_flag came
    # with ENUM64 in 6.0): older kernels get it rewritten instead of refusing the whole blob.
    assert TASK_LOAD["btf_error"] is None
    rewritten = any(r.startswith("signed ENUM -> unsigned") for r in TASK_LOAD["btf_rewrites"])
    assert rewritten == (KERNEL < (6, 0))


def test_poisoned_relocation_is_explained(bpf_obj):
    spec = load_spec(bpf_obj("core_bad"))
    with pytest.raises(VerifierError) as err:
        Collection(spec, programs=["core_unguarded_field"])
    text = str(err.value)
    assert "invalid func unknown#195896080" in text
    assert "poisoned CO-RE relocation #0 (field_byte_offset)" in text
    assert "struct task_struct___missing.bpfkit_no_such_field" in text
    assert "struct task_struct has no member 'bpfkit_no_such_field'" in text
    (relo,) = err.value.core_relocations
    assert relo.insn == 1 and relo.why == "struct task_struct has no member 'bpfkit_no_such_field'"


def test_missing_weak_kfunc_call_is_explained(bpf_obj):
    spec = load_spec(bpf_obj("core_bad"))
    with pytest.raises(VerifierError, match=r"__weak kfunc 'bpfkit_no_such_kfunc', which this kernel lacks"):
        Collection(spec, programs=["core_unguarded_kfunc"])


def test_resolving_without_loading(bpf_obj):
    spec = load_spec(bpf_obj("core_task"))
    resolutions = spec.resolve_core()["core_task"]
    assert len(resolutions) == len(spec.programs["core_task"].core_relos)
    from bpfkit.cli.cmd_inspect import describe_core

    rows = describe_core(spec)
    assert {row["kind"] for row in rows} >= {"field_byte_offset", "field_exists", "type_matches", "enumval_value"}
    assert any(row["poisoned"] and "no member" in row["why"] for row in rows)


# ------------------------------------------------------------------------- externs
@pytest.fixture(scope="module")
def extern_result():
    from conftest import bpf_object

    spec = load_spec(bpf_object("core_externs"))
    spec.variables["target_tgid"].value = os.getpid()
    with Collection(spec, kconfig=kernel_config_path()) as coll:
        trigger(coll, "core_externs")
        raw = coll.maps[".bss"][0]
    return decode(spec.btf, "extern_result", raw)


def test_kconfig_externs(extern_result):
    from bpfkit.features.probes import kernel_version_code

    r = extern_result
    config = config_values()
    assert r["hits"] == 1
    assert r["kernel_version"] == kernel_version_code()
    assert r["has_syscall_wrapper"] == 1  # x86-64 since 4.17
    assert r["hz"] == int(config["CONFIG_HZ"])
    assert r["bpf_syscall"] == 1 and r["debug_info_btf"] == 1  # y
    assert r["default_hostname"] == config["CONFIG_DEFAULT_HOSTNAME"].strip('"')
    assert r["no_such_option"] == 0


def test_ksym_externs(extern_result):
    r = extern_result
    assert r["schedule_addr"] == kallsyms()["schedule"] != 0
    assert r["no_such_symbol_addr"] == 0 and r["no_such_var_addr"] == 0


def test_weak_kfuncs(extern_result):
    r = extern_result
    has_rcu = KERNEL >= (6, 2)
    assert r["has_rcu_kfunc"] == int(has_rcu) and r["rcu_sections"] == int(has_rcu)
    assert r["has_no_such_kfunc"] == 0


def test_typed_percpu_ksym(bpf_obj):
    """runqueues is looked up in kernel BTF, which has per-CPU VARs only when pahole made
    them (Debian 6.1: yes; Debian 5.10: no); the kernel then asks kallsyms for its address,
    which has data symbols only with CONFIG_KALLSYMS_ALL (Debian: yes; the host kernel: no)."""
    from bpfkit._kernel.cpus import num_possible_cpus

    spec = load_spec(bpf_obj("core_externs"))
    spec.variables["target_tgid"].value = os.getpid()
    if not kernel_btf.vmlinux().find("runqueues", Kind.VAR):
        with pytest.raises(NotFoundError, match="has no VAR named 'runqueues'"):
            Collection(spec, programs=["core_percpu"], kconfig=kernel_config_path())
        assert VM != "6.1"
        return
    if "runqueues" not in kallsyms():
        with pytest.raises(VerifierError, match="typed __ksym variables need CONFIG_KALLSYMS_ALL"):
            Collection(spec, programs=["core_percpu"], kconfig=kernel_config_path())
        return
    with Collection(spec, programs=["core_percpu"], kconfig=kernel_config_path()) as coll:
        trigger(coll, "core_percpu")
        raw = coll.maps[".data"][0]
    cpus = [int.from_bytes(raw[i : i + 4], "little", signed=True) for i in (0, 4)]
    assert cpus == ([0, 1] if num_possible_cpus() > 1 else [0, -1])


def test_kconfig_from_a_mapping_and_missing_files(bpf_obj, tmp_path):
    spec = load_spec(bpf_obj("core_externs"))
    spec.variables["target_tgid"].value = os.getpid()
    with Collection(spec, kconfig={"CONFIG_HZ": 1000, "CONFIG_DEFAULT_HOSTNAME": "box"}) as coll:
        trigger(coll, "core_externs")
        r = decode(spec.btf, "extern_result", coll.maps[".bss"][0])
    assert (r["hz"], r["default_hostname"], r["bpf_syscall"], r["debug_info_btf"]) == (1000, "box", 0, 0)
    with pytest.raises(NotFoundError, match="no kernel configuration found"):
        Collection(spec, kconfig=tmp_path / "nope")
