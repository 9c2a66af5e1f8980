# SPDX-License-Identifier: Apache-2.0
"""``bpfkit.attach``: the name :mod:`bpfkit.link.attach`, the one attach path, had before it
moved beside the link kinds whose records it reads. Every name of it is here (the public ones
re-exported, the rest looked up there); ``Collection.attach_all``, skeletons and ``bpfkit
attach`` call the attach functions through this module, as they always did."""

from __future__ import annotations

from typing import Any

from .link import attach as _attach
from .link.attach import (
    NETWORK_KINDS as NETWORK_KINDS,
)
from .link.attach import (
    AttachedLinks as AttachedLinks,
)
from .link.attach import (
    AttachOptions as AttachOptions,
)
from .link.attach import (
    SectionTarget as SectionTarget,
)
from .link.attach import (
    attach_all as attach_all,
)
from .link.attach import (
    attach_network as attach_network,
)
from .link.attach import (
    attach_probe as attach_probe,
)
from .link.attach import (
    attach_section as attach_section,
)
from .link.attach import (
    auto_attach as auto_attach,
)
from .link.attach import (
    parse_section as parse_section,
)
from .link.attach import (
    skip_reason as skip_reason,
)

__all__ = _attach.__all__


def __getattr__(name: str) -> Any:
    return getattr(_attach, name)
