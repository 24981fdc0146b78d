"""Pieces the agent loop wires together: variable views and model access for toolkits.

A toolkit call's pipeline is not here: ``codeact.engine.calls`` composes it around the bridge; the names
re-exported below are kept for the code that imports them from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from codeact.engine.agent.hooks import ModelCall
from codeact.engine.calls import APPROVAL_REQUEST_ID, CallJournalSink, grant_policy
from codeact.sandbox.runtime.codec import python_repr
from codeact.toolkits import Approver

__all__ = [
    "APPROVAL_REQUEST_ID",
    "Approver",
    "CallJournalSink",
    "ModelAccessAdapter",
    "describe_variables",
    "grant_policy",
]


def _type_name(value: object) -> str:
    if isinstance(value, dict):
        tag = value.get("$type")
        if isinstance(tag, str):
            cls = value.get("class")
            if tag == "source":
                return str(value.get("kind", "function"))
            return str(cls) if isinstance(cls, str) else tag
        return "dict"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "NoneType"
    return type(value).__name__


def describe_variables(variables: Mapping[str, object], *, limit: int = 80) -> dict[str, tuple[str, str]]:
    """``name -> (type, short repr)`` of codec-encoded variables, for the FIM frame header.

    Nothing is decoded into live objects: the repr is the text Python's ``repr`` shows for the value
    (``codec.python_repr``: ``('A', 4)``, ``datetime.date(2026, 1, 2)``, ``{'ok': True}``), as the header
    is Python the model reads and copies from (JSON's ``true`` and ``null`` are not Python); functions
    and classes show their first source line.
    """
    out: dict[str, tuple[str, str]] = {}
    for name, value in variables.items():
        type_name = _type_name(value)
        if isinstance(value, dict) and value.get("$type") == "source":
            text = str(value.get("v", "")).strip().splitlines()[0] if value.get("v") else ""
        else:
            text = python_repr(value, limit=limit + 1)
        if len(text) > limit:
            text = text[: limit - 3] + "..."
        out[name] = (type_name, text)
    return out


class _Reply(Protocol):
    """What a model call returns, as far as toolkits read it."""

    @property
    def text(self) -> object:
        """The reply's text."""
        ...


class ModelAccessAdapter:
    """``toolkits.ModelAccess`` over the agent's model client (for system.think / system.parse)."""

    def __init__(self, call: Callable[[ModelCall], Awaitable[_Reply]]) -> None:
        self._call = call

    async def complete(self, prompt: str, *, purpose: str = "utility") -> str:
        """The model's reply text to ``prompt`` on the ``purpose`` route."""
        reply = await self._call(ModelCall(purpose=purpose, messages=({"role": "user", "content": prompt},)))
        return str(reply.text)
