# SPDX-License-Identifier: Apache-2.0
"""bpfkit's one ELF reader: bounded, no syscalls, no root.

:mod:`bpfkit.elf.headers` decodes the ELF header, the section and program header tables,
symbol entries and notes of any ELF file, bounded, from :mod:`bpfkit.elf.image` (pread of a
file, or bytes); :mod:`bpfkit.elf.reader` builds the loader's and uprobes' records on it,
:mod:`bpfkit.elf.columns` the symbolizer's columns. What a BPF object's sections mean (maps,
programs, externs) is the spec layer's: :mod:`bpfkit.spec.from_elf` turns an object into a
:class:`bpfkit.CollectionSpec` (``bpfkit.load_spec`` is the public entry point). This package
imports nothing of bpfkit.spec, so the symbolizer and uprobes read binaries without it.
"""

from .reader import ElfFile

__all__ = ["ElfFile"]
