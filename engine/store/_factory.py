"""``open_store``: the one place that turns a store URL into a backend."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from codeact.engine.errors import StoreError
from codeact.engine.store.base import Store

__all__ = ["default_store_url", "open_store"]

_REDIS_SCHEMES = ("redis", "rediss", "unix")


def default_store_url() -> str:
    """``sqlite:///$CODEACT_HOME/sessions.db`` (``CODEACT_HOME`` defaults to ``~/.codeact``)."""
    home = Path(os.environ.get("CODEACT_HOME") or Path.home() / ".codeact").expanduser().resolve()
    return f"sqlite:///{home / 'sessions.db'}"


def open_store(url: str | None = None, *, concurrency: int | None = None) -> Store:
    """Open the store at ``url``, else ``$CODEACT_STORE``, else the default SQLite file.

    Args:
        url: ``sqlite:///PATH`` (``sqlite:////abs/path.db`` for an absolute path), a bare file path,
            or ``redis://[user:password@]host:port/db[?prefix=P&ttl=SECONDS]`` (also ``rediss://``,
            ``unix://``).
        concurrency: How many runs the host runs at once (``codeact serve --max-runs``, ``codeact worker
            --concurrency``): a Redis store sizes its connection pool from it (``?max_connections=``
            in the URL wins).

    Raises:
        StoreError: The scheme is unknown or the store cannot be opened.
    """
    url = url or os.environ.get("CODEACT_STORE") or default_store_url()
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme in _REDIS_SCHEMES:
        # Imported here: `redis` is loaded only when a Redis store is actually used.
        from codeact.engine.store.redis_store import RedisStore, pool_size_for

        return RedisStore(url, pool_size=pool_size_for(concurrency))
    from codeact.engine.store.sqlite import SQLiteStore

    if scheme in ("", "sqlite"):
        return SQLiteStore.from_url(url)
    raise StoreError(
        f"unsupported store URL scheme {scheme!r}: use sqlite:///PATH or redis://HOST:PORT/DB "
        "(in --store or CODEACT_STORE)",
        code="store.invalid_url",
    )
