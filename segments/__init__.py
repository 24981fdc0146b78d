"""Typed prompt segments, the FIM prompt builders, and the reply parser."""

from __future__ import annotations

from segments.errors import CodeParseError

__all__ = ["CodeParseError"]
