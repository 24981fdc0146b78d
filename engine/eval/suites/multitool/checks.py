"""Python checkers of the ``multitool`` suite: ``checker: {type: python, function: "checks:NAME"}``."""

from __future__ import annotations


def _norm(value: object) -> str:
    return " ".join(str(value).split()).strip().strip(".").lower()


def same_text(answer: object, expected: object, task: object) -> bool:
    """The answer is the expected text, ignoring case, surrounding spaces and a final full stop."""
    return _norm(answer) == _norm(expected)
