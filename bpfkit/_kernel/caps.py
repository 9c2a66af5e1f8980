# SPDX-License-Identifier: Apache-2.0
"""Why the kernel said EPERM/EACCES: the capabilities this process really holds, the sysctls that
admit unprivileged use, and the refusals that are no capability at all.

An EPERM hint is only useful when it is true. ``needs CAP_BPF (or root)`` is wrong for a root
process that holds CAP_BPF and was refused by lockdown, an LSM or a seccomp filter, and for a
tracefs write (tracefs checks file permissions, not CAP_PERFMON). So the hint is computed from:

* the effective set, ``CapEff`` in /proc/self/status;
* the kernel's rules (5.8+, include/linux/capability.h): ``bpf_capable()`` is CAP_BPF or
  CAP_SYS_ADMIN, ``perfmon_capable()`` CAP_PERFMON or CAP_SYS_ADMIN; ``*_GET_NEXT_ID``,
  ``*_GET_FD_BY_ID`` and BPF_ENABLE_STATS want CAP_SYS_ADMIN itself; before 5.8 everything wants
  CAP_SYS_ADMIN;
* ``kernel.unprivileged_bpf_disabled`` (0: some bpf() use without CAP_BPF) and
  ``kernel.perf_event_paranoid`` (<= 1: perf events of one's own processes without CAP_PERFMON);
* kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK (EPERM when it is exceeded; raising it
  needs CAP_SYS_RESOURCE);
* what else refuses: a pin path outside bpffs (BPF_OBJ_PIN: EPERM), kernel lockdown
  (/sys/kernel/security/lockdown: integrity blocks bpf_probe_write_user; confidentiality also
  kernel reads, perf and tracefs), a seccomp filter (``Seccomp:`` in /proc/self/status), an LSM.
"""

from __future__ import annotations

import os

# include/uapi/linux/capability.h
CAP_DAC_OVERRIDE = 1
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
CAP_SYS_RESOURCE = 24
CAP_PERFMON = 38
CAP_BPF = 39
CAP_NAMES = {CAP_DAC_OVERRIDE: "CAP_DAC_OVERRIDE", CAP_NET_ADMIN: "CAP_NET_ADMIN", CAP_SYS_ADMIN: "CAP_SYS_ADMIN",
             CAP_SYS_RESOURCE: "CAP_SYS_RESOURCE", CAP_PERFMON: "CAP_PERFMON", CAP_BPF: "CAP_BPF"}

# What each operation needs (every capability listed; CAP_SYS_ADMIN stands in for CAP_BPF and
# CAP_PERFMON, as the kernel's bpf_capable()/perfmon_capable()).
_BPF_ONLY = ("CAP_BPF",)
_NEEDS: dict[str, tuple[str, ...]] = {
    "BPF_MAP_CREATE": _BPF_ONLY,
    "BPF_BTF_LOAD": _BPF_ONLY,
    "BPF_PROG_LOAD": _BPF_ONLY,  # + CAP_PERFMON for tracing types, CAP_NET_ADMIN for networking
    "BPF_LINK_CREATE": ("CAP_BPF", "CAP_PERFMON"),
    "BPF_RAW_TRACEPOINT_OPEN": ("CAP_BPF", "CAP_PERFMON"),
    "BPF_PROG_ATTACH": ("CAP_NET_ADMIN",),
    "BPF_ENABLE_STATS": ("CAP_SYS_ADMIN",),
    "perf_event_open": ("CAP_PERFMON",),
}
for _kind in ("PROG", "MAP", "LINK", "BTF"):
    _NEEDS[f"BPF_{_kind}_GET_NEXT_ID"] = ("CAP_SYS_ADMIN",)
    _NEEDS[f"BPF_{_kind}_GET_FD_BY_ID"] = ("CAP_SYS_ADMIN",)
_PIN_OPS = ("BPF_OBJ_PIN", "BPF_OBJ_GET")
_DENYING_LSMS = ("selinux", "apparmor", "smack", "tomoyo", "bpf", "landlock")


def _status_field(name: str) -> str | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def effective() -> int:
    """The effective capability set (CapEff), as a bit mask."""
    value = _status_field("CapEff")
    return int(value, 16) if value else 0


def _kernel_release() -> tuple[int, int]:
    parts = os.uname().release.split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        return (0, 0)


def holds(name: str, caps: int | None = None) -> bool:
    """Whether the effective set satisfies ``name`` as the kernel checks it."""
    caps = effective() if caps is None else caps
    bit = {v: k for k, v in CAP_NAMES.items()}[name]
    if caps & (1 << bit):
        return True
    if name in ("CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN"):  # bpf_capable(), perfmon_capable(), bpf_net_capable()
        return bool(caps & (1 << CAP_SYS_ADMIN))
    return False


def sysctl(name: str) -> str | None:
    try:
        with open(f"/proc/sys/kernel/{name}") as f:
            return f.read().strip()
    except OSError:
        return None


def lockdown() -> str | None:
    """The active lockdown mode (none/integrity/confidentiality), or None if it cannot be read."""
    try:
        with open("/sys/kernel/security/lockdown") as f:
            text = f.read()
    except OSError:
        text = ""
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    try:
        with open("/proc/cmdline") as f:
            for arg in f.read().split():
                if arg.startswith("lockdown="):
                    return arg.split("=", 1)[1]
    except OSError:
        pass
    return None


def _lsms() -> list[str]:
    try:
        with open("/sys/kernel/security/lsm") as f:
            return [m for m in f.read().strip().split(",") if m in _DENYING_LSMS]
    except OSError:
        return []


def _on_bpffs(path: str) -> bool:
    """Whether ``path``'s directory is on bpffs: the one test pins use (statfs of the nearest
    existing ancestor, bpfkit._kernel.bpffs)."""
    from .bpffs import is_bpffs

    return is_bpffs(os.path.dirname(os.path.abspath(path)) or "/")


def _is_tracefs_op(op: str) -> bool:
    """``open|write|read <tracefs file>``, as bpfkit._kernel.tracefs names its operations."""
    verb, _, what = op.partition(" ")
    return verb in ("open", "write", "read") and ("/tracing" in what or what.endswith("_events")
                                                  or what in ("trace_pipe", "trace_marker"))


def needs(op: str) -> tuple[str, ...]:
    """The capabilities ``op`` needs on this kernel (CAP_SYS_ADMIN for all before 5.8)."""
    if _is_tracefs_op(op):
        return ()
    need = _NEEDS.get(op, _BPF_ONLY if op.startswith("BPF_") and op not in _PIN_OPS else ())
    if need and _kernel_release() < (5, 8):
        return ("CAP_SYS_ADMIN",)
    return need


def _other_reasons(op: str, path: str | None) -> list[str]:
    reasons = []
    mode = lockdown()
    if mode and mode != "none":
        blocks = ("bpf_probe_write_user" if mode == "integrity"
                  else "kernel memory reads, perf events, tracefs and bpf_probe_write_user")
        reasons.append(f"kernel lockdown (mode '{mode}', which refuses {blocks})")
    elif mode is None:
        reasons.append("kernel lockdown (its mode is unreadable: securityfs is not mounted at /sys/kernel/security)")
    if (_status_field("Seccomp") or "0") != "0":
        reasons.append("a seccomp filter on this process")
    lsms = _lsms()
    reasons.append(f"an LSM policy ({', '.join(lsms)})" if lsms else "an LSM policy (SELinux, AppArmor, BPF LSM)")
    return reasons


# kernel/bpf/syscall.c is_perfmon_prog_type / is_net_admin_prog_type.
_PERFMON_PROG_TYPES = ("KPROBE", "TRACEPOINT", "PERF_EVENT", "RAW_TRACEPOINT", "RAW_TRACEPOINT_WRITABLE",
                       "TRACING", "LSM", "STRUCT_OPS", "EXT")
_NET_ADMIN_PROG_TYPES = ("SCHED_CLS", "SCHED_ACT", "XDP", "LWT_IN", "LWT_OUT", "LWT_XMIT", "LWT_SEG6LOCAL",
                         "SK_SKB", "SK_MSG", "FLOW_DISSECTOR", "CGROUP_DEVICE", "CGROUP_SOCK", "CGROUP_SKB",
                         "CGROUP_SOCK_ADDR", "CGROUP_SOCKOPT", "CGROUP_SYSCTL", "SOCK_OPS", "SK_LOOKUP",
                         "SK_REUSEPORT", "NETFILTER")


def prog_type_needs(prog_type: int) -> tuple[str, ...]:
    """What BPF_PROG_LOAD of ``prog_type`` needs besides CAP_BPF (5.8+)."""
    from .consts import ProgType

    try:
        name = ProgType(prog_type).name
    except ValueError:
        return ()
    if name in _PERFMON_PROG_TYPES:
        return ("CAP_PERFMON",)
    if name in _NET_ADMIN_PROG_TYPES:
        return ("CAP_NET_ADMIN",)
    return ()


def explain(op: str, err: int, detail: str = "", path: str | None = None,
            needs_also: tuple[str, ...] = ()) -> tuple[str, str]:
    """(missing capabilities, one-sentence hint) for EPERM/EACCES from ``op``; ``needs_also``:
    what the object needs besides (CAP_PERFMON for a tracing program, see prog_type_needs).

    ``missing`` is '' when every capability ``op`` needs is held: the hint then names what else
    refuses (a path outside bpffs, lockdown, seccomp, an LSM)."""
    caps = effective()
    if op in _PIN_OPS and path and not _on_bpffs(path):
        return "", f"{path} is not on a bpf filesystem (BPF_OBJ_PIN/OBJ_GET work only under a bpffs mount); not a capability"
    if _is_tracefs_op(op):
        if not (os.geteuid() == 0 or holds("CAP_DAC_OVERRIDE", caps)):
            return "", ("tracefs control files are root's (mode 0640): writing them takes uid 0 or "
                        "CAP_DAC_OVERRIDE, not CAP_PERFMON, unless tracefs is mounted with a gid=/mode= "
                        "admitting this user")
        return "", ("not a capability (tracefs checks file permissions, which this root process passes); "
                    "refused by " + " or ".join(_other_reasons(op, path)))
    need = needs(op)
    if need and need != ("CAP_SYS_ADMIN",):
        need = need + tuple(c for c in needs_also if c not in need)
    missing = [c for c in need if not holds(c, caps)]
    if missing:
        text = f"needs {' and '.join(missing)}, which this process lacks"
        if os.geteuid() == 0:
            text += " (it runs as root, with a reduced capability set)"
        if "CAP_BPF" in missing:
            v = sysctl("unprivileged_bpf_disabled")
            if v is not None:
                text += f"; kernel.unprivileged_bpf_disabled is {v}" + (" (bpf() without CAP_BPF is refused)" if v != "0" else "")
        if "CAP_PERFMON" in missing:
            v = sysctl("perf_event_paranoid")
            if v is not None:
                text += f"; kernel.perf_event_paranoid is {v}"
        return " and ".join(missing), text
    if op in ("BPF_MAP_CREATE", "BPF_PROG_LOAD", "BPF_BTF_LOAD") and _kernel_release() < (5, 11):
        import resource  # before 5.11 only (as bpfkit._kernel.rlimit)

        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY and not (caps & (1 << CAP_SYS_RESOURCE)):
            return "CAP_SYS_RESOURCE", (f"RLIMIT_MEMLOCK is {soft} bytes (kernels before 5.11 charge BPF memory to it) "
                                        "and raising it needs CAP_SYS_RESOURCE, which this process lacks")
    held = f"this process holds {' and '.join(need)}" if need else "the operation needs none"
    if op == "BPF_PROG_LOAD" and not needs_also and not (holds("CAP_PERFMON", caps) and holds("CAP_NET_ADMIN", caps)):
        lacking = [c for c in ("CAP_PERFMON", "CAP_NET_ADMIN") if not holds(c, caps)]
        return " or ".join(lacking), (f"needs {' or '.join(lacking)} as well if the program is of a tracing "
                                      "(CAP_PERFMON) or networking (CAP_NET_ADMIN) type, which this process lacks")
    return "", f"not a missing capability ({held}); refused by " + " or ".join(_other_reasons(op, path))


def _install() -> None:
    """Let bpfkit.errors.kernel_error phrase EPERM/EACCES hints from this module (errors.py sits
    below the kernel layer and cannot import it)."""
    from .. import errors

    errors.set_permission_explainer(explain)


_install()
