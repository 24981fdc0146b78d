"""The records one sandbox round produces: ``ExecutionResult`` and its parts.

Everything here is plain data built on the HOST from the runtime's JSON result frame (nothing
from the sandbox is unpickled or unmarshalled). Variables stay in their codec-ENCODED JSON form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from codeact.sandbox.artifacts import Artifact
from codeact.sandbox.runtime.protocol import JsonObject

__all__ = ["ExecutionError", "ExecutionResult", "ExecutionStatus", "Uncaptured", "truncate_output"]

ExecutionStatus = Literal["ok", "error", "deadline_exceeded", "crashed"]
"""``ok``: ran without raising; ``error``: the code raised (or did not compile);
``deadline_exceeded``: the wall-clock deadline killed the runtime; ``crashed``: the runtime died."""


@dataclass(frozen=True, kw_only=True)
class ExecutionError:
    """An exception raised by the code (or a compile error, or the sandbox's own failure).

    Attributes:
        type: The exception class name (``"ZeroDivisionError"``, ``"DeadlineExceeded"``, ...).
        message: ``str(exception)``.
        line: The line in the program the sandbox was given, or None when unknown.
        traceback: The traceback trimmed to the user's frames (no runtime/host frames or paths).
    """

    type: str
    message: str
    line: int | None = None
    traceback: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"type", "message", "line", "traceback"}``."""
        return {"type": self.type, "message": self.message, "line": self.line, "traceback": self.traceback}

    @classmethod
    def from_json(cls, data: object) -> ExecutionError:
        """Build from an (untrusted) JSON object; wrong-typed members become safe defaults."""
        if not isinstance(data, dict):
            return cls(type="RuntimeError", message=f"malformed error object from the sandbox: {str(data)[:200]}")
        line = data.get("line")
        return cls(
            type=_str(data.get("type"), "Exception")[:200],
            message=_str(data.get("message"), "")[:_MAX_MESSAGE],
            line=line if isinstance(line, int) and not isinstance(line, bool) else None,
            traceback=_str(data.get("traceback"), "")[:_MAX_MESSAGE],
        )


@dataclass(frozen=True, kw_only=True)
class Uncaptured:
    """A variable the codec could not carry to the next round (reported, never pickled).

    Attributes:
        name: The variable name.
        type: Its type name.
        reason: Why it was not captured (unsupported type, size cap, ...).
        live: The value is still in the sandbox's namespace: the next round of the same run has it
            (a resume or a fresh sandbox does not).
    """

    name: str
    type: str
    reason: str
    live: bool = False

    def to_json(self) -> JsonObject:
        """``{"name", "type", "reason"}``, plus ``"live": true`` for a value still in the warm sandbox."""
        out: JsonObject = {"name": self.name, "type": self.type, "reason": self.reason}
        if self.live:
            out["live"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class ExecutionResult:
    """The outcome of one round in a sandbox.

    Attributes:
        stdout: Printed output, head+tail truncated at ``Limits.output_bytes`` with a marker.
        stderr: Same for standard error.
        error: What the code raised, or None.
        variables: The full restorable state after the round (restored + new), codec-ENCODED.
        uncaptured: Variables that could not be captured, with reasons.
        rpc_count: Toolkit calls the round made (counted on the host).
        duration_s: Wall time of the round as seen by the host.
        backend: ``"subprocess"`` or ``"docker"``.
        isolation: The isolation actually in force, e.g. ``"bwrap+rlimits+restricted"``.
        status: ``ok``, ``error``, ``deadline_exceeded`` or ``crashed``.
        control: The ``$control`` object of a control signal (``{"kind": "finish", ...}``), or None.
        nondeterminism: What the code read from the clock and the system's randomness, for replay:
            ``{"seed": <the round's random seed>, "reads": [[kind, value], ...]}`` (``seed`` when the
            round imported ``random``; plus ``diverged``, ``unread``, ``truncated`` when a replay did
            not follow the record). None when there was nothing to record, or the runtime did not run
            the code (compile error, deadline, crash).
        artifacts: Files the round wrote into ``outputs/`` (kept, or refused with a reason).
    """

    stdout: str = ""
    stderr: str = ""
    error: ExecutionError | None = None
    variables: JsonObject = field(default_factory=dict)
    uncaptured: tuple[Uncaptured, ...] = ()
    rpc_count: int = 0
    duration_s: float = 0.0
    backend: Literal["subprocess", "docker"]
    isolation: str
    status: ExecutionStatus = "ok"
    control: JsonObject | None = None
    nondeterminism: JsonObject | None = None
    artifacts: tuple[Artifact, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the code ran to the end without raising (a control signal counts as ok)."""
        return self.status == "ok"

    def to_json(self) -> dict[str, object]:
        """The ``codeact exec --json`` object."""
        return {
            "ok": self.ok,
            "status": self.status,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "error": None if self.error is None else self.error.to_json(),
            "variables": self.variables,
            "uncaptured": [u.to_json() for u in self.uncaptured],
            "rpc_count": self.rpc_count,
            "duration_s": self.duration_s,
            "backend": self.backend,
            "isolation": self.isolation,
            "control": self.control,
            "artifacts": [a.to_json() for a in self.artifacts],
            "nondeterminism": self.nondeterminism,
        }


_MAX_MESSAGE = 16 * 1024


def _str(value: object, default: str) -> str:
    return value if isinstance(value, str) else default


def truncate_output(text: str, limit: int, *, slack: int = 0) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` UTF-8 bytes, marking the cut.

    Args:
        text: The full output.
        limit: The byte budget (``Limits.output_bytes``).
        slack: Bytes over ``limit`` let through uncut (the runtime's own cut marker, already in ``text``).

    Returns:
        ``text`` unchanged when it fits, else the head, a ``... [N bytes cut: <the limit, its key>] ...`` line,
        and the tail.
    """
    data = text.encode("utf-8", "replace")
    if len(data) <= limit + slack:
        return text
    half = max(limit // 2, 0)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half :].decode("utf-8", "ignore") if half else ""
    cut = len(data) - len(head.encode()) - len(tail.encode())
    note = f": output is capped at {limit} bytes per stream and round, raise sandbox.limits.outputBytes"
    return f"{head}\n... [{cut} bytes cut{note}] ...\n{tail}"
