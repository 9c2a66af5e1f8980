# SPDX-License-Identifier: Apache-2.0
"""The pre-generated cffi module matches abi.py's declarations, and the kernel layer uses it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_generated_module_is_current():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_abi.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_kernel_layer_uses_the_generated_module():
    from bpfkit._kernel import _abi_ffi, abi

    assert abi.ffi is _abi_ffi.ffi
    for name in abi.CHECKED_TYPES:
        assert abi.ffi.sizeof(name) == abi.build_ffi().sizeof(name), name
