# SPDX-License-Identifier: Apache-2.0
"""Resizing a global-data section before load: its last variable, an array, grows or shrinks
to fill a new value size, as libbpf's ``bpf_map__set_value_size`` does for a data-section map
and scx's ``RESIZE_ARRAY(skel, data, uei_dump, n)`` relies on (the array sits alone in its own
section, ``SEC(".data.uei_dump")``, so that it is the last variable).

libbpf (libbpf.c, map_btf_datasec_resize) requires the datasec's last variable to be an array
whose element size divides ``size - its offset``, then writes a longer array type into the
object's BTF; when it cannot, it clears the map's BTF key/value type ids and resizes anyway.
bpfkit refuses what is not such an array (the new bytes would belong to no variable) and always
clears the ids (the kernel checks a map's BTF value type against its value size, and the
object's BTF is shared, not rewritten): programs reach global data by offset, not through BTF.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~2 ms to import: its names are for the type checker only
if TYPE_CHECKING:
    from .collection import CollectionSpec

__all__ = ["set_value_size"]


def set_value_size(spec: CollectionSpec, map_name: str, size: int) -> None:
    """Give data-section map ``map_name`` a value of ``size`` bytes, its last variable (an
    array) resized to end there: its initial elements kept (cut when it shrinks), new ones zero.
    UsageError naming the map, the variable and why otherwise; nothing changes then."""
    from ..btf.types import Array
    from ..errors import UsageError

    what = f"resize {map_name!r} to {size} bytes"
    mspec = spec.maps.get(map_name)
    if mspec is None or mspec.data is None:
        raise UsageError(f"{what}: not a global-data section of the object (its sections: "
                         f"{', '.join(n for n, m in spec.maps.items() if m.data is not None) or 'none'})")
    if not 0 < size < 1 << 32:
        raise UsageError(f"{what}: a value size is a u32 above 0")
    in_section = [v for v in spec.variables.values() if v.section == map_name]
    if not in_section:
        raise UsageError(f"{what}: the section has no variable to resize")
    last = max(in_section, key=lambda v: v.offset)
    if last.btf is None or not last.type_id:
        raise UsageError(f"{what}: its last variable {last.name!r} has no BTF type, so it is not known to be "
                         "an array (libbpf resizes only an array)")
    array = last.btf.resolve(last.type_id)
    if not isinstance(array, Array):
        raise UsageError(f"{what}: its last variable {last.name!r} is a {last.type_name}, not an array "
                         "(libbpf's bpf_map__set_value_size resizes the section's last variable, an array; "
                         "declare it alone in its own section, SEC(\".data.NAME\"), as scx's RESIZE_ARRAY does)")
    element = last.btf.size_of(array.type)
    room = size - last.offset
    if room <= 0 or element <= 0 or room % element:
        raise UsageError(f"{what}: {last.name!r} ({last.type_name}) starts at byte {last.offset} of the section, "
                         f"so the size must be {last.offset} + a positive multiple of its element size, {element}")
    data = mspec.data[: last.offset + min(last.size, room)]
    mspec.data = data + bytes(size - len(data))
    mspec.value_size = size
    mspec.btf_key_type_id = mspec.btf_value_type_id = 0
    last.size = room
