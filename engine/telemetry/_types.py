"""The telemetry options shared by the on/off switch (``_state.py``) and the SDK adapter (``_sdk.py``).

A leaf of ``codeact.engine.telemetry``: it imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CaptureOptions"]


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
