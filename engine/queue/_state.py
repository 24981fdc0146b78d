"""What the queue keeps in Redis per run: its state hash, its event stream, its lease.

Keys (``PREFIX`` = ``codeact:q``), each expiring ``RUN_TTL_S`` after its last write:

* ``PREFIX:run:ID`` - hash: ``status`` (queued, running, paused, completed, failed, cancelled),
  ``request`` (the JSON the task runs), ``attempt``, ``session_id``, ``worker``, ``cancel`` ("1" once
  asked), ``pause`` (JSON of what the run waits for), ``updated_at``.
* ``PREFIX:run:ID:events`` - stream: one entry per event (field ``e``: the event's JSON), in order;
  a watcher reads it from the start, so a late or re-attaching watcher sees every event once.
* ``PREFIX:run:ID:lease`` - the worker running it (``LEASE_TTL_S``, renewed every ``BEAT_S``).
* ``PREFIX:active`` - set of the run ids queued or running (the reaper scans it).
* ``PREFIX:session:SID:approvals`` - hash: approval decisions given while a run was paused, keyed by
  the call's digest (toolkit, operation, arguments); each is used once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "BEAT_S",
    "LEASE_TTL_S",
    "PREFIX",
    "RUN_TTL_S",
    "STOP_TYPES",
    "TERMINAL",
    "RunState",
    "call_digest",
    "swap_status",
]

PREFIX = "codeact:q"
RUN_TTL_S = 86_400
"""Seconds a run's keys live after their last write (a day)."""
LEASE_TTL_S = 6.0
"""Seconds a run's lease survives without a heartbeat: a dead worker's run is taken over after this."""
BEAT_S = 2.0
"""Seconds between two renewals of a lease."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""Statuses a run never leaves."""
STOP_TYPES = frozenset({"run.completed", "run.failed", "run.cancelled", "run.paused"})
"""Stream event types after which nothing comes until someone acts (answer, approve) or never."""


def call_digest(toolkit: str, operation: str, arguments: Mapping[str, object]) -> str:
    """A stable digest naming one toolkit call (for approval decisions given across workers)."""
    text = json.dumps([toolkit, operation, dict(arguments)], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class RunState:
    """The Redis side of queued runs (a synchronous ``redis.Redis`` client; thread-safe).

    Args:
        url: ``redis://HOST:PORT/DB`` of the Redis that holds the runs (usually the broker's).
    """

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self.redis = redis.Redis.from_url(url, decode_responses=True, health_check_interval=30)

    def close(self) -> None:
        """Close the client's connections."""
        self.redis.close()

    def eval(self, script: str, keys: int, *args: Any) -> Any:
        """Run a Lua script (``EVAL``)."""
        client: Any = self.redis
        return client.eval(script, keys, *args)

    # -- keys ------------------------------------------------------------------------------------
    @staticmethod
    def key(run_id: str) -> str:
        """The run's state hash."""
        return f"{PREFIX}:run:{run_id}"

    @staticmethod
    def stream_key(run_id: str) -> str:
        """The run's event stream."""
        return f"{PREFIX}:run:{run_id}:events"

    @staticmethod
    def lease_key(run_id: str) -> str:
        """The run's lease."""
        return f"{PREFIX}:run:{run_id}:lease"

    @staticmethod
    def approvals_key(session_id: str) -> str:
        """The session's approval decisions."""
        return f"{PREFIX}:session:{session_id}:approvals"

    # -- state -----------------------------------------------------------------------------------
    def create(self, run_id: str, request: Mapping[str, object], *, event: Mapping[str, object] | None = None) -> None:
        """Record a new queued run (with its request), and its first ``event`` in the same transaction."""
        fields: dict[str | bytes, Any] = {
            "status": "queued",
            "request": json.dumps(dict(request), ensure_ascii=False),
            "attempt": str(request.get("attempt", 1)),
            "session_id": str(request.get("session_id") or ""),
            "runner_id": str(request.get("runner_id") or ""),
            "created_at": f"{time.time():.3f}",
            "updated_at": f"{time.time():.3f}",
        }
        pipe = self.redis.pipeline()
        pipe.hset(self.key(run_id), mapping=fields)
        pipe.expire(self.key(run_id), RUN_TTL_S)
        pipe.sadd(f"{PREFIX}:active", run_id)
        pipe.zadd(f"{PREFIX}:runs", {run_id: time.time()})
        if request.get("session_id"):
            pipe.set(f"{PREFIX}:session:{request['session_id']}:last", run_id, ex=RUN_TTL_S)
        if event is not None:
            self._xadd(pipe, run_id, event)
        pipe.execute()

    def get(self, run_id: str) -> dict[str, str]:
        """The run's state hash ({} when unknown)."""
        return dict(self.redis.hgetall(self.key(run_id)))

    def request(self, run_id: str) -> dict[str, Any] | None:
        """The run's current request (None when unknown)."""
        raw = self.redis.hget(self.key(run_id), "request")
        return json.loads(raw) if raw else None

    def update(self, run_id: str, **fields: str) -> None:
        """Set fields of the run's state; a terminal or paused status takes it off the active set."""
        pipe = self.redis.pipeline()
        self._update(pipe, run_id, fields)
        pipe.execute()

    def _update(self, pipe: Any, run_id: str, fields: dict[str, str]) -> None:
        fields["updated_at"] = f"{time.time():.3f}"
        mapping: dict[str | bytes, Any] = {key: value for key, value in fields.items()}
        pipe.hset(self.key(run_id), mapping=mapping)
        pipe.expire(self.key(run_id), RUN_TTL_S)
        status = fields.get("status")
        if status in TERMINAL or status == "paused":
            pipe.srem(f"{PREFIX}:active", run_id)
        elif status in ("queued", "running"):
            pipe.sadd(f"{PREFIX}:active", run_id)

    def active(self) -> list[str]:
        """Run ids queued or running."""
        return sorted(self.redis.smembers(f"{PREFIX}:active"))

    # -- events ----------------------------------------------------------------------------------
    def append(self, run_id: str, event: Mapping[str, object], **fields: str) -> str:
        """XADD one event to the run's stream; returns its stream id.

        ``fields`` (as :meth:`update`) are set in the same transaction, before the event: one round
        trip, and a watcher that sees the event finds the state that goes with it.
        """
        pipe = self.redis.pipeline()
        if fields:
            self._update(pipe, run_id, fields)
        self._xadd(pipe, run_id, event)
        entry_id = pipe.execute()[-2]
        return str(entry_id)

    def _xadd(self, pipe: Any, run_id: str, event: Mapping[str, Any]) -> None:
        key = self.stream_key(run_id)
        pipe.xadd(key, {"e": json.dumps(dict(event), ensure_ascii=False, default=str)})
        pipe.expire(key, RUN_TTL_S)

    def read(
        self, run_id: str, after: str = "0-0", *, block_ms: int | None = None
    ) -> list[tuple[str, dict[str, object]]]:
        """Events after stream id ``after`` (waiting up to ``block_ms`` for the first when given)."""
        found = self.redis.xread({self.stream_key(run_id): after}, count=500, block=block_ms)
        out: list[tuple[str, dict[str, object]]] = []
        for _key, entries in found or []:
            for entry_id, fields in entries:
                out.append((str(entry_id), json.loads(fields["e"])))
        return out

    def history(self, run_id: str) -> list[dict[str, object]]:
        """Every event the run's stream holds now, in order (read page by page: :meth:`read` gives 500 at most).

        Raises:
            StoreError: ``store.unavailable``: Redis did not answer (a worker does not take that for a bad run).
        """
        import redis

        out: list[dict[str, object]] = []
        after = "0-0"
        while True:
            try:
                page = self.read(run_id, after)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                from codeact.engine.errors import StoreError
                from codeact.engine.store.redis_store import redact_url

                raise StoreError(
                    f"the queue's Redis at {redact_url(self.url)} is unreachable: {exc}; run {run_id!r}'s events "
                    "could not be read; check that the server is running and that --queue points to it",
                    code="store.unavailable",
                ) from exc
            out.extend(event for _entry, event in page)
            if not page:
                return out
            after = page[-1][0]

    def follow(
        self, run_id: str, after: str = "0-0", *, until_stop: bool = True
    ) -> Iterator[tuple[str, dict[str, object]]]:
        """Every event after ``after``, live, in order; ends after a stop event when ``until_stop``."""
        while True:
            for entry_id, event in self.read(run_id, after, block_ms=1000):
                after = entry_id
                yield entry_id, event
                if until_stop and event.get("type") in STOP_TYPES:
                    return

    # -- leases ----------------------------------------------------------------------------------
    def take_lease(self, run_id: str, owner: str) -> bool:
        """Take the run's lease (False when another live worker holds it)."""
        return bool(self.redis.set(self.lease_key(run_id), owner, nx=True, px=int(LEASE_TTL_S * 1000)))

    def renew_lease(self, run_id: str, owner: str) -> bool:
        """Renew the lease if it is still ``owner``'s."""
        script = (
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
            "elseif redis.call('exists', KEYS[1]) == 0 then "
            "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0 else return 0 end"
        )
        return bool(self.eval(script, 1, self.lease_key(run_id), owner, int(LEASE_TTL_S * 1000)))

    def drop_lease(self, run_id: str, owner: str) -> None:
        """Release the lease if it is still ``owner``'s."""
        script = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
        self.eval(script, 1, self.lease_key(run_id), owner)

    def lease_holder(self, run_id: str) -> str | None:
        """Who holds the run's lease (None when nobody: the run is not running anywhere)."""
        holder = self.redis.get(self.lease_key(run_id))
        return str(holder) if holder is not None else None

    def claim_orphan(self, run_id: str, by: str) -> bool:
        """Claim a running run whose lease expired, for re-enqueuing (one claimer wins)."""
        return bool(self.redis.set(f"{self.key(run_id)}:reclaim", by, nx=True, px=int(LEASE_TTL_S * 1000)))

    # -- approvals -------------------------------------------------------------------------------
    def put_decision(self, session_id: str, digest: str, decision: Mapping[str, object]) -> None:
        """Store an approval decision for the session's next call with this digest."""
        key = self.approvals_key(session_id)
        pipe = self.redis.pipeline()
        pipe.hset(key, digest, json.dumps(dict(decision)))
        pipe.expire(key, RUN_TTL_S)
        pipe.execute()

    def take_decision(self, session_id: str, digest: str) -> dict[str, object] | None:
        """Take (use once) the stored decision for a call, if any."""
        key = self.approvals_key(session_id)
        pipe = self.redis.pipeline()
        pipe.hget(key, digest)
        pipe.hdel(key, digest)
        raw, _ = pipe.execute()
        return json.loads(raw) if raw else None


_CAS = (
    "if redis.call('hget', KEYS[1], 'status') == ARGV[1] then "
    "redis.call('hset', KEYS[1], 'status', ARGV[2], 'updated_at', ARGV[3]) return 1 else return 0 end"
)


def swap_status(state: RunState, run_id: str, expected: str, new: str) -> bool:
    """Set the run's status to ``new`` only if it is ``expected`` (atomic); True when it was set."""
    done = bool(state.eval(_CAS, 1, state.key(run_id), expected, new, f"{time.time():.3f}"))
    if done and (new in TERMINAL or new == "paused"):
        state.redis.srem(f"{PREFIX}:active", run_id)
    return done
