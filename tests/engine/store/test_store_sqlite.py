"""SQLite-only behaviour and the ``open_store`` factory."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.engine.errors import StoreError
from codeact.engine.store import SessionBusyError, SQLiteStore, default_store_url, open_store

from ._helpers import append, make_meta


async def test_default_store_is_a_private_sqlite_file_under_codeact_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODEACT_STORE", raising=False)
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    store = open_store()
    try:
        assert isinstance(store, SQLiteStore)
        assert store.url == f"sqlite:///{tmp_path / 'home' / 'sessions.db'}" == default_store_url()
        await store.create_session(make_meta())
    finally:
        await store.close()
    assert stat.S_IMODE((tmp_path / "home" / "sessions.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700


def test_default_home_is_dot_codeact(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CODEACT_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_url() == f"sqlite:///{tmp_path / '.codeact' / 'sessions.db'}"


@pytest.mark.parametrize(
    ("url", "relative"),
    [
        pytest.param("sqlite:///{tmp}/a.db", "a.db", id="sqlite-url"),
        pytest.param("{tmp}/b.db", "b.db", id="bare-path"),
        pytest.param("sqlite:///nested/c.db", "nested/c.db", id="relative"),
    ],
)
async def test_open_store_sqlite_urls(url: str, relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store(url.format(tmp=tmp_path))
    try:
        assert isinstance(store, SQLiteStore)
        assert store.url == f"sqlite:///{tmp_path / relative}"
    finally:
        await store.close()


async def test_open_store_reads_codeact_store(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEACT_STORE", f"{redis_url}?prefix=codeact-test-env")
    store = open_store()
    try:
        from codeact.engine.store.redis_store import RedisStore

        assert isinstance(store, RedisStore)
        assert store.prefix == "codeact-test-env"
        assert await store.list_sessions() == []
    finally:
        await store.close()
    # An explicit URL wins over the environment.
    explicit = open_store(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(explicit, SQLiteStore)
    await explicit.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param(
            "postgres://db/sessions",
            "unsupported store URL scheme 'postgres': use sqlite:///PATH or redis://HOST:PORT/DB "
            "(in --store or CODEACT_STORE)",
            id="unknown-scheme",
        ),
        pytest.param(
            "sqlite://host/x.db",
            "invalid SQLite store URL 'sqlite://host/x.db': use sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db",
            id="sqlite-with-host",
        ),
    ],
)
def test_open_store_rejects_bad_urls(url: str, message: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert info.value.message == message


def test_unopenable_file_names_the_url(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreError) as info:
        SQLiteStore(tmp_path / "file" / "sessions.db")
    assert info.value.message.startswith("SQLite store at sqlite:///")
    assert str(tmp_path / "file" / "sessions.db") in info.value.message


async def test_operations_after_close_fail_clearly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.close()
    with pytest.raises(StoreError) as info:
        await store.list_sessions()
    assert info.value.message == f"store sqlite:///{tmp_path / 's.db'} is closed"


async def test_operations_land_in_order_even_when_their_caller_is_cancelled(tmp_path: Path) -> None:
    """A cancelled write that was running lands before the next operation; one not yet started never runs.

    (With a thread pool, a pending entry cancelled mid-write could land after the ``clear_pending``
    that follows it, leaving a stale entry behind an interrupted round.)
    """
    path = tmp_path / "s.db"

    def entry(code: str) -> dict[str, object]:
        return {"round": 1, "kind": "code", "code": code}

    async with SQLiteStore(path) as store:
        await store.create_session(make_meta())
        for then_clear in (False, True):
            blocker = sqlite3.connect(path, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")  # another process's write: the store's writes wait for it
            try:
                running = asyncio.create_task(store.add_pending("s1", entry("a")))
                queued = asyncio.create_task(store.add_pending("s1", entry("b")))
                await asyncio.sleep(0.2)
                running.cancel()
                queued.cancel()
                last = store.clear_pending("s1") if then_clear else store.add_pending("s1", entry("c"))
                following = asyncio.create_task(last)
                await asyncio.sleep(0.1)
            finally:
                blocker.execute("COMMIT")
                blocker.close()
            await following
            for task in (running, queued):
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert [e["code"] for e in await store.pending("s1")] == ([] if then_clear else ["a", "c"])
            await store.clear_pending("s1")


async def test_the_file_uses_wal_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.create_session(make_meta())
        first = await append(store, 1)
    async with SQLiteStore(path) as again:
        assert await again.rounds("s1") == [first]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_the_lock_holds_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio, sys\n"
            "from codeact.engine.store import SQLiteStore\n"
            "async def main():\n"
            f"    async with SQLiteStore({str(path)!r}) as store, store.lock('s1'):\n"
            "        print('locked', flush=True)\n"
            "        sys.stdin.readline()\n"
            "asyncio.run(main())\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        async with SQLiteStore(path) as store:
            with pytest.raises(SessionBusyError):
                async with store.lock("s1"):
                    pass
            holder.stdin.write("\n")
            holder.stdin.flush()
            async with store.lock("s1", wait=30) as lock:
                assert lock.held
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


async def test_a_blocked_event_loop_is_not_a_hung_disk(tmp_path: Path) -> None:
    """The operation timeout fires late when the event loop itself was held up (a parallel flow's branch
    importing litellm on a busy machine): the operation finished meanwhile, so it succeeds."""
    import time

    store = SQLiteStore(tmp_path / "s.db", busy_timeout=0.1, op_timeout=0.3)
    try:
        creating = asyncio.ensure_future(store.create_session(make_meta("late")))
        await asyncio.sleep(0)  # the write is handed to the store's thread
        time.sleep(0.8)  # the loop is blocked past the timeout; the write completes meanwhile
        await creating
        assert (await store.get_session("late")) is not None
    finally:
        await store.close()


async def test_an_operation_that_hangs_is_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", busy_timeout=0.1, op_timeout=0.3)
    try:
        with store._lock:  # another operation of this store holds the connection (a hung disk)
            with pytest.raises(StoreError) as caught:
                await store.create_session(make_meta("hung"))
        assert caught.value.code == "store.unavailable" and "within 0.3 s" in str(caught.value)
    finally:
        await store.close()
