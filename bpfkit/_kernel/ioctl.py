# SPDX-License-Identifier: Apache-2.0
"""ioctl(2) request numbers as asm-generic/ioctl.h encodes them: direction, size, type and
number packed into one word (``_IOC()``; x86, arm64 and riscv share the generic layout). A
leaf: the perf_event and user_events request tables are built from it."""

IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2


def ioc(direction: int, type_char: str, nr: int, size: int) -> int:
    """The _IOC() macro: ``direction`` (IOC_NONE/IOC_WRITE/IOC_READ, or'ed), the argument's
    ``size`` in bytes, the driver's ``type_char`` and the request's number ``nr``."""
    return (direction << 30) | (size << 16) | (ord(type_char) << 8) | nr
