# SPDX-License-Identifier: Apache-2.0
"""YAML configs read safely and checked with file:line messages: the bounded loader behind
``--metrics-config`` (bpfkit's own format and ebpf_exporter's).

:func:`load_yaml` parses text with :class:`_Loader` (PyYAML's safe loader with bounds on size,
nodes with aliases expanded, depth and number length: docs/security.md) into :class:`Lined`
mappings that remember each key's line; :class:`Checker` turns a wrong value into a
:class:`bpfkit.errors.UsageError` naming the file, line and key path.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .._files import read_regular
from ..errors import UsageError

__all__ = ["Lined", "Checker", "load_yaml", "read_yaml", "kind", "shown", "CONFIG_LIMIT"]


class Lined(dict[str, Any]):
    """A YAML mapping that remembers the line of itself and of each key (1-based), and the
    text of each scalar key and value as written (``raw``: key -> (key text, value text or
    None)), which a Go program's ``map[string]string`` keeps where YAML 1.1 would make
    ``yes`` a bool and ``0x10`` a number."""

    line = 0
    key_lines: dict[str, int]
    raw: dict[str, tuple[str, str | None]]


# Bounds on a config (docs/security.md). Real configs are a few KiB, nest under 10 levels and
# have hundreds of nodes (a syscall static_map: ~450 entries). Aliases are counted as expanded:
# a 702-byte file of nine anchors, each a list of nine aliases of the one before, is 9^9 nodes.
CONFIG_LIMIT = 256 << 10
NODE_LIMIT = 20_000  # PyYAML's pure-Python loader: ~0.1 ms a node
DEPTH_LIMIT = 64
INT_DIGITS_LIMIT = 100  # int() of a 1 MiB digit string is slow (base 60 "1:2:...": quadratic)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: while composing, each node's size and depth with aliases
    expanded are added up from its children's (so a bomb is refused before anything expands),
    and a key must be a scalar. Merge keys (``<<: *base``) work as YAML 1.1 and PyYAML have them:
    the mapping's own keys win over merged ones, and earlier merged mappings over later ones."""

    def __init__(self, text: str, path: str) -> None:
        super().__init__(text)
        self.name = path  # marks and our own messages name the file
        self._depth = 0
        self._cost: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth), aliases expanded

    def _error(self, at: yaml.Node | yaml.Event, what: str) -> UsageError:
        mark = at.start_mark
        return UsageError(f"{self.name}:{mark.line + 1 if mark is not None else 0}: {what}")

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is not None and id(node) not in self._cost:
                raise self._error(event, f"alias *{event.anchor} is inside the node it names (a recursive "
                                  "structure, which a config cannot use)")
            return node
        self._depth += 1
        try:
            if self._depth > DEPTH_LIMIT:
                raise self._error(event, f"nested more than {DEPTH_LIMIT} levels deep (bpfkit's limit "
                                  "for a metrics config)")
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        nodes, depth = 1, 1
        for child in children:
            n, d = self._cost[id(child)]
            nodes += n
            depth = max(depth, d + 1)
        if nodes > NODE_LIMIT:
            raise self._error(node, f"more than {NODE_LIMIT} values once aliases are expanded (bpfkit's limit for a "
                              "metrics config)")
        if depth > DEPTH_LIMIT:
            raise self._error(node, f"nested more than {DEPTH_LIMIT} levels deep once aliases are expanded "
                              "(bpfkit's limit for a metrics config)")
        self._cost[id(node)] = (nodes, depth)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # a scalar its tag cannot take: !!float abc, !!timestamp 2001-13-45
            raise self._error(node, f"{shown(node.value)} is not a valid {node.tag.rsplit(':', 1)[-1]} ({exc})") from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > INT_DIGITS_LIMIT:
            raise self._error(node, f"a number of {len(node.value)} characters (bpfkit takes up to {INT_DIGITS_LIMIT})")
        return int(super().construct_yaml_int(node))

    def _key(self, key_node: yaml.Node) -> str:
        if not isinstance(key_node, yaml.ScalarNode):
            raise self._error(key_node, f"a key must be text or a number, not {_node_kind(key_node)}")
        return str(self.construct_object(key_node))

    def _pairs(self, node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node) of a mapping with its merge keys applied: its own keys
        win, then merged mappings in the order given (YAML 1.1's merge key)."""
        own: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
                continue
            key = self._key(key_node)
            if key in own:
                raise self._error(key_node, f"{shown(key)} given twice (first on line {own[key][0].start_mark.line + 1})")
            own[key] = (key_node, value_node)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for m in merged:
            if not isinstance(m, yaml.MappingNode):
                raise self._error(m, f"<< (a merge key) takes a mapping or a list of mappings, not {_node_kind(m)}")
            for key, pair in self._pairs(m).items():
                out.setdefault(key, pair)
        out.update(own)
        return out

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self._error(node, f"expected a mapping, got {_node_kind(node)}")
        out = Lined()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        out.raw = {}
        for key, (key_node, value_node) in self._pairs(node).items():
            out[key] = self.construct_object(value_node, deep=True)
            out.key_lines[key] = key_node.start_mark.line + 1
            out.raw[key] = (str(key_node.value), str(value_node.value) if isinstance(value_node, yaml.ScalarNode) else None)
        return out


def _node_kind(node: yaml.Node) -> str:
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping" if isinstance(node, yaml.MappingNode) else "a scalar"


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _Loader.construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
# A number with an exponent (1e-6, 2.5e3) is a float in YAML 1.2 and in Go's yaml (which
# ebpf_exporter reads its configs with), text in YAML 1.1 (PyYAML): read it as a float.
_Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
                              list("-+.0123456789"))


class Checker:
    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, line: int, where: str, what: str) -> UsageError:
        return UsageError(f"{self.path}:{line}: {where}: {what}" if where else f"{self.path}:{line}: {what}")

    def mapping(self, value: object, where: str, line: int, allowed: tuple[str, ...] | None) -> Lined:
        """``value`` as a mapping whose keys are all in ``allowed`` (None: any keys)."""
        if not isinstance(value, Lined):
            raise self.error(line, where, f"expected a mapping (key: value lines), got {kind(value)}")
        for key in value:
            if allowed is not None and key not in allowed:
                raise self.error(value.key_lines.get(str(key), value.line), where,
                                 f"unknown key {shown(key)} (known: {', '.join(allowed)})")
        return value

    def line_of(self, m: Lined, key: str) -> int:
        return m.key_lines.get(key, m.line)

    def text(self, m: Lined, key: str, where: str, *, check: Any = None, what: str = "") -> str | None:
        value = m.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected text, got {kind(value)}")
        if check is not None and not check(value):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"{shown(value)} is not {what}")
        return value

    def number(self, m: Lined, key: str, where: str, default: float, want: type) -> Any:
        value = m.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (want is int and not isinstance(value, int)):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected {'an integer' if want is int else 'a number'}, "
                             f"got {kind(value)}")
        return value

    def choice(self, m: Lined, key: str, where: str, choices: tuple[str, ...]) -> str | None:
        value = m.get(key)
        if value is None:
            return None
        if value not in choices:
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"{shown(value)} is not one of {', '.join(choices)}")
        return str(value)

    def seq(self, m: Lined, key: str, where: str) -> list[tuple[object, int]] | None:
        value = m.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(self.line_of(m, key), f"{where}.{key}", f"expected a list (- item lines), got {kind(value)}")
        return [(v, v.line if isinstance(v, Lined) else self.line_of(m, key)) for v in value]


    def fields(self, m: Lined, key: str, where: str, allowed: tuple[str, ...], what: str) -> list[tuple[str, Lined, str]] | None:
        """The list at ``key`` of mappings that each name a ``field``: (where, mapping, field)."""
        items = self.seq(m, key, where)
        if items is None:
            return None
        out = []
        for i, (item, line) in enumerate(items):
            iw = f"{where}.{key}[{i}]"
            im = self.mapping(item, iw, line, allowed)
            field = self.text(im, "field", iw)
            if field is None:
                raise self.error(im.line, iw, f"needs field: ({what})")
            out.append((iw, im, field))
        return out


def kind(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {shown(value)}"


def shown(value: object) -> str:
    """repr() of a value from the file, cut short (a 256 KiB string is no help in a message)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def load_yaml(text: str, path: str) -> Lined:
    """The mapping at the top of a YAML document (an empty one for an empty document);
    UsageError naming ``path`` and the line on any YAML mistake or bound crossed."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text, path)
        doc = loader.get_single_data()
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, other controls)
        line = text.count("\n", 0, exc.position) + 1
        raise UsageError(f"{path}:{line}: not valid YAML: character U+{exc.character:04X} is not allowed (no control "
                         "characters but tab and line breaks)") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise UsageError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if doc is None:
        doc = Lined()
        doc.line, doc.key_lines, doc.raw = 1, {}, {}
    return Checker(path).mapping(doc, "", 1, None)


def read_yaml(path: str, what: str) -> str:
    """The UTF-8 text of the regular file at ``path`` (at most :data:`CONFIG_LIMIT` bytes)."""
    data = read_regular(path, what, limit=CONFIG_LIMIT)  # NotFoundError/KernelError name the file
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
