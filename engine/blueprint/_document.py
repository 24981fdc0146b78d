"""What every blueprint document shares: its version names and the record of an unknown field.

A leaf of ``codeact.engine.blueprint`` (it imports nothing of the package): the model (``models.py``) and
the inheritance resolver (``inheritance.py``) both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AI4J_VERSION", "CODEACT_VERSION", "SUPPORTED_VERSIONS", "UnknownField"]

AI4J_VERSION = "ai4j.agent/v1"
CODEACT_VERSION = "codeact.agent/v1"
SUPPORTED_VERSIONS = (AI4J_VERSION, CODEACT_VERSION)


@dataclass(frozen=True, kw_only=True)
class UnknownField:
    """A key the blueprint does not define; ``origin`` names the base file it came from, if any."""

    path: str
    origin: str | None = None
