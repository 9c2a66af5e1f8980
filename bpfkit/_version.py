# SPDX-License-Identifier: Apache-2.0
"""bpfkit's version: the one place it is written. pyproject.toml reads it (setuptools'
``dynamic = ["version"]``, ``attr``, parsed without importing bpfkit), ``bpfkit.__version__``
and ``bpfkit --version`` import it; so an editable install and a wheel say the same as the
metadata (tests/test_version.py checks)."""

__version__ = "0.1.0"
