# SPDX-License-Identifier: Apache-2.0
"""The kernel ABI (see DESIGN.md)."""

from . import caps as _caps  # noqa: F401 - installs the EPERM explainer bpfkit.errors.kernel_error uses
