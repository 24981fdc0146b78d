"""Which toolkits and operations a session may call."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Literal

from codeact.toolkits.bound import BoundToolkit, bind_toolkit
from codeact.toolkits.errors import DuplicateToolkitError, ToolkitNotFoundError

Grants = Mapping[str, Iterable[str] | Literal["*"]]
"""``{toolkit: "*" | [operation, ...]}``; ``None`` where accepted means every operation of every toolkit given."""


def normalize_grants(toolkits: Mapping[str, BoundToolkit], grants: Grants | None) -> dict[str, frozenset[str]]:
    """``{toolkit: frozenset(operations)}``, checked against ``toolkits``.

    Raises:
        ToolkitNotFoundError: a grant names a toolkit or operation that does not exist.
    """
    if grants is None:
        return {name: frozenset(tk.operations) for name, tk in toolkits.items()}
    out: dict[str, frozenset[str]] = {}
    for name, ops in grants.items():
        bound = toolkits.get(name)
        if bound is None:
            close = difflib.get_close_matches(name, list(toolkits), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"available: {', '.join(toolkits) or '(none)'}"
            raise ToolkitNotFoundError(f"grant names toolkit {name!r}, which is not available; {hint}")
        if ops == "*":
            out[name] = frozenset(bound.operations)
            continue
        if isinstance(ops, str):
            ops = [ops]
        chosen = frozenset(ops)
        unknown = sorted(chosen - set(bound.operations))
        if unknown:
            raise ToolkitNotFoundError(
                f"grant names operation(s) {', '.join(map(repr, unknown))} of toolkit {name!r}, which it does "
                f"not have; it has: {', '.join(bound.operations)}"
            )
        out[name] = chosen
    return out


def as_toolkit_map(toolkits: Iterable[object]) -> dict[str, BoundToolkit]:
    """Bind each toolkit (a ``ToolkitRegistry`` iterates its bound toolkits) and key them by name."""
    out: dict[str, BoundToolkit] = {}
    for item in toolkits:
        bound = bind_toolkit(item)
        if bound.name in out and out[bound.name].target is not bound.target:
            raise DuplicateToolkitError(
                f"toolkit name {bound.name!r} is given twice ({out[bound.name].source} and {bound.source}); "
                "rename one (@toolkit(name=...))"
            )
        out[bound.name] = bound
    return out
