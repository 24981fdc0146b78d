"""Errors of the eval harness."""

from __future__ import annotations

from codeact.engine.errors import CodeactError

__all__ = ["EvalError"]


class EvalError(CodeactError):
    """A suite cannot be loaded or run (the message names the file and what to fix)."""

    code = "eval.error"
