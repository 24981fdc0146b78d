"""The Redis store (``redis.asyncio``): the ONLY module of codeact that imports ``redis``.

Key layout (docs/store.md): ``{prefix}:sessions`` (zset of ids by updated_at) and, per session,
``{prefix}:session:{id}`` (meta hash), ``:rounds`` (list of round JSON), ``:segments`` (list of
segment JSON), ``:vars`` (hash name -> encoded JSON), ``:lock`` (string token with expiry),
``:pending`` (list of the round in progress's completed calls); key-values (``KeyValues``) per namespace:
``{prefix}:kv:values:{namespace}`` (hash key -> base64 value) and ``{prefix}:kv:keys:{namespace}`` (sorted
set of the keys, listed by ``ZRANGEBYLEX``).
``append_round`` is one Lua script, so a round is written atomically. Every ``redis.*`` exception
is translated into ``StoreError`` by ``map_redis_errors`` (the message names the URL without
credentials).

Connections come from one bounded pool per store (``?max_connections=``, default sized from the
concurrency the host configures, see ``pool_size_for``). A command that finds every connection in
use WAITS for one, its turn after the others; only when no connection has come back for
``?pool_timeout=`` seconds does it fail with ``store.busy``, which names the pool's size and how to
raise it; ``store.unavailable`` ("unreachable") is kept for a server that does not answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

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
from codeact.engine.store._lock import FORCED_TTL_S, LOCK_TTL_S, make_forced_marker
from codeact.engine.store._redis_scripts import (
    _ACQUIRE,
    _APPEND,
    _CREATE,
    _FENCE,
    _MARK_INTERRUPTED,
    _REFRESH,
    _RELEASE,
    _UPDATE,
)
from codeact.engine.store._types import dumps_entry
from codeact.engine.store.base import RoundRecord, SessionMeta, Store, check_session_id, dumps
from codeact.prompts.jsontypes import JsonValue

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_POOL_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "RedisStore",
    "map_redis_errors",
    "pool_size_for",
    "redact_url",
]

DEFAULT_TIMEOUT_S = 2.0
"""Default bound (seconds) of connecting to Redis and of each read and write."""

DEFAULT_POOL_SIZE = 64
"""Connections of a store's pool when neither the URL nor the host's concurrency says otherwise."""

DEFAULT_POOL_TIMEOUT_S = 30.0
"""Default bound (seconds) of waiting for a pooled connection while none is freed, before ``store.busy``."""

# Query parameters of a store URL that are ours, not redis-py's (``max_connections`` is redis-py's
# own: it is read here to size the pool and name it in messages).
_OWN_PARAMS = ("prefix", "ttl", "timeout", "pool_timeout", "max_connections")
_SECRET_PARAMS = ("password", "username")


def pool_size_for(concurrency: int | None) -> int:
    """The pool size for a host running ``concurrency`` runs at once (None: ``DEFAULT_POOL_SIZE``).

    A run holds a connection only for the length of one command, and a command waits its turn for
    one, so a quarter of the runs, between 16 and 64, is plenty; more connections only mean more
    connects at once, which on a busy host are what times out (measured: 200 runs on a pool of 264
    failed half their runs with "Timeout connecting to server", on a pool of 64 none).
    """
    if concurrency is None:
        return DEFAULT_POOL_SIZE
    return min(DEFAULT_POOL_SIZE, max(16, concurrency // 4))


class PoolExhaustedError(redis.exceptions.ConnectionError):
    """No pooled connection was freed for the whole wait (the server may be perfectly fine)."""

    def __init__(self, size: int, waited: float) -> None:
        super().__init__(f"no connection of the pool of {size} was freed for {waited:g} s")
        self.size = size
        self.waited = waited


class _WaitingPool(redis.asyncio.BlockingConnectionPool):  # type: ignore[type-arg]
    """redis-py's blocking pool, waiting as long as connections keep being freed.

    A command that finds every connection in use waits in slices of ``_SLICE_S``; it gives up
    (``PoolExhaustedError``) only after ``wait`` seconds' worth of consecutive slices in which no
    connection came back. Counting slices, not wall time, keeps a busy event loop (a process starved
    of CPU, where a timer fires late and before the replies that would free connections are read) from
    failing commands of a pool that is merely slow; a pool whose connections are all stuck still fails.
    """

    _SLICE_S = 0.5

    def __init__(self, *, wait: float, **kwargs: Any) -> None:
        self.slice = min(wait, self._SLICE_S)
        super().__init__(timeout=self.slice, **kwargs)  # type: ignore[call-overload]  # stubs: int timeout
        self.wait = wait
        self.released = 0

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        idle_slices = 0
        while True:
            seen = self.released
            try:
                return await super().get_connection(*args, **kwargs)
            except redis.exceptions.ConnectionError as exc:
                # redis-py raises ConnectionError("No connection available.") from the wait's TimeoutError.
                if not isinstance(exc.__cause__, asyncio.TimeoutError):
                    raise
                idle_slices = 0 if self.released != seen else idle_slices + 1
                if idle_slices * self.slice >= self.wait:
                    raise PoolExhaustedError(self.max_connections, self.wait) from exc

    async def release(self, connection: Any) -> None:
        self.released += 1
        await super().release(connection)


def redact_url(url: str) -> str:
    """``url`` without user name, password or secret query parameters (safe to print)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in _SECRET_PARAMS])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@contextmanager
def map_redis_errors(url: str) -> Iterator[None]:
    """Translate ``redis.*`` exceptions raised inside the block into ``StoreError`` naming ``url``.

    Args:
        url: The REDACTED store URL to put in messages.
    """
    try:
        yield
    except redis.exceptions.AuthenticationError as exc:
        raise StoreError(
            f"Redis at {url} refused the credentials: {exc}; check the user and password in CODEACT_STORE / --store",
            code="store.auth",
        ) from exc
    except PoolExhaustedError as exc:
        raise StoreError(
            f"Redis at {url} is busy: {exc} (every connection was in use by other commands); raise the "
            f"pool with ?max_connections=N (now {exc.size}) or the wait with ?pool_timeout=SECONDS in "
            "CODEACT_STORE / --store, or run fewer runs at once",
            code="store.busy",
        ) from exc
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise StoreError(
            f"Redis at {url} is unreachable: {exc}; check that the server is running and that "
            "CODEACT_STORE / --store points to it",
            code="store.unavailable",
        ) from exc
    except redis.exceptions.RedisError as exc:
        raise StoreError(f"Redis at {url} failed: {exc}", code="store.redis") from exc


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """Remove codeact's own query parameters from ``url``; returns (redis url, own params)."""
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in params if k in _OWN_PARAMS}
    rest = urlencode([(k, v) for k, v in params if k not in _OWN_PARAMS])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), own


def _meta_to_hash(meta: SessionMeta) -> dict[str, str]:
    data = meta.to_json()
    out = {k: v if isinstance(v, str) else repr(v) for k, v in data.items() if v is not None and k != "extra"}
    out["extra"] = dumps(meta.extra, what=f"the extra data of session {meta.session_id!r}")
    return out


def _meta_from_hash(session_id: str, data: Mapping[str, str]) -> SessionMeta:
    values: dict[str, str | None] = dict(data)
    values.setdefault("extra", "{}")
    values.setdefault("updated_at", values.get("created_at"))
    return _ent.decode_meta(session_id, values)


def _meta_or_problem(session_id: str, data: Mapping[str, str]) -> SessionMeta | _rec.CorruptRecordError:
    try:
        return _meta_from_hash(session_id, data)
    except _rec.CorruptRecordError as exc:
        return exc


def _segment_id(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    return str(data.get("id", "")) if isinstance(data, dict) else ""


class RedisStore(Store):
    """Sessions in Redis.

    Args:
        url: ``redis://[user:password@]host:port/db`` (also ``rediss://``, ``unix://``); the query
            parameters ``prefix`` and ``ttl`` set the options below, the rest go to redis-py.
        prefix: Prefix of every key (lets several deployments or test runs share a server).
        ttl: Seconds after its last write at which a session expires; None keeps sessions forever.
        socket_timeout: Seconds before a silent server counts as gone (``store.unavailable``): the
            bound of connecting and of each read and write (``?timeout=`` in the URL).
        retries: Reconnect attempts (short exponential backoff) after a connection error before an
            outage is reported; a TIMEOUT is never retried (the command may have been applied).
        pool_size: Connections in the pool (``?max_connections=`` in the URL wins); default
            ``DEFAULT_POOL_SIZE`` (a host sizes it from its concurrency with ``pool_size_for``).
        pool_timeout: Seconds a command waiting for a connection waits while NONE is freed before
            ``store.busy`` (``?pool_timeout=``; default ``DEFAULT_POOL_TIMEOUT_S``); while others'
            commands keep freeing connections it waits its turn.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        ttl: float | None = None,
        socket_timeout: float | None = None,
        retries: int = 1,
        pool_size: int | None = None,
        pool_timeout: float | None = None,
    ) -> None:
        redis_url, own = _split_url(url)
        self.url = redact_url(url)
        self.prefix = prefix if prefix is not None else own.get("prefix", "codeact")
        raw_ttl: float | None = ttl
        try:
            if raw_ttl is None and own.get("ttl"):
                raw_ttl = float(own["ttl"])
        except ValueError:
            raw_ttl = -1.0
        if raw_ttl is not None and not raw_ttl > 0:
            raise StoreError(
                f"invalid ttl {own.get('ttl', ttl)!r} for {self.url}: use a positive number of seconds",
                code="store.invalid_url",
            )
        self.ttl = raw_ttl
        self._ttl_ms = str(int(raw_ttl * 1000)) if raw_ttl else "0"
        if socket_timeout is None:
            try:
                socket_timeout = float(own.get("timeout") or DEFAULT_TIMEOUT_S)
            except ValueError:
                socket_timeout = -1.0
            if not socket_timeout > 0:
                raise StoreError(
                    f"invalid timeout {own.get('timeout')!r} for {self.url}: use a positive number of seconds",
                    code="store.invalid_url",
                )
        self.socket_timeout = socket_timeout
        self.pool_size = self._positive(own, "max_connections", pool_size, DEFAULT_POOL_SIZE, kind=int)
        self.pool_timeout = self._positive(own, "pool_timeout", pool_timeout, DEFAULT_POOL_TIMEOUT_S, kind=float)
        with map_redis_errors(self.url):
            try:
                pool = _WaitingPool.from_url(
                    redis_url,
                    max_connections=int(self.pool_size),
                    wait=self.pool_timeout,
                    decode_responses=True,
                    socket_timeout=socket_timeout,
                    socket_connect_timeout=socket_timeout,
                    # Only connection errors are retried (the command was not applied, or a retry is
                    # harmless: every write of this store is idempotent but create_session, which
                    # then reports "exists"); a timeout is reported at once.
                    retry=Retry(
                        ExponentialBackoff(cap=0.5, base=0.05),
                        retries,
                        supported_errors=(redis.exceptions.ConnectionError,),
                    ),
                    health_check_interval=30,
                )
                # from_pool: the client owns the pool, so close() closes it.
                self._client: redis.asyncio.Redis[str] = redis.asyncio.Redis.from_pool(pool)  # type: ignore[attr-defined]
            except ValueError as exc:
                raise StoreError(f"invalid Redis store URL {self.url}: {exc}", code="store.invalid_url") from exc
        self._create = self._client.register_script(_CREATE)
        self._update = self._client.register_script(_UPDATE)
        self._append = self._client.register_script(_FENCE + _APPEND)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._mark = self._client.register_script(_MARK_INTERRUPTED)
        self._refresh = self._client.register_script(_REFRESH)
        self._release = self._client.register_script(_RELEASE)
        self._tails = _rec.TailCache()

    def _positive(
        self, own: Mapping[str, str], name: str, given: float | None, default: float, *, kind: type[float] | type[int]
    ) -> float:
        """The URL's ``?name=`` (which wins), else ``given``, else ``default``; ``store.invalid_url`` unless > 0."""
        raw = own.get(name) or str(given or default)
        try:
            value = kind(raw)
        except ValueError:
            value = -1
        if not value > 0:
            raise StoreError(
                f"invalid {name} {raw!r} for {self.url}: use a positive {'whole ' if kind is int else ''}number",
                code="store.invalid_url",
            )
        return value

    # ---- keys (docs/store.md) --------------------------------------------------------------------

    def _index_key(self) -> str:
        return f"{self.prefix}:sessions"

    def _key(self, session_id: str, part: str = "") -> str:
        base = f"{self.prefix}:session:{check_session_id(session_id)}"
        return f"{base}:{part}" if part else base

    # ---- sessions -------------------------------------------------------------------------------

    async def create_session(self, meta: SessionMeta) -> None:
        """Record a new session; ``StoreError`` if one with that id exists."""
        fields = _meta_to_hash(meta)
        args: list[str] = [meta.session_id, repr(meta.updated_at), self._ttl_ms]
        for name, value in fields.items():
            args += [name, value]
        with map_redis_errors(self.url):
            created = await self._create(keys=[self._key(meta.session_id), self._index_key()], args=args)
        if not created:
            raise StoreError(
                f"session {meta.session_id!r} already exists in {self.url}; resume it or choose another id",
                code="store.exists",
            )

    async def get_session(self, session_id: str) -> SessionMeta | None:
        """The session's metadata, or None when it does not exist."""
        key = self._key(session_id)
        with map_redis_errors(self.url):
            data = await self._client.hgetall(key)
        return _meta_from_hash(session_id, data) if data else None

    async def list_sessions(self, *, limit: int = 50) -> list[SessionMeta]:
        """Up to ``limit`` sessions, most recently updated first (unreadable ones left out: see ``scan_sessions``)."""
        return [meta for meta in await self.scan_sessions(limit=limit) if isinstance(meta, SessionMeta)]

    async def scan_sessions(self, *, limit: int = 50) -> list[SessionMeta | _rec.CorruptRecordError]:
        """Up to ``limit`` sessions, most recently updated first (expired ones are dropped from the index)."""
        if limit <= 0:
            return []
        with map_redis_errors(self.url):
            ids: list[str] = await self._client.zrevrange(self._index_key(), 0, limit - 1)
            async with self._client.pipeline(transaction=False) as pipe:
                for session_id in ids:
                    pipe.hgetall(self._key(session_id))
                found = await pipe.execute()
            expired = [session_id for session_id, data in zip(ids, found, strict=True) if not data]
            if expired:
                await self._client.zrem(self._index_key(), *expired)
        return [_meta_or_problem(i, data) for i, data in zip(ids, found, strict=True) if data]

    async def update_session(self, session_id: str, **fields: Any) -> SessionMeta:
        """Change metadata fields; returns the new meta (see ``Store.update_session``)."""
        current = await self.get_session(session_id)
        if current is None:
            raise self._not_found(session_id)
        new = current.with_updates(**fields)
        encoded = _meta_to_hash(new)
        names = (*fields, "updated_at")
        to_delete = [name for name in names if name not in encoded]
        args: list[str] = [session_id, repr(new.updated_at), self._ttl_ms, str(len(to_delete)), *to_delete]
        for name in names:
            if name in encoded:
                args += [name, encoded[name]]
        with map_redis_errors(self.url):
            updated = await self._update(keys=[self._key(session_id), self._index_key()], args=args)
        if not updated:
            raise self._not_found(session_id)
        return new

    async def delete_session(self, session_id: str) -> None:
        """Remove the session and everything recorded for it."""
        keys = [self._key(session_id, part) for part in ("", "rounds", "segments", "vars", "pending")]
        self._tails.drop(session_id)
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(*keys)
                pipe.zrem(self._index_key(), session_id)
                await pipe.execute()

    # ---- rounds ---------------------------------------------------------------------------------

    async def append_round(
        self,
        record: RoundRecord,
        *,
        segments: Sequence[Mapping[str, object]],
        variables: Mapping[str, object],
        fence: str | None = None,
    ) -> None:
        """Atomically record a round, its new segments and the session's current variables (one Lua script)."""
        session_id = record.session_id
        keys = [self._key(session_id, part) for part in ("", "rounds", "segments", "vars")] + [self._index_key()]
        # Everything is serialized before anything is sent: a value that fails leaves Redis untouched.
        parts: list[str] = []
        for offset, segment in enumerate(segments, start=1):
            segment_id = segment.get("id")
            if not isinstance(segment_id, str) or not segment_id:
                raise StoreError(
                    f"cannot store segment {offset} of round {record.index} of session {session_id!r}: "
                    "it has no string 'id'",
                    code="store.invalid_segment",
                )
            parts.append(dumps(dict(segment), what=f"segment {segment_id!r} of session {session_id!r}"))
        for attempt in (1, 2):
            before = await self._tail_before(session_id, record.index, fresh=attempt == 2)
            if before.table_segments is None:
                with map_redis_errors(self.url):
                    count = int(await self._client.llen(keys[2]))
            else:
                count = before.table_segments
            body, tail, _set, _deleted = _rec.encode_round(record, before, table_segments=count + len(segments))
            assert tail.texts is not None  # noqa: S101 - encode_round sets them
            args: list[str] = [
                session_id,
                str(record.index),
                body,
                repr(time.time()),
                self._ttl_ms,
                before.digest,
                "" if before.table_segments is None else str(before.table_segments),
                str(len(parts)),
                *parts,
            ]
            same = variables == record.variables
            for name, value in variables.items():
                text = tail.texts[name] if same else dumps(value, what=f"variable {name!r} of session {session_id!r}")
                args += [name, text]
            with map_redis_errors(self.url):
                status, last = await self._append(
                    keys=[*keys, self._key(session_id, "lock")], args=[*args, str(int(LOCK_TTL_S * 1000)), fence or ""]
                )
            if status == 3 and attempt == 1:
                continue  # the cached previous round is stale (another process wrote): re-read it
            break
        if status != 0:
            self._tails.drop(session_id)
        if status == 4:
            raise self._fenced(record)
        if status == 1:
            raise self._not_found(session_id)
        if status in (2, 3):
            raise self._conflict(record, int(last))
        self._tails.put(session_id, before, tail)

    async def _tail_before(self, session_id: str, index: int, *, fresh: bool = False) -> _rec.Tail:
        """The state after round ``index - 1``: cached (the script checks its digest), else decoded."""
        if index <= 1:
            return _rec.Tail()
        cached = None if fresh else self._tails.get(session_id, index - 1)
        if cached is not None:
            return cached
        tail, problem = _rec.decode_tail(session_id, await self._raw_rounds(session_id, upto=index - 1))
        if problem is not None:
            raise problem
        self._tails.put(session_id, _rec.Tail(), tail)
        return tail

    async def _raw_rounds(self, session_id: str, *, since: int = 1, upto: int | None = None) -> list[tuple[int, str]]:
        key = self._key(session_id, "rounds")
        with map_redis_errors(self.url):
            items: list[str] = await self._client.lrange(key, since - 1, -1 if upto is None else upto - 1)
        return list(enumerate(items, start=since))

    async def read_rounds(self, session_id: str) -> _rec.RoundsRead:
        """Every stored round decoded; the first unreadable one named (see ``Store.read_rounds``)."""
        return _rec.decode_rounds(session_id, await self._raw_rounds(session_id))

    async def verify_rounds(self, session_id: str) -> None:
        """Check every stored round decodes (linear); raise the first ``CorruptRecordError``. Primes the write cache."""
        check_session_id(session_id)
        tail = _rec.verified_tail(session_id, await self._raw_rounds(session_id))
        self._tails.put(session_id, _rec.Tail(), tail)

    async def round(self, session_id: str, index: int) -> RoundRecord | None:
        """Round ``index`` (1-based), or None; ``CorruptRecordError`` when it (or one before it) is unreadable."""
        check_session_id(session_id)
        if index < 1:
            return None
        cached = self._tails.get(session_id, index - 1)
        if cached is not None:
            bodies = dict(await self._raw_rounds(session_id, since=max(1, index - 1), upto=index))
            read = _rec.read_after_tail(session_id, index, cached, bodies)
            if read is not None:
                return _rec.pick_round(read, index)
        return _rec.pick_round(_rec.decode_rounds(session_id, await self._raw_rounds(session_id, upto=index)), index)

    async def segments(self, session_id: str) -> list[dict[str, Any]]:
        """All segments of the session, in order; ``CorruptRecordError`` naming an unreadable one."""
        key = self._key(session_id, "segments")
        with map_redis_errors(self.url):
            items: list[str] = await self._client.lrange(key, 0, -1)
        return await _ent.decode_segments(self, session_id, enumerate(items, start=1))

    async def variables(self, session_id: str) -> dict[str, JsonValue]:
        """The session's current codec-encoded variables by name; ``CorruptRecordError`` naming an unreadable one."""
        key = self._key(session_id, "vars")
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.hgetall(key)
                pipe.hget(self._key(session_id), "rounds")
                data, count = await pipe.execute()
        rounds = int(count) if isinstance(count, str) and count.isdigit() else None
        return {name: _ent.decode_variable(session_id, name, data[name], rounds=rounds) for name in sorted(data)}

    async def truncate(self, session_id: str, *, after: int) -> _ent.TruncateReport:
        """Keep rounds 1..``after`` (see ``Store.truncate``); one MULTI/EXEC transaction."""
        if after < 0:
            raise StoreError(f"--after must be 0 or more, got {after}", code="store.invalid_argument")
        meta_key, rounds_key, segments_key, vars_key = (
            self._key(session_id, part) for part in ("", "rounds", "segments", "vars")
        )
        self._tails.drop(session_id)
        with map_redis_errors(self.url):
            raw_meta: dict[str, str] = await self._client.hgetall(meta_key)
            total = int(await self._client.llen(rounds_key))
            bodies: list[str] = await self._client.lrange(segments_key, 0, -1)
        if not raw_meta:
            raise self._not_found(session_id)
        read = _rec.decode_rounds(session_id, await self._raw_rounds(session_id, upto=after))
        ids = [_segment_id(body) for body in bodies]
        keep = _ent.segments_after(read, after, ids)
        state = read.rounds[after - 1].variables if after else {}
        meta, repaired = _ent.repair_meta(session_id, raw_meta, rounds=after, now=time.time())
        fields: dict[str | bytes, bytes | float | int | str] = dict(_meta_to_hash(meta).items())
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.ltrim(rounds_key, 0, after - 1) if after else pipe.delete(rounds_key)
                pipe.ltrim(segments_key, 0, keep - 1) if keep else pipe.delete(segments_key)
                pipe.delete(vars_key)
                if state:
                    pipe.hset(vars_key, mapping={k: dumps(v, what=f"variable {k!r}") for k, v in state.items()})
                pipe.delete(meta_key)
                pipe.hset(meta_key, mapping=fields)
                pipe.zadd(self._index_key(), {session_id: meta.updated_at})
                await pipe.execute()
        self._tails.drop(session_id)
        return _ent.TruncateReport(
            session_id=session_id,
            after=after,
            dropped_rounds=max(0, total - after),
            dropped_segments=len(ids) - keep,
            variables=len(state),
            repaired=tuple(repaired),
        )

    # ---- locks ----------------------------------------------------------------------------------

    async def _acquire_lock(self, session_id: str, token: str, ttl: float, replace: str | None = None) -> float | None:
        key = self._key(session_id, "lock")
        with map_redis_errors(self.url):
            acquired, pttl = await self._acquire(keys=[key], args=[token, str(max(1, int(ttl * 1000))), replace or ""])
        if acquired:
            return None
        # A negative PTTL cannot happen for our locks (always set with PX); report "now" so the caller retries.
        return time.time() + max(int(pttl), 0) / 1000

    async def _refresh_lock(self, session_id: str, token: str, ttl: float) -> bool:
        key = self._key(session_id, "lock")
        with map_redis_errors(self.url):
            return bool(await self._refresh(keys=[key], args=[token, str(max(1, int(ttl * 1000)))]))

    async def _release_lock(self, session_id: str, token: str) -> None:
        key = self._key(session_id, "lock")
        with map_redis_errors(self.url):
            await self._release(keys=[key], args=[token])

    async def _read_lock(self, session_id: str) -> tuple[str, float] | None:
        key = self._key(session_id, "lock")
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.get(key)
                pipe.pttl(key)
                token, pttl = await pipe.execute()
        if token is None:
            return None
        return str(token), time.time() + max(int(pttl), 0) / 1000

    async def _force_unlock(self, session_id: str) -> None:
        key = self._key(session_id, "lock")
        with map_redis_errors(self.url):
            await self._client.set(key, make_forced_marker(), px=int(FORCED_TTL_S * 1000))

    async def _mark_interrupted(self, session_id: str, stale_token: str | None) -> bool:
        keys = [self._key(session_id), self._key(session_id, "lock")]
        with map_redis_errors(self.url):
            changed = await self._mark(keys=keys, args=[stale_token or "", repr(time.time())])
            if changed:
                await self._client.zadd(self._index_key(), {session_id: time.time()})
        return bool(changed)

    # ---- pending calls --------------------------------------------------------------------------

    async def add_pending(self, session_id: str, entry: Mapping[str, object]) -> None:
        """Append one entry to the session's pending list."""
        key = self._key(session_id, "pending")
        body = dumps(dict(entry), what=f"a pending entry of session {session_id!r}")
        with map_redis_errors(self.url):
            await self._client.rpush(key, body)

    async def add_pending_many(self, session_id: str, entries: Sequence[Mapping[str, object]]) -> None:
        """Append several entries with one ``RPUSH`` (atomic: all of them, in order, or none)."""
        if not entries:
            return
        key = self._key(session_id, "pending")
        what = f"a pending entry of session {session_id!r}"
        bodies = [dumps_entry(entry, what=what) for entry in entries]
        with map_redis_errors(self.url):
            await self._client.rpush(key, *bodies)

    async def pending(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending entries, in order."""
        key = self._key(session_id, "pending")
        with map_redis_errors(self.url):
            items: list[str] = await self._client.lrange(key, 0, -1)
        return [json.loads(item) for item in items]

    async def clear_pending(self, session_id: str) -> None:
        """Drop the session's pending entries."""
        key = self._key(session_id, "pending")
        with map_redis_errors(self.url):
            await self._client.delete(key)

    # ---- key-values (docs/store.md, "Key-values") -----------------------------------------------

    def _kv_keys(self, namespace: str) -> tuple[str, str]:
        """The hash of a namespace's values (base64) and the sorted set of its keys (lexicographic listing)."""
        check_namespace(namespace)
        return f"{self.prefix}:kv:values:{namespace}", f"{self.prefix}:kv:keys:{namespace}"

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value of ``key`` in ``namespace``, or None."""
        values, _ = self._kv_keys(namespace)
        with map_redis_errors(self.url):
            text: str | None = await self._client.hget(values, check_key(key))
        if text is None:
            return None
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise StoreError(
                f"the value of {key!r} in {namespace!r} in {self.url} is unreadable (not base64); set it again",
                code="store.corrupt",
            ) from None

    async def kv_set(self, namespace: str, key: str, value: bytes) -> None:
        """Set ``key`` in ``namespace``: value and key index in one MULTI/EXEC (both or neither)."""
        values, keys = self._kv_keys(namespace)
        key = check_key(key)
        text = base64.b64encode(check_value(namespace, key, value)).decode("ascii")
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(values, key, text)
                pipe.zadd(keys, {key: 0})
                if self.ttl:
                    pipe.pexpire(values, int(self._ttl_ms))
                    pipe.pexpire(keys, int(self._ttl_ms))
                await pipe.execute()

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """Remove ``key`` from ``namespace``; True when it was set."""
        values, keys = self._kv_keys(namespace)
        key = check_key(key)
        with map_redis_errors(self.url):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hdel(values, key)
                pipe.zrem(keys, key)
                removed, _ = await pipe.execute()
        return bool(removed)

    async def kv_list(self, namespace: str, *, prefix: str = "", limit: int | None = None) -> KeyPage:
        """The keys of ``namespace`` starting with ``prefix``, in order, at most ``limit`` (None: all)."""
        _, keys = self._kv_keys(namespace)
        prefix = check_prefix(prefix)
        wanted = check_limit(limit)
        low = f"[{prefix}" if prefix else "-"
        with map_redis_errors(self.url):
            if wanted is None:
                found: list[str] = await self._client.zrangebylex(keys, low, "+")
            else:
                found = await self._client.zrangebylex(keys, low, "+", start=0, num=wanted + 1)
        return page_of(found, prefix, wanted)

    async def close(self) -> None:
        """Close the connection pool."""
        with map_redis_errors(self.url):
            # aclose() is redis-py >= 5; the types-redis stubs predate it.
            await self._client.aclose()  # type: ignore[attr-defined]
