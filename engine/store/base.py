"""The session store interface: ``Store`` and its lock (the records it keeps live in ``_types.py``).

A store holds, per session: its metadata, the ordered prompt segments, the captured variables
(codec-ENCODED JSON, one entry per name) and one ``RoundRecord`` per round. ``append_round`` is the
single write a round makes and it is atomic: the round record, the round's new segments and the
session's variables land together or not at all, so a crash mid-round leaves the previous round
intact. Beside sessions a store keeps key-values (``KeyValues``, ``_kv.py``: the run-scoped API's state and
storage). Backends: ``codeact.engine.store.sqlite.SQLiteStore`` (the zero set-up default) and
``codeact.engine.store.redis_store.RedisStore``; ``codeact.engine.store.open_store`` picks one from a URL.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from codeact.engine.errors import StoreError
from codeact.engine.store._entries import TruncateReport
from codeact.engine.store._kv import KeyValues
from codeact.engine.store._lock import (
    FORCED_PREFIX,
    HEARTBEAT_S,
    LOCK_TTL_S,
    LockInfo,
    LockLostError,
    make_token,
    parse_token,
)
from codeact.engine.store._records import CorruptRecordError, RoundsRead
from codeact.engine.store._types import (
    ROUND_STATUSES,
    SESSION_STATUSES,
    RoundRecord,
    SessionBusyError,
    SessionMeta,
    SessionStatus,
    check_session_id,
    dumps,
)
from codeact.prompts.jsontypes import JsonValue
from codeact.sandbox.aio import cancel_and_wait

__all__ = [
    "ROUND_STATUSES",
    "SESSION_STATUSES",
    "LockInfo",
    "LockLostError",
    "RoundRecord",
    "SessionBusyError",
    "SessionLock",
    "SessionMeta",
    "SessionStatus",
    "Store",
    "check_session_id",
    "dumps",
]


class SessionLock(AbstractAsyncContextManager["SessionLock"]):
    """A held (or about to be acquired) session lock; created by ``Store.lock``.

    Entering acquires the lock (waiting up to ``wait`` seconds, then ``SessionBusyError``) and starts
    a heartbeat that renews it every ``beat`` seconds, so a live run keeps it while a dead holder's
    lock expires ``ttl`` seconds after its last beat. A lock whose owner is a process of this host
    that no longer runs is taken over at once (``took_over`` names it). The lock's ``token`` is the
    fencing token: pass it to ``append_round(fence=...)`` so a holder that lost the lock (frozen,
    partitioned, forced out by ``sessions unlock``) cannot record a round. Exiting releases the lock
    (only if still ours).
    """

    def __init__(self, store: Store, session_id: str, *, ttl: float, wait: float, beat: float | None = None) -> None:
        if ttl <= 0:
            raise StoreError(f"lock ttl must be positive, got {ttl!r}", code="store.invalid_argument")
        self.store = store
        self.session_id = check_session_id(session_id)
        self.ttl = ttl
        self.beat = beat if beat is not None and beat > 0 else min(HEARTBEAT_S, ttl / 3)
        self.wait = max(0.0, wait)
        self.token = make_token()
        self.took_over: LockInfo | None = None
        self._refresher: asyncio.Task[None] | None = None
        self.held = False

    async def __aenter__(self) -> SessionLock:
        deadline = time.monotonic() + self.wait
        delay = 0.02
        while True:
            held_until = await self.store._acquire_lock(self.session_id, self.token, self.ttl)
            if held_until is None:
                break
            holder = await self.store.lock_info(self.session_id)
            if holder is not None and holder.owner_dead():
                # The owner process is gone (same host): take its lock over now, not after its expiry.
                replaced = await self.store._acquire_lock(self.session_id, self.token, self.ttl, replace=holder.token)
                if replaced is None:
                    self.took_over = holder
                    break
            if time.monotonic() >= deadline:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held_until))
                owner = ""
                if holder is not None:
                    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.since))
                    owner = f" by {holder.owner} since {since}"
                raise SessionBusyError(
                    f"session {self.session_id!r} is in use by another run (lock held until {when}{owner}; its "
                    "heartbeat renews it while that run lives); wait or use another --session, or if that run is "
                    f"gone, force it with `codeact sessions unlock {self.session_id}`",
                    session_id=self.session_id,
                    held_until=held_until,
                )
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.5)
        self.held = True
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever())
        return self

    async def refresh(self) -> None:
        """Extend the lock to ``ttl`` seconds from now (re-taking it if it expired and is still free).

        Raises:
            SessionBusyError: the lock was lost: another run took it, or it was forced free.
        """
        if not await self.store._refresh_lock(self.session_id, self.token, self.ttl):
            self.held = False
            raise SessionBusyError(
                f"lost the lock on session {self.session_id!r}: it expired (no heartbeat for {self.ttl:g} s) "
                "or was forced with `codeact sessions unlock`; this run can no longer record rounds",
                session_id=self.session_id,
                held_until=time.time(),
            )

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.beat)
            try:
                await self.refresh()
            except SessionBusyError:
                return  # lost: ``held`` is now False, and the run's next append_round is fenced out
            except StoreError:
                continue  # a transient outage: keep trying; the run's own writes fail loudly meanwhile

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._refresher is not None:
            # The refresher's CancelledError is not re-raised here, but a cancellation of the current
            # task still propagates; a cancel swallowed inside a store call is repeated until it is taken.
            await cancel_and_wait(self._refresher)
            self._refresher = None
        if self.held:
            self.held = False
            if isinstance(exc, StoreError) and exc.code == "store.unavailable":
                return  # the store is down: releasing would only wait for another timeout; the lock expires
            try:
                await self.store._release_lock(self.session_id, self.token)
            except StoreError:
                if exc is None:
                    raise
                # The body already failed (often because the store went away): keep that error; the
                # lock expires on its own after ttl.


class Store(KeyValues):
    """A session store backend (async; one instance may serve many sessions concurrently).

    Besides sessions it keeps key-values (``KeyValues``: ``kv_get``, ``kv_set``, ``kv_delete``, ``kv_list``).

    Attributes:
        url: Where the data lives, with credentials removed (safe to print).
    """

    url: str

    @abstractmethod
    async def create_session(self, meta: SessionMeta) -> None:
        """Record a new session; ``StoreError`` if one with that id exists."""

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionMeta | None:
        """The session's metadata, or None when it does not exist."""

    @abstractmethod
    async def list_sessions(self, *, limit: int = 50) -> list[SessionMeta]:
        """Up to ``limit`` sessions, most recently updated first."""

    @abstractmethod
    async def update_session(self, session_id: str, **fields: Any) -> SessionMeta:
        """Change metadata fields (status, title, input, extra, model, blueprint_*); returns the new meta.

        ``updated_at`` is set to now. ``StoreError`` for an unknown session or field.
        """

    @abstractmethod
    async def append_round(
        self,
        record: RoundRecord,
        *,
        segments: Sequence[Mapping[str, object]],
        variables: Mapping[str, object],
        fence: str | None = None,
    ) -> None:
        """Atomically record a round, its new segments and the session's current variables.

        Args:
            record: The round; ``record.index`` must be the last recorded index + 1, otherwise
                ``StoreError`` (another writer got there first). Appending a round identical to the
                one recorded at that index is a no-op, so a write retried after a lost reply is safe.
            segments: The segments this round added, as JSON dicts each with an ``"id"``.
            variables: The complete codec-encoded state after the round (replaces the stored set).
            fence: The writer's lock token (``SessionLock.token``); when given, the write is refused
                with ``LockLostError`` unless that token still holds the session's lock (checked in
                the same transaction / script as the write).
        """

    async def rounds(self, session_id: str) -> list[RoundRecord]:
        """Every recorded round of the session, in order (empty for an unknown session).

        Raises:
            CorruptRecordError: A round does not decode (named by session, round and field).
        """
        read = await self.read_rounds(session_id)
        if read.problem is not None:
            raise read.problem
        return list(read.rounds)

    @abstractmethod
    async def round(self, session_id: str, index: int) -> RoundRecord | None:
        """Round ``index`` (1-based), or None."""

    @abstractmethod
    async def segments(self, session_id: str) -> list[dict[str, Any]]:
        """All segments of the session, in the order they were appended."""

    @abstractmethod
    async def variables(self, session_id: str) -> dict[str, JsonValue]:
        """The session's current codec-encoded variables by name."""

    @abstractmethod
    async def delete_session(self, session_id: str) -> None:
        """Remove the session and everything recorded for it (no error if it does not exist)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections; the store must not be used afterwards."""

    # Reading records back and repairing them (engine/store/_records.py owns the stored format).
    async def read_rounds(self, session_id: str) -> RoundsRead:
        """Every stored round decoded, the first unreadable one named instead of raised (``RoundsRead``)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement read_rounds")

    async def verify_rounds(self, session_id: str) -> None:
        """Check every stored round decodes; raise the first ``CorruptRecordError`` (backends do it linearly)."""
        read = await self.read_rounds(session_id)
        if read.problem is not None:
            raise read.problem

    async def scan_sessions(self, *, limit: int = 50) -> list[SessionMeta | CorruptRecordError]:
        """Like ``list_sessions``, with an unreadable session's metadata as its ``CorruptRecordError``."""
        return list(await self.list_sessions(limit=limit))

    async def truncate(self, session_id: str, *, after: int) -> TruncateReport:
        """Drop the rounds after round ``after`` and their segments, atomically (``codeact sessions truncate``).

        The variables are restored as of round ``after`` and unreadable metadata fields reset to defaults.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement truncate")

    async def check_session(self, session_id: str) -> None:
        """Read everything the session holds; raise the first ``CorruptRecordError`` (a resume checks this first)."""
        await self.get_session(session_id)
        await self.verify_rounds(session_id)
        await self.segments(session_id)
        await self.variables(session_id)

    def lock(
        self, session_id: str, *, ttl: float = LOCK_TTL_S, wait: float = 0.0, beat: float | None = None
    ) -> SessionLock:
        """An async context manager holding the session's run lock.

        Args:
            session_id: The session to lock.
            ttl: Seconds the lock survives without a heartbeat (a crashed holder on another host
                blocks at most this long; one on this host not at all).
            wait: Seconds to wait for another run to release it before ``SessionBusyError``.
            beat: Seconds between heartbeats (default ``min(3, ttl / 3)``).
        """
        return SessionLock(self, session_id, ttl=ttl, wait=wait, beat=beat)

    async def lock_info(self, session_id: str) -> LockInfo | None:
        """Who holds the session's lock and since when, or None when it is free (or expired)."""
        found = await self._read_lock(check_session_id(session_id))
        if found is None:
            return None
        token, expires_at = found
        if expires_at <= time.time() or token.startswith(FORCED_PREFIX):
            return None
        return parse_token(session_id, token, expires_at)

    async def force_unlock(self, session_id: str) -> LockInfo | None:
        """Drop the session's lock whoever holds it; returns the holder it had (None if it was free).

        The holder, if still alive, is fenced out: its next ``append_round(fence=...)`` fails with
        ``LockLostError``. An ``active`` session without a lock then reads as ``interrupted``.
        """
        holder = await self.lock_info(session_id)
        await self._force_unlock(check_session_id(session_id))
        await self.repair_status(session_id)
        return holder

    async def repair_status(self, session_id: str) -> SessionMeta | None:
        """Mark an ``active`` session whose run is gone (no live lock, or a dead owner) ``interrupted``.

        Atomic in the backends: a run that holds the lock is never touched. Returns the session's
        metadata after the repair (None for an unknown session).
        """
        meta = await self.get_session(session_id)
        if meta is None or meta.status != "active":
            return meta
        holder = await self.lock_info(session_id)
        if holder is not None and not holder.owner_dead():
            return meta
        if await self._mark_interrupted(session_id, holder.token if holder is not None else None):
            return await self.get_session(session_id)
        return meta

    # Pending calls: what the round in progress did so far, written as it happens (docs/store.md).
    @abstractmethod
    async def add_pending(self, session_id: str, entry: Mapping[str, object]) -> None:
        """Append one entry (``{"round", "kind": "call" | "code", ...}``) to the session's pending list."""

    async def add_pending_many(self, session_id: str, entries: Sequence[Mapping[str, object]]) -> None:
        """Append several entries in ONE write (the call journal's group commit; docs/store.md, "The call journal").

        The entries land together and in order, or none does. Backends override this; the default makes
        one ``add_pending`` per entry (correct, not atomic, slower).
        """
        for entry in entries:
            await self.add_pending(session_id, entry)

    @abstractmethod
    async def pending(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending entries, in the order they were added."""

    @abstractmethod
    async def clear_pending(self, session_id: str) -> None:
        """Drop the session's pending entries (after their round was recorded or folded)."""

    # Lock primitives the backends implement (used by SessionLock).
    @abstractmethod
    async def _acquire_lock(self, session_id: str, token: str, ttl: float, replace: str | None = None) -> float | None:
        """Take the lock if free, expired, or held by the token ``replace``.

        Returns None on success, else the holder's expiry (unix time).
        """

    @abstractmethod
    async def _read_lock(self, session_id: str) -> tuple[str, float] | None:
        """``(token, expires_at)`` of the session's lock, or None."""

    @abstractmethod
    async def _force_unlock(self, session_id: str) -> None:
        """Replace the session's lock, whoever holds it, by a forced-unlock marker (free for new runs)."""

    @abstractmethod
    async def _mark_interrupted(self, session_id: str, stale_token: str | None) -> bool:
        """Set status ``interrupted`` if ``active`` and the lock is free, expired or ``stale_token``'s.

        Atomic (one transaction / script); True when the status changed.
        """

    @abstractmethod
    async def _refresh_lock(self, session_id: str, token: str, ttl: float) -> bool:
        """Extend our lock (re-take it if it expired and is free); False if another token holds it."""

    @abstractmethod
    async def _release_lock(self, session_id: str, token: str) -> None:
        """Drop the lock if it is still ours."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _not_found(self, session_id: str) -> StoreError:
        return StoreError(f"session {session_id!r} not found in {self.url}", code="store.not_found")

    def _fenced(self, record: RoundRecord) -> LockLostError:
        return LockLostError(
            f"cannot record round {record.index} of session {record.session_id!r} in {self.url}: this run no "
            "longer holds the session's lock (no heartbeat for too long, or forced with `codeact sessions "
            "unlock`); another run may own the session now, so this round was not recorded",
            session_id=record.session_id,
        )

    def _conflict(self, record: RoundRecord, last: int) -> StoreError:
        return StoreError(
            f"cannot append round {record.index} to session {record.session_id!r} in {self.url}: the last recorded "
            f"round is {last}, expected round {last + 1}; another run is writing this session (use store.lock())",
            code="store.conflict",
        )
