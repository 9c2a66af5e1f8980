# SPDX-License-Identifier: Apache-2.0
"""Reading BPF ELF objects into specs: pure parsing, no syscalls, no root.

:func:`parse_object` turns an object's bytes into a :class:`bpfkit.CollectionSpec`
(``bpfkit.load_spec`` is the public entry point, taking a path or bytes).
"""

from .loader import internal_map_name, parse_object
from .reader import ElfFile

__all__ = ["parse_object", "internal_map_name", "ElfFile"]
