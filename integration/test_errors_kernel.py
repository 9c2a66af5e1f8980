# SPDX-License-Identifier: Apache-2.0
"""bpfkit.errors against the real kernel: the errno a syscall gives picks the class.

EOPNOTSUPP and ENOTSUPP (524) are NotSupportedErrors as well as KernelErrors, and every
KernelError is an OSError carrying the kernel's errno (and, for pins, the path).
"""

from __future__ import annotations

import errno
import os

import pytest

from bpfkit import asm, features
from bpfkit._kernel import bpf as kbpf
from bpfkit._kernel.abi import ffi
from bpfkit._kernel.consts import AttachType, MapType, ProgType
from bpfkit.errors import KernelError, KernelNotSupportedError, NotSupportedError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for bpf()")


def test_lookup_and_delete_on_an_array_is_enotsupp() -> None:
    """An array map has no lookup-and-delete: map_lookup_and_delete_elem's -ENOTSUPP (4.20+)."""
    key, value = ffi.new("uint32_t *", 0), ffi.new("uint64_t *")
    with kbpf.map_create(int(MapType.ARRAY), 4, 8, 1) as fd:
        with pytest.raises(NotSupportedError) as info:
            kbpf.map_lookup_and_delete(fd, key, value)
    exc = info.value
    assert type(exc) is KernelNotSupportedError and isinstance(exc, KernelError)
    assert exc.errno == 524 and exc.op == "BPF_MAP_LOOKUP_AND_DELETE_ELEM"
    assert str(exc) == "BPF_MAP_LOOKUP_AND_DELETE_ELEM: ENOTSUPP (Unknown error 524)"


def test_kprobe_multi_refused_is_eopnotsupp() -> None:
    """Without CONFIG_FPROBE (this host) BPF_LINK_CREATE(BPF_TRACE_KPROBE_MULTI) is the
    link's stub's -EOPNOTSUPP: a NotSupportedError, caught as an OSError too."""
    result = features.probe("kprobe_multi")
    if result.supported or "EOPNOTSUPP" not in result.reason:
        pytest.skip(f"kprobe_multi: {result.reason}")
    prog = kbpf.prog_load(int(ProgType.KPROBE), asm.return_imm(0), name="errors_kmulti",
                          expected_attach_type=int(AttachType.TRACE_KPROBE_MULTI))
    with prog:
        try:
            kbpf.link_create_kprobe_multi(prog, syms=["vfs_read"], detail="vfs_read").close()
        except OSError as exc:  # one except for any kernel failure
            assert exc.errno == errno.EOPNOTSUPP and exc.strerror == os.strerror(errno.EOPNOTSUPP)
            assert isinstance(exc, NotSupportedError) and type(exc) is KernelNotSupportedError
            assert str(exc) == "BPF_LINK_CREATE: EOPNOTSUPP (Operation not supported): vfs_read"
            assert exc.feature == "BPF_LINK_CREATE" and exc.reason.startswith("EOPNOTSUPP")
        else:
            pytest.fail("BPF_LINK_CREATE(BPF_TRACE_KPROBE_MULTI) worked where the probe said EOPNOTSUPP")


def test_missing_pin_is_an_oserror_naming_the_path() -> None:
    path = "/sys/fs/bpf/bpfkit-errors-test-no-such-pin"
    with pytest.raises(OSError) as info:
        kbpf.obj_get(path)
    exc = info.value
    assert type(exc) is KernelError and not isinstance(exc, NotSupportedError)
    assert (exc.errno, exc.filename) == (errno.ENOENT, path)
    assert str(exc) == f"BPF_OBJ_GET: ENOENT (No such file or directory): {path}"


def test_a_hint_a_caller_adds_is_a_field() -> None:
    """Map() knows why BPF_MAP_CREATE said EINVAL (a size left 0): its hint is in ``hints``."""
    from bpfkit.maps import Map, MapSpec, zero_size_hint

    with pytest.raises(KernelError) as info:
        Map(MapSpec("zero", MapType.ARRAY, 4, 0, 4))
    exc = info.value
    hint = zero_size_hint("zero", ["value_size"])
    assert exc.errno == errno.EINVAL and exc.hints == (hint,)
    assert str(exc) == f"create map 'zero' (array): BPF_MAP_CREATE: EINVAL (Invalid argument): map 'zero'; {hint}"
