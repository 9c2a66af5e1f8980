# SPDX-License-Identifier: Apache-2.0
"""Names taken from objects, binaries and processes, made safe to show: every character that
would act instead of being seen is written as a visible escape (``\\x1b``, ``\\u202e``).

Those are: C0 controls and DEL (newline and carriage return forge lines in line-based formats
and logs; ESC starts terminal escape sequences), C1 controls (U+009B is a one-character CSI
on terminals that take 8-bit controls; U+0085 is a line break to Python's ``splitlines``),
the Unicode line and paragraph separators, the bidirectional marks, embeddings, overrides
and isolates (they reorder what a terminal or browser shows: CVE-2021-42574, "Trojan
Source"), lone surrogates (not encodable as UTF-8: protobuf strings and UTF-8 files refuse
them) and U+FFFE/U+FFFF (not characters in XML 1.0). Everything else, other scripts and
emoji included, is kept. A backslash is kept as it is: the result is for people and for
formats that have no escapes of their own, not a reversible encoding.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

_ACTING = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """``text`` with each acting character (see the module) as ``\\xNN`` or ``\\uNNNN``,
    except those in ``keep`` (``"\\n"`` for multi-line messages)."""
    if not keep:
        return _ACTING.sub(_escape, text)
    return _ACTING.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
