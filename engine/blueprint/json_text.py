"""The JSON value a model's text answer holds, prose and code fences around it allowed.

Real models write "Here it is: ```json {...} ```"; structured output (``engine/agent/output.py``) and
the conditions of a conditional flow (``engine/blueprint/conditions.py``) read the value the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["json_in_text"]

_FENCE: Final = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def json_in_text(text: str) -> tuple[Any, str | None]:
    """The first JSON value that parses in ``text``, as ``(value, None)``; ``(None, problem)`` when none does.

    Tried in order: the whole text, each fenced block in it, its outermost ``{...}``, its outermost ``[...]``.
    """
    stripped = text.strip()
    candidates = [stripped, *(m.group(1) for m in _FENCE.finditer(stripped))]
    for opening, closing in ("{}", "[]"):
        start, end = stripped.find(opening), stripped.rfind(closing)
        if 0 <= start < end:
            candidates.append(stripped[start : end + 1])
    first_error = ""
    for candidate in candidates:
        try:
            return json.loads(candidate), None
        except ValueError as exc:
            first_error = first_error or str(exc)
    return None, f"it is not JSON ({first_error})"
