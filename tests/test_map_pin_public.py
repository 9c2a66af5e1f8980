# SPDX-License-Identifier: Apache-2.0
"""Map.pin / Map.unpin / Map.load_pinned as docs/maps.md shows them: the pin outlives the Map
object, another opening sees the same elements, missing directories under bpffs are made, and
unpin removes the file (twice is fine)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bpfkit.errors import BPFKitError
from bpfkit.maps import Map, MapSpec
from bpfkit.spec.consts import MapType

pytestmark = pytest.mark.root


@pytest.fixture
def pin_dir() -> Iterator[Path]:
    from bpfkit._kernel.bpffs import ensure_bpffs

    ensure_bpffs("/sys/fs/bpf")
    where = Path(f"/sys/fs/bpf/bpfkit-tool-pieces-{uuid.uuid4().hex[:8]}")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_pin_outlives_the_object_and_unpin_removes_it(pin_dir: Path) -> None:
    path = str(pin_dir / "sub" / "counts")  # directories made as libbpf's make_parent_dir does
    spec = MapSpec(name="tool_pin", type=MapType.HASH, key_size=4, value_size=8, max_entries=8,
                   key_format="<I", value_format="<Q")
    with Map(spec) as m:
        m[1] = 10
        m.pin(path)
        assert m.pinned_path == path and Path(path).exists()
        map_id = m.id
    with Map.load_pinned(path) as again:  # the first Map is closed: the pin kept the map
        # no BTF in this map: the reopened one gives bytes (docs/maps.md, maps without BTF)
        assert again.id == map_id and again[1] == (10).to_bytes(8, "little") and again.pinned_path == path
        again[2] = (20).to_bytes(8, "little")
        again.unpin()
        assert not Path(path).exists() and again.pinned_path is None
        again.unpin()  # nothing pinned: fine
        assert again[2] == (20).to_bytes(8, "little")  # the fd still holds the map
    with pytest.raises(BPFKitError):
        Map.load_pinned(path)


def test_pin_outside_bpffs_is_refused(tmp_path: Path) -> None:
    spec = MapSpec(name="tool_pin2", type=MapType.ARRAY, key_size=4, value_size=4, max_entries=1)
    with Map(spec) as m, pytest.raises(BPFKitError, match="bpf"):
        m.pin(str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
