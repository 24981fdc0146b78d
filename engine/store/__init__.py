"""Session stores: where sessions, rounds, segments and variables are persisted (and key-values: ``KeyValues``).

``open_store(url)`` picks the backend: the embedded SQLite file by default, Redis for
``redis://`` URLs. ``RedisStore`` is not re-exported here so that ``import engine.store`` never
loads ``redis``; import it from ``codeact.engine.store.redis_store``.
"""

from __future__ import annotations

from codeact.engine.store._entries import TruncateReport
from codeact.engine.store._factory import default_store_url, open_store
from codeact.engine.store._kv import MAX_KEY_CHARS, KeyPage, KeyValues, check_key
from codeact.engine.store._lock import HEARTBEAT_S, LOCK_TTL_S
from codeact.engine.store._records import CorruptRecordError, RoundEntry, RoundsRead
from codeact.engine.store.base import (
    ROUND_STATUSES,
    SESSION_STATUSES,
    LockInfo,
    LockLostError,
    RoundRecord,
    SessionBusyError,
    SessionLock,
    SessionMeta,
    SessionStatus,
    Store,
    check_session_id,
)
from codeact.engine.store.sqlite import SQLiteStore

__all__ = [
    "CorruptRecordError",
    "HEARTBEAT_S",
    "KeyPage",
    "KeyValues",
    "LOCK_TTL_S",
    "LockInfo",
    "LockLostError",
    "MAX_KEY_CHARS",
    "ROUND_STATUSES",
    "RoundEntry",
    "RoundRecord",
    "RoundsRead",
    "SESSION_STATUSES",
    "SQLiteStore",
    "SessionBusyError",
    "SessionLock",
    "SessionMeta",
    "SessionStatus",
    "Store",
    "TruncateReport",
    "check_key",
    "check_session_id",
    "default_store_url",
    "open_store",
]
