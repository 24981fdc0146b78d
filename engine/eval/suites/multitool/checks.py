"""Python checkers of the ``multitool`` suite: ``checker: {type: python, function: "checks:NAME"}``."""

from __future__ import annotations

from typing import Any


def _norm(value: Any) -> str:
    return " ".join(str(value).split()).strip().strip(".").lower()


def same_text(answer: Any, expected: Any, task: Any) -> bool:
    """The answer is the expected text, ignoring case, surrounding spaces and a final full stop."""
    return _norm(answer) == _norm(expected)
