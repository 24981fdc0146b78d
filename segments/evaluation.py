"""Write a round's execution result as the content of an Evaluation segment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import prompts
from segments._text import normalize_newlines, one_line
from segments.fim import CodeFrame

__all__ = ["format_evaluation"]


def _clip(text: str, limit: int) -> str:
    text = normalize_newlines(text).rstrip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


def format_evaluation(
    *,
    stdout: str = "",
    stderr: str = "",
    error: Mapping[str, Any] | None = None,
    frame: CodeFrame | None = None,
    middle: str | None = None,
    changed: Sequence[str] = (),
    uncaptured: Sequence[str] = (),
    max_chars: int = 4000,
) -> str:
    """The Evaluation text for one round.

    Args:
        stdout: What the code printed.
        stderr: What it wrote to stderr.
        error: The sandbox's error record (``type``, ``message``, ``line``); ``line`` is a program line
            and is mapped back to the model's middle through ``frame`` (and ``middle``, whose line is quoted).
        frame: The round's frame.
        middle: The code the model wrote (the middle).
        changed: Names of variables the round assigned.
        uncaptured: Variables that could not be kept: each a name, or ``"name: why and what to do"``.
        max_chars: Longest stdout/stderr kept (the middle of longer output is cut).
    """
    line: int | None = None
    source = ""
    if error is not None and isinstance(error.get("line"), int):
        line = frame.map_line(error["line"], middle) if frame is not None else error["line"]
        if line is not None and middle is not None:
            lines = normalize_newlines(middle).split("\n")
            source = one_line(lines[line - 1].strip(), 160) if 0 < line <= len(lines) else ""
    err = None
    if error is not None:
        err = {
            "type": one_line(str(error.get("type", "Error")), 80),
            "message": one_line(str(error.get("message", "")), 500),
        }
    return prompts.render(
        "evaluation.j2",
        error=err,
        line=line,
        source=source,
        stdout=_clip(stdout, max_chars),
        stderr=_clip(stderr, max_chars // 2),
        changed=list(changed),
        uncaptured=[one_line(str(item), 400) for item in uncaptured],
    ).strip()
