"""The telemetry options shared by the on/off switch (``_state.py``) and the SDK adapter (``_sdk.py``).

A leaf of ``codeact.engine.telemetry``: it imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["CaptureOptions", "SpanHandle"]


class SpanHandle(Protocol):
    """What the ``with`` block of a model call, execution or toolkit call gets (None when tracing is off)."""

    def finish(self, result: object = None, error: Mapping[str, object] | None = None) -> None:
        """Report the outcome: the reply, the execution result, or the call's result or error."""
        ...

    def interceptor_failed(self, name: str) -> None:
        """The interceptor ``name`` raised: the call failed in it."""
        ...


@dataclass(frozen=True, kw_only=True)
class CaptureOptions:
    """What toolkit-call spans carry beyond names and status (blueprint ``extensions.telemetry.capture``).

    Attributes:
        arguments: Record the call's arguments (JSON, cut at ``max_chars``).
        results: Record the call's result (JSON, cut at ``max_chars``).
        max_chars: Longest value recorded.
    """

    arguments: bool = False
    results: bool = False
    max_chars: int = 1000
