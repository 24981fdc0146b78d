"""The audit log of ``codeact serve``'s run-scoped API (engine/service/_run_api.py).

A leaf of the service package: the service state holds it without importing the HTTP layer. (State and
storage are kept in the session store: engine/service/_host_state.py.)
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from codeact.engine.service._log import log_event, request_id

__all__ = ["AuditLog"]


class AuditLog:
    """One JSON line per run-scoped call: who called what, for which run, and the outcome.

    Args:
        path: The file lines are appended to; None sends them to the service log (event ``api.call``).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._file: TextIO | None = None
        self._lock = threading.Lock()

    def write(self, **fields: Any) -> None:
        """Append one line (``time`` and ``request_id`` added; None values left out)."""
        line = {"time": round(time.time(), 3), "request_id": request_id.get(), **fields}
        line = {k: v for k, v in line.items() if v is not None}
        if self.path is None:
            # the log line is its event (``api.call``): the field would be log_event's first argument again
            log_event("api.call", **{k: v for k, v in line.items() if k not in ("time", "request_id", "event")})
            return
        text = json.dumps(line, ensure_ascii=False, default=str, separators=(",", ":"))
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8", buffering=1)
            self._file.write(text + "\n")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
