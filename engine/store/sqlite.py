"""The embedded default store: one SQLite file (stdlib ``sqlite3``, WAL mode, JSON columns).

One connection per store, guarded by a thread lock; each operation runs in the store's own worker
thread so a slow disk or a WAL checkpoint never stalls the event loop that other sessions share.
One thread, not a pool: operations run in the order they were submitted, so an operation whose
caller was cancelled while it ran still lands before the next one (a pending call cancelled mid-write
cannot land after the ``clear_pending`` that follows it), and one cancelled before it started never runs. Measured
(bench/bench_store.py): ~1.5 ms per 10 KB round written and read back, against ~0.8 ms inline,
whose p95 however reached ~5 ms of blocked event loop.
The call journal's writes (``add_pending_many``: a few small rows, awaited by a toolkit call) are the
exception: made on the event loop's thread when the worker is idle, with no wait for another process's
write lock (docs/store.md, "The call journal").
Several processes may share the file: writes use ``BEGIN IMMEDIATE`` and a busy timeout, and the
session lock is a row in the ``locks`` table.
Every operation is bounded (docs/store.md, "Bounded waits"): another process's write lock is
waited for at most ``busy_timeout`` seconds, and a call that does not return within
``op_timeout`` seconds (a hung disk or file system) fails with ``store.unavailable``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

from codeact.engine.errors import StoreError
from codeact.engine.store import _entries as _ent
from codeact.engine.store import _records as _rec
from codeact.engine.store._kv import (
    KeyPage,
    check_key,
    check_limit,
    check_namespace,
    check_prefix,
    check_value,
    page_of,
)
from codeact.engine.store._lock import FORCED_PREFIX, FORCED_TTL_S, LOCK_TTL_S, make_forced_marker
from codeact.engine.store._sqlite_rows import (
    _META_COLUMNS,
    _SCHEMA,
    _SELECT_META,
    _meta_from_row,
    _meta_or_problem,
    _path_from_url,
    _rounds_count,
    _text,
)
from codeact.engine.store._types import dumps_entry
from codeact.engine.store.base import RoundRecord, SessionMeta, Store, check_session_id, dumps
from codeact.prompts.jsontypes import JsonValue
from codeact.sandbox.aio import wait_for

__all__ = ["SQLiteStore"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
_INLINE_ROWS = 8  # journal writes of up to this many rows may be made on the event loop's thread (see _add_inline)


class SQLiteStore(Store):
    """The default store: a local SQLite file.

    Args:
        path: The database file (created with mode 0600, parent directories created), or ``:memory:``.
        busy_timeout: Seconds to wait for another process's write transaction.
        op_timeout: Seconds after which any one operation fails with ``store.unavailable`` (default
            ``busy_timeout + 5``).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0, op_timeout: float | None = None
    ) -> None:
        raw = os.fspath(path)
        memory = raw == ":memory:"
        resolved = raw if memory else str(Path(raw).expanduser().resolve())
        self.path = resolved
        self.url = "sqlite:///:memory:" if memory else f"sqlite:///{resolved}"
        self._lock = threading.Lock()
        self._closed = False
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="codeact-sqlite")
        self.op_timeout = op_timeout if op_timeout is not None else busy_timeout + 5.0
        self._busy_timeout = busy_timeout
        self._tails = _rec.TailCache()
        with self._errors("open"):
            if not memory:
                self._prepare_file(Path(resolved))
            self._conn = sqlite3.connect(resolved, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA)
            except BaseException:
                self._conn.close()
                raise

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """Open ``sqlite:///PATH`` (or a bare file path)."""
        return cls(_path_from_url(url))

    @staticmethod
    def _prepare_file(path: Path) -> None:
        # Sessions hold prompts, replies and variables: keep them private to the user.
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"SQLite store at {self.url} failed to {action}: {exc}; check the file, its permissions and free "
                "disk space, or point CODEACT_STORE / --store elsewhere",
                code="store.sqlite",
            ) from exc

    async def _run(self, action: str, fn: Callable[[*_Ts], _T], *args: *_Ts) -> _T:
        if self._closed:
            raise StoreError(f"store {self.url} is closed", code="store.closed")

        def locked() -> _T:
            with self._lock, self._errors(action):
                return fn(*args)

        done = asyncio.get_running_loop().run_in_executor(self._worker, locked)
        try:
            return await wait_for(done, self.op_timeout)
        except TimeoutError:
            if done.done() and not done.cancelled():
                # The operation ended in time; the timer fired late because the event loop itself was
                # held up (a blocking call elsewhere in the process), not the disk.
                return done.result()
            raise StoreError(
                f"SQLite store at {self.url} did not {action} within {self.op_timeout:g} s (a hung disk or file "
                "system?); a write in flight may still complete; check the file system, or point CODEACT_STORE / "
                "--store elsewhere",
                code="store.unavailable",
            ) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite may already have rolled back (disk full, I/O error)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- sessions -------------------------------------------------------------------------------

    async def create_session(self, meta: SessionMeta) -> None:
        """Record a new session; ``StoreError`` if one with that id exists."""
        check_session_id(meta.session_id)
        row = (
            meta.session_id,
            meta.blueprint_id,
            meta.blueprint_hash,
            meta.model,
            meta.created_at,
            meta.updated_at,
            meta.status,
            meta.rounds,
            meta.title,
            meta.input,
            dumps(meta.extra, what=f"the extra data of session {meta.session_id!r}"),
        )

        def create() -> None:
            with self._transaction() as conn:
                if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (meta.session_id,)).fetchone():
                    raise StoreError(
                        f"session {meta.session_id!r} already exists in {self.url}; resume it or choose another id",
                        code="store.exists",
                    )
                conn.execute(f"INSERT INTO sessions ({', '.join(_META_COLUMNS)}) VALUES ({', '.join('?' * 11)})", row)

        await self._run("create a session", create)

    def _get(self, session_id: str) -> SessionMeta | None:
        row = self._conn.execute(f"{_SELECT_META} WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else _meta_from_row(row)

    async def get_session(self, session_id: str) -> SessionMeta | None:
        """The session's metadata, or None when it does not exist."""
        return await self._run("read a session", self._get, check_session_id(session_id))

    async def list_sessions(self, *, limit: int = 50) -> list[SessionMeta]:
        """Up to ``limit`` sessions, most recently updated first (unreadable ones left out: see ``scan_sessions``)."""
        return [meta for meta in await self.scan_sessions(limit=limit) if isinstance(meta, SessionMeta)]

    async def scan_sessions(self, *, limit: int = 50) -> list[SessionMeta | _rec.CorruptRecordError]:
        """Up to ``limit`` sessions, most recently updated first; an unreadable one as its error."""

        def list_() -> list[SessionMeta | _rec.CorruptRecordError]:
            rows = self._conn.execute(
                f"{_SELECT_META} ORDER BY updated_at DESC, session_id LIMIT ?", (max(0, limit),)
            ).fetchall()
            return [_meta_or_problem(row) for row in rows]

        return await self._run("list sessions", list_)

    async def update_session(self, session_id: str, **fields: Any) -> SessionMeta:
        """Change metadata fields; returns the new meta (see ``Store.update_session``)."""
        check_session_id(session_id)

        def update() -> SessionMeta:
            with self._transaction() as conn:
                current = self._get(session_id)
                if current is None:
                    raise self._not_found(session_id)
                new = current.with_updates(**fields)
                changed = {name: getattr(new, name) for name in (*fields, "updated_at")}
                if "extra" in changed:
                    changed["extra"] = dumps(new.extra, what=f"the extra data of session {session_id!r}")
                assignments = ", ".join(f"{name} = ?" for name in changed)
                conn.execute(f"UPDATE sessions SET {assignments} WHERE session_id = ?", (*changed.values(), session_id))
                return new

        return await self._run("update a session", update)

    async def delete_session(self, session_id: str) -> None:
        """Remove the session and everything recorded for it."""
        check_session_id(session_id)

        def delete() -> None:
            with self._transaction() as conn:
                for table in ("sessions", "rounds", "segments", "variables", "pending"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))

        self._tails.drop(session_id)
        await self._run("delete a session", delete)

    # ---- rounds ---------------------------------------------------------------------------------

    async def append_round(
        self,
        record: RoundRecord,
        *,
        segments: Sequence[Mapping[str, object]],
        variables: Mapping[str, object],
        fence: str | None = None,
    ) -> None:
        """Atomically record a round, its new segments and the session's current variables."""
        session_id = check_session_id(record.session_id)
        now = time.time()

        def segment_rows(start: int) -> Iterator[tuple[object, ...]]:
            for offset, segment in enumerate(segments, start=1):
                segment_id = segment.get("id")
                if not isinstance(segment_id, str) or not segment_id:
                    raise StoreError(
                        f"cannot store segment {offset} of round {record.index} of session {session_id!r}: "
                        "it has no string 'id'",
                        code="store.invalid_segment",
                    )
                body = dumps(dict(segment), what=f"segment {segment_id!r} of session {session_id!r}")
                yield session_id, start + offset, segment_id, body

        def append() -> _rec.Tail:
            # Every part is serialized INSIDE the transaction, so a part that fails to serialize rolls
            # back the parts written before it.
            with self._transaction() as conn:
                if fence is not None:
                    self._check_fence(conn, record, fence)
                row = conn.execute("SELECT rounds FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
                if row is None:
                    raise self._not_found(session_id)
                last = _rounds_count(row[0])
                (last_pos,) = conn.execute(
                    "SELECT COALESCE(MAX(pos), 0) FROM segments WHERE session_id = ?", (session_id,)
                ).fetchone()
                before = self._tail_before(session_id, record.index)
                # A retried round counts the segments as they stood before it, not as they stand now.
                base = last_pos if record.index == last + 1 or before.table_segments is None else before.table_segments
                body, tail, _set, _deleted = _rec.encode_round(record, before, table_segments=base + len(segments))
                if record.index != last + 1:
                    stored = conn.execute(
                        "SELECT record FROM rounds WHERE session_id = ? AND idx = ?", (session_id, record.index)
                    ).fetchone()
                    if stored is not None and stored[0] == body:
                        return tail  # the same round again (a retried write): already recorded
                    raise self._conflict(record, last)
                conn.execute(
                    "INSERT INTO rounds (session_id, idx, record) VALUES (?, ?, ?)", (session_id, record.index, body)
                )
                conn.executemany(
                    "INSERT INTO segments (session_id, pos, segment_id, body) VALUES (?, ?, ?, ?)",
                    segment_rows(last_pos),
                )
                assert tail.texts is not None  # noqa: S101 - encode_round sets them
                texts = tail.texts if variables == record.variables else None
                conn.execute("DELETE FROM variables WHERE session_id = ?", (session_id,))
                conn.executemany(
                    "INSERT INTO variables (session_id, name, value) VALUES (?, ?, ?)",
                    ((session_id, name, _text(texts, session_id, name, value)) for name, value in variables.items()),
                )
                conn.execute(
                    "UPDATE sessions SET rounds = ?, updated_at = ? WHERE session_id = ?",
                    (record.index, now, session_id),
                )
                return tail

        try:
            tail = await self._run("record a round", append)
        except StoreError:
            self._tails.drop(session_id)
            raise
        before = self._tails.get(session_id, record.index - 1) or _rec.Tail()
        self._tails.put(session_id, before, tail)

    def _tail_before(self, session_id: str, index: int) -> _rec.Tail:
        """The state after round ``index - 1`` (cached and verified, else decoded); called under the lock."""
        if index <= 1:
            return _rec.Tail()
        cached = self._tails.get(session_id, index - 1)
        if cached is not None:
            row = self._conn.execute(
                "SELECT record FROM rounds WHERE session_id = ? AND idx = ?", (session_id, index - 1)
            ).fetchone()
            if row is not None and _rec.body_digest(row[0]) == cached.digest:
                return cached
        tail, problem = _rec.decode_tail(session_id, self._raw_rounds(session_id, upto=index - 1))
        if problem is not None:
            raise problem
        self._tails.put(session_id, _rec.Tail(), tail)
        return tail

    def _raw_rounds(self, session_id: str, *, upto: int | None = None, since: int = 1) -> list[tuple[int, str]]:
        rows = self._conn.execute(
            "SELECT idx, record FROM rounds WHERE session_id = ? AND idx >= ? AND idx <= ? ORDER BY idx",
            (session_id, since, upto if upto is not None else 2**62),
        ).fetchall()
        return [(int(idx), str(body)) for idx, body in rows]

    async def read_rounds(self, session_id: str) -> _rec.RoundsRead:
        """Every stored round decoded; the first unreadable one named (see ``Store.read_rounds``)."""
        check_session_id(session_id)
        raw = await self._run("read rounds", self._raw_rounds, session_id)
        return _rec.decode_rounds(session_id, raw)

    async def verify_rounds(self, session_id: str) -> None:
        """Check every stored round decodes (linear); raise the first ``CorruptRecordError``. Primes the write cache."""
        check_session_id(session_id)
        tail = _rec.verified_tail(session_id, await self._run("read rounds", self._raw_rounds, session_id))
        self._tails.put(session_id, _rec.Tail(), tail)

    async def round(self, session_id: str, index: int) -> RoundRecord | None:
        """Round ``index`` (1-based), or None; ``CorruptRecordError`` when it (or one before it) is unreadable."""
        check_session_id(session_id)
        if index < 1:
            return None

        def read() -> _rec.RoundsRead:
            cached = self._tails.get(session_id, index - 1)
            if cached is not None:
                bodies = dict(self._raw_rounds(session_id, since=index - 1, upto=index))
                read = _rec.read_after_tail(session_id, index, cached, bodies)
                if read is not None:
                    return read
            return _rec.decode_rounds(session_id, self._raw_rounds(session_id, upto=index))

        decoded = await self._run("read a round", read)
        return _rec.pick_round(decoded, index)

    async def segments(self, session_id: str) -> list[dict[str, Any]]:
        """All segments of the session, in order; ``CorruptRecordError`` naming an unreadable one."""
        check_session_id(session_id)

        def read() -> list[tuple[int, str]]:
            rows = self._conn.execute(
                "SELECT pos, body FROM segments WHERE session_id = ? ORDER BY pos", (session_id,)
            ).fetchall()
            return [(int(pos), str(body)) for pos, body in rows]

        rows = await self._run("read segments", read)
        return await _ent.decode_segments(self, session_id, rows)

    async def variables(self, session_id: str) -> dict[str, JsonValue]:
        """The session's current codec-encoded variables by name; ``CorruptRecordError`` naming an unreadable one."""
        check_session_id(session_id)

        def read() -> tuple[list[tuple[str, str]], object]:
            rows = self._conn.execute(
                "SELECT name, value FROM variables WHERE session_id = ? ORDER BY name", (session_id,)
            ).fetchall()
            count = self._conn.execute("SELECT rounds FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
            return rows, count[0] if count else None

        rows, count = await self._run("read variables", read)
        rounds = count if isinstance(count, int) else None
        return {name: _ent.decode_variable(session_id, name, value, rounds=rounds) for name, value in rows}

    async def truncate(self, session_id: str, *, after: int) -> _ent.TruncateReport:
        """Keep rounds 1..``after`` (see ``Store.truncate``)."""
        check_session_id(session_id)
        if after < 0:
            raise StoreError(f"--after must be 0 or more, got {after}", code="store.invalid_argument")

        def truncate() -> _ent.TruncateReport:
            with self._transaction() as conn:
                row = conn.execute(f"{_SELECT_META} WHERE session_id = ?", (session_id,)).fetchone()
                if row is None:
                    raise self._not_found(session_id)
                read = _rec.decode_rounds(session_id, self._raw_rounds(session_id, upto=after))
                ids = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT segment_id FROM segments WHERE session_id = ? ORDER BY pos", (session_id,)
                    ).fetchall()
                ]
                keep = _ent.segments_after(read, after, ids)
                state = read.rounds[after - 1].variables if after else {}
                (total_rounds,) = conn.execute(
                    "SELECT COUNT(*) FROM rounds WHERE session_id = ?", (session_id,)
                ).fetchone()
                conn.execute("DELETE FROM rounds WHERE session_id = ? AND idx > ?", (session_id, after))
                conn.execute("DELETE FROM segments WHERE session_id = ? AND pos > ?", (session_id, keep))
                conn.execute("DELETE FROM variables WHERE session_id = ?", (session_id,))
                conn.executemany(
                    "INSERT INTO variables (session_id, name, value) VALUES (?, ?, ?)",
                    ((session_id, name, dumps(value, what=f"variable {name!r}")) for name, value in state.items()),
                )
                meta, repaired = _ent.repair_meta(
                    session_id, dict(zip(_META_COLUMNS, row, strict=True)), rounds=after, now=time.time()
                )
                assignments = ", ".join(f"{name} = ?" for name in _META_COLUMNS[1:])
                values = [getattr(meta, name) for name in _META_COLUMNS[1:]]
                values[-1] = dumps(meta.extra, what="extra")
                conn.execute(f"UPDATE sessions SET {assignments} WHERE session_id = ?", (*values, session_id))
                return _ent.TruncateReport(
                    session_id=session_id,
                    after=after,
                    dropped_rounds=max(0, int(total_rounds) - after),
                    dropped_segments=len(ids) - keep,
                    variables=len(state),
                    repaired=tuple(repaired),
                )

        self._tails.drop(session_id)
        try:
            return await self._run("truncate a session", truncate)
        finally:
            self._tails.drop(session_id)

    # ---- locks ----------------------------------------------------------------------------------

    def _check_fence(self, conn: sqlite3.Connection, record: RoundRecord, fence: str) -> None:
        if not self._retake(conn, record.session_id, fence, LOCK_TTL_S):
            raise self._fenced(record)

    @staticmethod
    def _retake(conn: sqlite3.Connection, session_id: str, token: str, ttl: float) -> bool:
        """Inside a transaction: extend ``token``'s lock, or re-take it if it expired and nobody took it."""
        now = time.time()
        row = conn.execute("SELECT token, expires_at FROM locks WHERE session_id = ?", (session_id,)).fetchone()
        if row is not None and row[0] != token and (row[1] > now or str(row[0]).startswith(FORCED_PREFIX)):
            return False  # another run holds it, or it was forced free: this token is fenced out
        conn.execute(
            "INSERT OR REPLACE INTO locks (session_id, token, expires_at) VALUES (?, ?, ?)",
            (session_id, token, max(now + ttl, float(row[1]) if row is not None and row[0] == token else 0.0)),
        )
        return True

    async def _acquire_lock(self, session_id: str, token: str, ttl: float, replace: str | None = None) -> float | None:
        def acquire() -> float | None:
            now = time.time()
            with self._transaction() as conn:
                row = conn.execute("SELECT token, expires_at FROM locks WHERE session_id = ?", (session_id,)).fetchone()
                free = row is None or row[1] <= now or str(row[0]).startswith(FORCED_PREFIX)
                if not free and row[0] not in (token, replace):
                    return float(row[1])
                conn.execute(
                    "INSERT OR REPLACE INTO locks (session_id, token, expires_at) VALUES (?, ?, ?)",
                    (session_id, token, now + ttl),
                )
                return None

        return await self._run("take a session lock", acquire)

    async def _refresh_lock(self, session_id: str, token: str, ttl: float) -> bool:
        def refresh() -> bool:
            with self._transaction() as conn:
                return self._retake(conn, session_id, token, ttl)

        return await self._run("refresh a session lock", refresh)

    async def _release_lock(self, session_id: str, token: str) -> None:
        def release() -> None:
            self._conn.execute("DELETE FROM locks WHERE session_id = ? AND token = ?", (session_id, token))

        await self._run("release a session lock", release)

    async def _read_lock(self, session_id: str) -> tuple[str, float] | None:
        def read() -> tuple[str, float] | None:
            row = self._conn.execute(
                "SELECT token, expires_at FROM locks WHERE session_id = ?", (session_id,)
            ).fetchone()
            return None if row is None else (str(row[0]), float(row[1]))

        return await self._run("read a session lock", read)

    async def _force_unlock(self, session_id: str) -> None:
        def unlock() -> None:
            self._conn.execute(
                "INSERT OR REPLACE INTO locks (session_id, token, expires_at) VALUES (?, ?, ?)",
                (session_id, make_forced_marker(), time.time() + FORCED_TTL_S),
            )

        await self._run("remove a session lock", unlock)

    async def _mark_interrupted(self, session_id: str, stale_token: str | None) -> bool:
        def mark() -> bool:
            now = time.time()
            with self._transaction() as conn:
                lock = conn.execute(
                    "SELECT token, expires_at FROM locks WHERE session_id = ?", (session_id,)
                ).fetchone()
                live = lock is not None and lock[1] > now and not str(lock[0]).startswith(FORCED_PREFIX)
                if live and lock is not None and lock[0] != stale_token:
                    return False
                cursor = conn.execute(
                    "UPDATE sessions SET status = 'interrupted', updated_at = ? "
                    "WHERE session_id = ? AND status = 'active'",
                    (now, session_id),
                )
                return cursor.rowcount == 1

        return await self._run("repair a session's status", mark)

    # ---- pending calls --------------------------------------------------------------------------

    async def add_pending(self, session_id: str, entry: Mapping[str, object]) -> None:
        """Append one entry to the session's pending list."""
        check_session_id(session_id)
        body = dumps(dict(entry), what=f"a pending entry of session {session_id!r}")

        def add() -> None:
            self._conn.execute("INSERT INTO pending (session_id, body) VALUES (?, ?)", (session_id, body))

        await self._run("record a pending call", add)

    async def add_pending_many(self, session_id: str, entries: Sequence[Mapping[str, object]]) -> None:
        """Append several entries in one transaction (one commit for the calls that completed together)."""
        check_session_id(session_id)
        what = f"a pending entry of session {session_id!r}"
        rows = [(session_id, dumps_entry(entry, what=what)) for entry in entries]
        if not rows:
            return

        def add() -> None:
            if len(rows) == 1:
                self._conn.execute("INSERT INTO pending (session_id, body) VALUES (?, ?)", rows[0])
                return
            with self._transaction() as conn:
                conn.executemany("INSERT INTO pending (session_id, body) VALUES (?, ?)", rows)

        if len(rows) <= _INLINE_ROWS and self._add_inline(add):
            return
        await self._run("record pending calls", add)

    def _add_inline(self, add: Callable[[], None]) -> bool:
        """Make a journal write here, on the event loop's thread, when nothing else uses the connection.

        A call waits for its journal entries (docs/store.md, "The call journal"): a hop to the worker
        thread and back costs more than the write (~0.1 ms against ~15 us for a few small rows). A large
        group (gathered calls) goes to the worker: the event loop keeps serving the bridge meanwhile. Only
        when the worker is idle (the connection's lock is free now) and only without waiting for another
        process's write lock (busy timeout 0 for this write): otherwise False, and the caller goes
        through the worker as every other operation does.
        """
        if self._closed or not self._lock.acquire(blocking=False):
            return False
        conn = self._conn
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                with self._errors("record pending calls"):
                    add()
            except StoreError as exc:
                if isinstance(exc.__cause__, sqlite3.OperationalError) and "locked" in str(exc.__cause__):
                    return False  # another process is writing: wait for it in the worker, not here
                raise
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        finally:
            self._lock.release()
        return True

    async def pending(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending entries, in order."""
        check_session_id(session_id)

        def read() -> list[str]:
            rows = self._conn.execute("SELECT body FROM pending WHERE session_id = ? ORDER BY seq", (session_id,))
            return [row[0] for row in rows.fetchall()]

        return [json.loads(text) for text in await self._run("read pending calls", read)]

    async def clear_pending(self, session_id: str) -> None:
        """Drop the session's pending entries."""
        check_session_id(session_id)

        def clear() -> None:
            self._conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))

        await self._run("clear pending calls", clear)

    # ---- key-values (docs/store.md, "Key-values") -----------------------------------------------

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value of ``key`` in ``namespace``, or None."""
        args = (check_namespace(namespace), check_key(key))

        def read() -> bytes | None:
            row = self._conn.execute("SELECT value FROM kv WHERE namespace = ? AND key = ?", args).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run("read a key-value", read)

    async def kv_set(self, namespace: str, key: str, value: bytes) -> None:
        """Set ``key`` in ``namespace`` (one statement: the value is replaced whole or not at all)."""
        row = (check_namespace(namespace), check_key(key), check_value(namespace, key, value), time.time())

        def write() -> None:
            self._conn.execute("INSERT OR REPLACE INTO kv (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)", row)

        await self._run("write a key-value", write)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """Remove ``key`` from ``namespace``; True when it was set."""
        args = (check_namespace(namespace), check_key(key))

        def delete() -> bool:
            return self._conn.execute("DELETE FROM kv WHERE namespace = ? AND key = ?", args).rowcount == 1

        return await self._run("delete a key-value", delete)

    async def kv_list(self, namespace: str, *, prefix: str = "", limit: int | None = None) -> KeyPage:
        """The keys of ``namespace`` starting with ``prefix``, in order, at most ``limit`` (None: all)."""
        check_namespace(namespace)
        prefix = check_prefix(prefix)
        wanted = check_limit(limit)

        def read() -> list[str]:
            # The keys with the prefix are the ones from ``prefix`` on, up to the first that lacks it.
            rows = self._conn.execute(
                "SELECT key FROM kv WHERE namespace = ? AND key >= ? ORDER BY key LIMIT ?",
                (namespace, prefix, -1 if wanted is None else wanted + 1),
            ).fetchall()
            return [str(row[0]) for row in rows]

        return page_of(await self._run("list key-values", read), prefix, wanted)

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._worker.shutdown(wait=False)
        with self._lock:
            self._conn.close()
