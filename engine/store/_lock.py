"""Who holds a session's lock: owner ids in lock tokens, heartbeat timing, dead-owner detection.

A lock token is ``RANDOM|HOST|PID|SINCE``: the random part makes it unguessable (it is the fencing
token ``append_round`` checks), the rest names the owner, so ``codeact sessions list`` can say who
holds a lock and since when, and a resume on the same host can tell at once that the owner process
is gone instead of waiting for the lock to expire. Backends store the token as an opaque string.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass

from codeact.engine.errors import StoreError

__all__ = [
    "FORCED_PREFIX",
    "FORCED_TTL_S",
    "HEARTBEAT_S",
    "LOCK_TTL_S",
    "LockInfo",
    "LockLostError",
    "make_forced_marker",
    "make_token",
    "parse_token",
]

HEARTBEAT_S = 3.0
"""Seconds between two renewals of a held lock (the owner's heartbeat)."""

LOCK_TTL_S = 10.0
"""Seconds a lock survives without a heartbeat (three missed beats and a margin)."""


FORCED_PREFIX = "unlocked|"
"""Prefix of the marker ``sessions unlock`` leaves in place of a forced lock: any new run may take
the session (the marker counts as free), but the forced-out holder may not take its lock back."""

FORCED_TTL_S = 86_400.0
"""How long the marker of a forced unlock fences its old holder out (a day)."""

# How fencing works (docs/store.md): a write carrying the token of the current holder passes; a
# write whose token's lock EXPIRED while nobody else took the session re-takes it and passes (a run
# whose event loop stalled longer than the ttl lost no one's data); a write whose session is now
# held by another token, or was forced free (the marker), is refused with LockLostError.


class LockLostError(StoreError):
    """A write was refused because the writer no longer holds the session's lock (it was fenced out).

    Attributes:
        session_id: The session.
    """

    code = "store.lock_lost"

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


def make_forced_marker() -> str:
    """The marker a forced unlock stores (names who forced it)."""
    return FORCED_PREFIX + make_token().partition("|")[2]


def make_token(now: float | None = None) -> str:
    """A new lock token naming this process as the owner."""
    host = socket.gethostname().replace("|", "_") or "localhost"
    return f"{secrets.token_hex(16)}|{host}|{os.getpid()}|{time.time() if now is None else now:.3f}"


@dataclass(frozen=True, kw_only=True)
class LockInfo:
    """A session lock as the store holds it.

    Attributes:
        session_id: The locked session.
        token: The holder's token (the fencing token; never printed).
        host: The owner's host name ("" for a token of an older codeact).
        pid: The owner's process id (0 when unknown).
        since: Unix time the owner took the lock (0.0 when unknown).
        expires_at: Unix time the lock expires unless the owner renews it.
    """

    session_id: str
    token: str
    host: str
    pid: int
    since: float
    expires_at: float

    @property
    def owner(self) -> str:
        """``host:pid``, or ``unknown`` for a token without an owner."""
        return f"{self.host}:{self.pid}" if self.host else "unknown"

    def owner_dead(self) -> bool:
        """True when the owner is a process of THIS host that no longer runs (or is a zombie).

        An owner on another host is never judged dead here: its lock expires ``LOCK_TTL_S`` after
        its last heartbeat instead.
        """
        if not self.host or self.pid <= 0 or self.host != socket.gethostname().replace("|", "_"):
            return False
        if self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii", errors="replace") as stat:
                state = stat.read().rpartition(")")[2].split()
        except OSError:
            return False
        return bool(state) and state[0] in ("Z", "X")

    def to_json(self) -> dict[str, str | int | float | None]:
        """``{"owner", "host", "pid", "since", "expires_at"}`` (no token)."""
        return {
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "since": self.since,
            "expires_at": self.expires_at,
        }


def parse_token(session_id: str, token: str, expires_at: float) -> LockInfo:
    """The ``LockInfo`` of a stored token (tokens without an owner part give ``host=""``)."""
    parts = token.split("|")
    host, pid, since = "", 0, 0.0
    if len(parts) == 4:
        host = parts[1]
        try:
            pid, since = int(parts[2]), float(parts[3])
        except ValueError:
            host, pid, since = "", 0, 0.0
    return LockInfo(session_id=session_id, token=token, host=host, pid=pid, since=since, expires_at=expires_at)
