"""Tool exception messages made safe for the sandbox: the message only, host paths removed."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from functools import lru_cache

_MAX_MESSAGE = 2000
# An absolute path with at least two components, not part of a URL ("https://h/x") or a relative path.
_ABS_PATH = re.compile(r"(?<![\w:/.~-])(?:/[\w.@+~-]+){2,}/?")


@lru_cache(maxsize=1)
def _host_prefixes() -> tuple[str, ...]:
    prefixes = {os.getcwd(), os.path.expanduser("~"), sys.prefix, sys.base_prefix, tempfile.gettempdir()}
    return tuple(sorted((p for p in prefixes if p and p != "/"), key=len, reverse=True))


def _basename(match: re.Match[str]) -> str:
    path = match.group(0).rstrip("/")
    return "<path>/" + path.rsplit("/", 1)[-1]


def safe_message(exc: BaseException) -> str:
    """The exception's message for the model: no traceback, host paths reduced to ``<path>/name``.

    Falls back to the exception's type name when it has no message; truncated to 2,000 characters.
    """
    text = str(exc).strip() or type(exc).__name__
    for prefix in _host_prefixes():
        text = text.replace(prefix + os.sep, "<path>/").replace(prefix, "<path>")
    text = _ABS_PATH.sub(_basename, text)
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    return text
