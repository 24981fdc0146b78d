"""OpenAI's JSON as attribute objects: the one shape the client reads a reply or a stream chunk in.

litellm hands the client pydantic objects (``response.choices[0].message.content``); the calls that
need no litellm (the scripted provider, an OpenAI-compatible server over httpx) get JSON. Turning that
JSON into plain attribute objects lets one reader (``ModelClient._reply``, ``_absorb``) serve both.
A leaf module: it imports nothing of the product.
"""

from __future__ import annotations

from types import SimpleNamespace

__all__ = ["as_object"]


def as_object(value: object) -> object:
    """``value`` with every JSON object turned into an attribute object (lists kept as lists)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): as_object(v) for k, v in value.items()})
    if isinstance(value, list):
        return [as_object(v) for v in value]
    return value
