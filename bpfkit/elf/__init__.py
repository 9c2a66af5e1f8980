# SPDX-License-Identifier: Apache-2.0
"""Reading BPF ELF objects into specs: pure parsing, no syscalls, no root.

:func:`parse_object` turns an object's bytes into a :class:`bpfkit.CollectionSpec`
(``bpfkit.load_spec`` is the public entry point, taking a path or bytes).

The package is also bpfkit's one ELF reader: :mod:`bpfkit.elf.headers` decodes the ELF header,
the section and program header tables, symbol entries and notes of any ELF file, bounded,
from :mod:`bpfkit.elf.image` (pread of a file, or bytes); :mod:`bpfkit.elf.reader` builds the
loader's and uprobes' records on it, :mod:`bpfkit.elf.columns` the symbolizer's columns.
"""

from .loader import internal_map_name, parse_object
from .reader import ElfFile

__all__ = ["parse_object", "internal_map_name", "ElfFile"]
