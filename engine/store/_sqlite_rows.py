"""The SQLite store's schema and row decoding (engine/store/sqlite.py).

The schema is created on every open (``IF NOT EXISTS``), so a file written by an older codeact gains the
tables added since (version 2: ``kv``, the key-values) the first time a newer one opens it.
"""

from __future__ import annotations

from collections.abc import Mapping

from codeact.engine.errors import StoreError
from codeact.engine.store import _entries as _ent
from codeact.engine.store import _records as _rec
from codeact.engine.store.base import SessionMeta, dumps

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    blueprint_id TEXT NOT NULL,
    blueprint_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT NOT NULL,
    rounds INTEGER NOT NULL,
    title TEXT,
    input TEXT,
    extra TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_updated ON sessions (updated_at DESC);
CREATE TABLE IF NOT EXISTS rounds (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE IF NOT EXISTS segments (
    session_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    segment_id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, pos)
);
CREATE TABLE IF NOT EXISTS variables (
    session_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, name)
);
CREATE TABLE IF NOT EXISTS locks (
    session_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_by_session ON pending (session_id, seq);
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
PRAGMA user_version = 2;
"""

_META_COLUMNS = (
    "session_id",
    "blueprint_id",
    "blueprint_hash",
    "model",
    "created_at",
    "updated_at",
    "status",
    "rounds",
    "title",
    "input",
    "extra",
)
_SELECT_META = f"SELECT {', '.join(_META_COLUMNS)} FROM sessions"


def _meta_from_row(row: tuple[object, ...]) -> SessionMeta:
    return _ent.decode_meta(str(row[0]), dict(zip(_META_COLUMNS, row, strict=True)))


def _meta_or_problem(row: tuple[object, ...]) -> SessionMeta | _rec.CorruptRecordError:
    try:
        return _meta_from_row(row)
    except _rec.CorruptRecordError as exc:
        return exc


def _text(texts: Mapping[str, str] | None, session_id: str, name: str, value: object) -> str:
    return texts[name] if texts is not None else dumps(value, what=f"variable {name!r} of session {session_id!r}")


def _rounds_count(value: object) -> int:
    """The ``rounds`` column, or -1 when it is unreadable (so every append is a conflict)."""
    return value if isinstance(value, int) else -1


def _path_from_url(url: str) -> str:
    """``sqlite:///rel.db`` -> ``rel.db``, ``sqlite:////abs.db`` -> ``/abs.db`` (SQLAlchemy's convention)."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    if url.startswith("sqlite://"):
        raise StoreError(
            f"invalid SQLite store URL {url!r}: use sqlite:///relative/path.db or sqlite:////absolute/path.db",
            code="store.invalid_url",
        )
    return url
