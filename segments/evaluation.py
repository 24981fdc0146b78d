"""Write a round's execution result as the content of an Evaluation segment.

The error is said once: the frame's handler prints ``Error: ValueError('...')`` before re-raising (so
code that prints its own progress shows where it stopped), and that printed line is left out of the
Output the Evaluation quotes, since the ``Failed with ...`` line already says it, with the model's line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from codeact import prompts
from codeact.segments._text import normalize_newlines, one_line
from codeact.segments.fim import CodeFrame

__all__ = ["format_evaluation", "without_frame_error"]


def _clip(text: str, limit: int) -> str:
    text = normalize_newlines(text).rstrip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


def without_frame_error(stdout: str, error: Mapping[str, object]) -> str:
    """``stdout`` without the frame handler's ``Error: Type(...)`` line for ``error`` (its last such line)."""
    name = str(error.get("type", "")).rsplit(".", 1)[-1]
    if not name:
        return stdout
    printed = re.compile(rf"^Error: {re.escape(name)}\(.*\)$")
    lines = normalize_newlines(stdout).split("\n")
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].strip():
            if printed.match(lines[index]):
                del lines[index]
                return "\n".join(lines)
            break
    return stdout


def format_evaluation(
    *,
    stdout: str = "",
    stderr: str = "",
    error: Mapping[str, Any] | None = None,
    frame: CodeFrame | None = None,
    middle: str | None = None,
    changed: Sequence[str] = (),
    uncaptured: Sequence[str] = (),
    notes: Sequence[str] = (),
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
        notes: What the parser chose or repaired (several blocks joined, an earlier attempt skipped).
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
        stdout = without_frame_error(stdout, error)
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
        notes=[one_line(note.rstrip("."), 300) for note in notes],
    ).strip()
