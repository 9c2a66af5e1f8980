# SPDX-License-Identifier: Apache-2.0
"""Network attach: option parsing, anchors, error meanings, constants against the UAPI headers.
No root, no kernel objects (the attach paths are tested in integration/test_net_*.py)."""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from bpfkit import link
from bpfkit._kernel import netlink as nl
from bpfkit._kernel.consts import BPF_F_AFTER, BPF_F_BEFORE, BPF_F_ID, BPF_F_LINK, AttachType, ProgType
from bpfkit._kernel.fd import FD
from bpfkit.errors import NotFoundError, UsageError
# bpfkit.link.tc / .xdp are the attach functions; the modules are reached through importlib.
tc_mod = importlib.import_module("bpfkit.link.tc")
xdp_mod = importlib.import_module("bpfkit.link.xdp")
from bpfkit.link._prog_arg import check_program


# ------------------------------------------------------------------------------ options
def test_attach_modes_parse() -> None:
    assert link.NetAttachMode.of("NetLink") is link.NetAttachMode.NETLINK
    assert link.NetAttachMode.of(link.NetAttachMode.LINK) is link.NetAttachMode.LINK
    with pytest.raises(UsageError, match="auto, link or netlink"):
        link.NetAttachMode.of("ioctl")


@pytest.mark.parametrize("text, mode", [
    (None, "auto"), ("skb", "generic"), ("generic", "generic"), ("native", "driver"), ("drv", "driver"),
    ("hw", "offload"), ("OFFLOAD", "offload"), ("xdpgeneric", "generic"),
])
def test_xdp_modes_parse(text, mode) -> None:
    assert link.XdpMode.of(text) is link.XdpMode(mode)


def test_xdp_mode_flags() -> None:
    assert link.XdpMode.AUTO.flag == 0
    assert link.XdpMode.GENERIC.flag == nl.XdpFlag.SKB_MODE
    assert link.XdpMode.DRIVER.flag == nl.XdpFlag.DRV_MODE
    assert link.XdpMode.OFFLOAD.flag == nl.XdpFlag.HW_MODE
    with pytest.raises(UsageError, match="generic, driver or offload"):
        link.XdpMode.of("turbo")


def test_tc_direction() -> None:
    assert link.TcDirection.of("Ingress").attach_type == AttachType.TCX_INGRESS
    assert link.TcDirection.EGRESS.attach_type == AttachType.TCX_EGRESS
    assert link.TcDirection.INGRESS.parent == 0xFFFFFFF2 and link.TcDirection.EGRESS.parent == 0xFFFFFFF3
    with pytest.raises(UsageError):
        link.TcDirection.of("up")
    # Taken from the program's section when not given.
    assert tc_mod._direction(None, SimpleNamespace(attach_type=AttachType.TCX_EGRESS)) is link.TcDirection.EGRESS
    with pytest.raises(UsageError, match="ingress' or 'egress"):
        tc_mod._direction(None, SimpleNamespace(name="p", attach_type=None))


# ------------------------------------------------------------------------------ anchors
def test_anchor_flags() -> None:
    A = link.Anchor
    assert A.head().resolve() == (BPF_F_BEFORE, 0)
    assert A.tail().resolve() == (BPF_F_AFTER, 0)
    assert A.before(prog_id=5).resolve() == (BPF_F_BEFORE | BPF_F_ID, 5)
    assert A.after(link_id=7).resolve() == (BPF_F_AFTER | BPF_F_ID | BPF_F_LINK, 7)
    assert A.after(SimpleNamespace(name="p", fd=42)).resolve() == (BPF_F_AFTER, 42)
    raw = os.open("/dev/null", os.O_RDONLY)
    lk = link.RawLink(FD(raw))
    try:
        assert A.before(lk).resolve() == (BPF_F_BEFORE | BPF_F_LINK, lk.fd.raw)
        assert str(A.before(lk)) == "before link"
    finally:
        lk.close()
    with pytest.raises(UsageError, match="closed"):
        A.before(lk).resolve()
    assert [str(a) for a in (A.head(), A.tail(), A.before(prog_id=3), A.after(link_id=4))] == [
        "head", "tail", "before program id 3", "after link id 4"]


def test_anchor_needs_exactly_one_target() -> None:
    with pytest.raises(UsageError):
        link.Anchor.before()
    with pytest.raises(UsageError):
        link.Anchor.after(SimpleNamespace(fd=3), prog_id=4)


# ------------------------------------------------------------------------------ checks
def test_program_type_checked_before_any_syscall() -> None:
    xdp_prog = SimpleNamespace(name="x", type=ProgType.XDP, fd=99)
    with pytest.raises(UsageError, match="'x' is a xdp program; a tc hook needs a sched_cls program"):
        check_program(xdp_prog, (ProgType.SCHED_CLS,), "a tc hook")
    assert check_program(xdp_prog, (ProgType.XDP,), "an XDP hook") == 99
    with pytest.raises(UsageError):
        link.xdp("lo", SimpleNamespace(name="t", type=ProgType.TRACEPOINT, fd=99))
    with pytest.raises(UsageError):
        link.tc("lo", SimpleNamespace(name="t", type=ProgType.XDP, fd=99), "ingress")


def test_option_conflicts_refused_up_front() -> None:
    prog = SimpleNamespace(name="c", type=ProgType.SCHED_CLS, fd=99)
    with pytest.raises(UsageError, match="priority"):
        link.tc("lo", prog, "ingress", mode="netlink", anchor=link.Anchor.head())
    with pytest.raises(UsageError, match="anchor"):
        link.tc("lo", prog, "ingress", mode="link", priority=2)
    with pytest.raises(UsageError):
        link.attach_network(prog, "kprobe:do_sys_openat2")
    with pytest.raises(UsageError, match="xdp_mode"):
        link.attach_network(prog, "tc:lo:ingress", xdp_mode="generic")


def test_interface_must_be_name_or_index() -> None:
    prog = SimpleNamespace(name="x", type=ProgType.XDP, fd=99)
    for bad in ("", None, 1.5, True):
        with pytest.raises(UsageError):
            link.xdp(bad, prog)


# --------------------------------------------------------------------------- meanings
@pytest.mark.parametrize("err, mode, path, replacing, words", [
    (errno.EBUSY, "auto", "netlink", False, "another XDP program is attached"),
    (errno.EBUSY, "auto", "link", False, "cannot replace a program attached through netlink"),
    (errno.EEXIST, "generic", "netlink", True, "not the expected one"),
    (errno.EEXIST, "generic", "link", False, "driver and generic XDP cannot be active at once"),
    (errno.EOPNOTSUPP, "driver", "link", False, "driver mode is unsupported by this device"),
    (errno.EOPNOTSUPP, "offload", "netlink", False, "offload is unsupported"),
    (errno.EINVAL, "offload", "netlink", False, "program loaded for that device"),
    (errno.ERANGE, "driver", "netlink", False, "MTU"),
    (errno.EPERM, "auto", "link", False, "CAP_NET_ADMIN"),
])
def test_xdp_errno_meanings(err, mode, path, replacing, words) -> None:
    assert words in xdp_mod._hint(err, link.XdpMode(mode), path, replacing)


@pytest.mark.parametrize("err, path, words", [
    (errno.ESTALE, "tcx", "revision is not 7"),
    (errno.ENOENT, "tcx", "the anchor (head) is not attached"),
    (errno.EEXIST, "tcx", "already attached to this hook"),
    (errno.EEXIST, "cls_bpf", "priority 3 handle 1 exists"),
    (errno.ERANGE, "tcx", "as many programs as the kernel allows"),
])
def test_tc_errno_meanings(err, path, words) -> None:
    text = tc_mod._hint(err, path, anchor=link.Anchor.head(), expected_revision=7, priority=3, handle=1)
    assert words in text


def test_xdp_query_views() -> None:
    q = link.XdpQuery("eth0", 2, {link.XdpMode.GENERIC: 11, link.XdpMode.OFFLOAD: 12})
    assert q.prog_id == 11 and q.mode is link.XdpMode.GENERIC and q
    empty = link.XdpQuery("eth0", 2, {})
    assert empty.prog_id == 0 and empty.mode is None and not empty
    state = nl.XdpState(nl.XdpAttached.MULTI, drv_prog_id=3, hw_prog_id=4)
    assert state.prog_id(nl.XdpFlag.DRV_MODE) == 3 and state.prog_id(nl.XdpFlag.SKB_MODE) == 0


# ------------------------------------------------------------------------- namespaces
def test_netns_current_runs_inline() -> None:
    with nl.Netns.current() as ns:
        assert ns.is_current()
        assert ns.run(lambda x: x + 1, 1) == 2


def test_netns_open_errors(tmp_path) -> None:
    with pytest.raises(NotFoundError, match="bpfkit_surely_absent"):
        nl.Netns.open("bpfkit_surely_absent")
    plain = tmp_path / "not_a_netns"
    plain.write_text("")
    with pytest.raises(UsageError, match="not a network namespace"):
        nl.Netns.open(str(plain))


def test_unknown_interface_names_the_namespace() -> None:
    with pytest.raises(NotFoundError, match="no network interface 'bpfkit_nope0' in the current network namespace"):
        link.xdp("bpfkit_nope0", SimpleNamespace(name="x", type=ProgType.XDP, fd=99))


# --------------------------------------------------------------------- UAPI constants
_CONSTANTS = {
    "XDP_FLAGS_UPDATE_IF_NOEXIST": int(nl.XdpFlag.UPDATE_IF_NOEXIST),
    "XDP_FLAGS_SKB_MODE": int(nl.XdpFlag.SKB_MODE),
    "XDP_FLAGS_DRV_MODE": int(nl.XdpFlag.DRV_MODE),
    "XDP_FLAGS_HW_MODE": int(nl.XdpFlag.HW_MODE),
    "XDP_FLAGS_REPLACE": int(nl.XdpFlag.REPLACE),
    "XDP_ATTACHED_DRV": int(nl.XdpAttached.DRV),
    "XDP_ATTACHED_SKB": int(nl.XdpAttached.SKB),
    "XDP_ATTACHED_HW": int(nl.XdpAttached.HW),
    "XDP_ATTACHED_MULTI": int(nl.XdpAttached.MULTI),
    "TC_H_CLSACT": nl.TC_H_CLSACT,
    "TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)": nl.TC_H_INGRESS_PARENT,
    "TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)": nl.TC_H_EGRESS_PARENT,
    "TCA_BPF_FLAG_ACT_DIRECT": nl.TCA_BPF_FLAG_ACT_DIRECT,
    "TCA_BPF_TAG": nl.TCA_BPF_TAG,
    "TCA_BPF_ID": nl.TCA_BPF_ID,
    "ETH_P_ALL": nl.ETH_P_ALL,
    "NS_GET_NSTYPE": nl.NS_GET_NSTYPE,
    "CLONE_NEWNET": nl.CLONE_NEWNET,
}


def test_netlink_constants_match_uapi_headers(tmp_path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    lines = "\n".join(f'    printf("%s %llu\\n", "{name}", (unsigned long long)({name}));'
                      for name in _CONSTANTS)
    src = tmp_path / "c.c"
    src.write_text("#define _GNU_SOURCE\n#include <stdio.h>\n#include <sched.h>\n#include <linux/if_link.h>\n"
                   "#include <linux/pkt_sched.h>\n#include <linux/pkt_cls.h>\n#include <linux/if_ether.h>\n"
                   "#include <linux/nsfs.h>\nint main(void) {\n" + lines + "\n    return 0;\n}\n")
    exe = tmp_path / "c"
    proc = subprocess.run([cc, str(src), "-o", str(exe)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"UAPI headers unavailable: {proc.stderr.strip()[:300]}")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    seen = {}
    for line in out.splitlines():
        name, _, value = line.rpartition(" ")
        seen[name] = int(value)
    assert seen == _CONSTANTS
