# SPDX-License-Identifier: Apache-2.0
"""bpfkit's own-format label decoders (bpfkit.metrics.decoders) for numbers with no UAPI name:
the kernel's internal errnos by their names, the rest as ebpf_exporter writes them. Kernel-free."""

from __future__ import annotations

import errno

import pytest

from bpfkit.metrics.decoders import KERNEL_ERRNOS, make_decoder


@pytest.mark.parametrize("value, text", [
    (2, "ENOENT"), (-2, "ENOENT"), (-errno.EAGAIN, "EAGAIN"),
    (512, "ERESTARTSYS"), (-516, "ERESTART_RESTARTBLOCK"), (524, "ENOTSUPP"),
    (520, "unknown:520"), (4000, "unknown:4000"),  # include/linux/errno.h skips 520
])
def test_errno_names(value: int, text: str) -> None:
    assert make_decoder("errno")(value) == text


def test_kernel_errnos_are_above_the_uapi() -> None:
    assert min(KERNEL_ERRNOS) == 512 and not set(KERNEL_ERRNOS) & set(errno.errorcode)
