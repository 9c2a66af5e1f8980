# SPDX-License-Identifier: Apache-2.0
"""The kernel ABI: bpf(2), perf_event_open(2), netlink, tracefs and /sys, as cffi structs and
syscalls (docs/architecture.md). cffi objects stay inside it (tests/test_kernel_boundary.py)."""

from . import caps as _caps  # noqa: F401 - installs the EPERM explainer bpfkit.errors.kernel_error uses
