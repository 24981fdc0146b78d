"""Recovery timings: how fast a hung or dead store fails a write, and how fast a dead run's lock is taken over.

* ``redis_hung_s`` / ``redis_killed_s``: seconds from ``append_round`` on a SIGSTOPped / killed
  private ``redis-server`` to the ``store.unavailable`` error (default 2 s timeout). Baseline: the
  same write on the live server (``redis_live_ms``). Before issue 19 a hung server took ~77 s to fail
  a run (5 s timeout x 3 tries x several calls).
* ``takeover_ms``: acquiring a session lock whose owner process died (same host), against acquiring
  a free lock (``free_lock_ms``); before, a dead run's lock blocked every resume for up to 300 s.
  Both on SQLite.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from codeact.engine.errors import StoreError
from codeact.engine.store import RoundRecord, SessionMeta, SQLiteStore, Store
from codeact.engine.store._lock import make_token


def _meta(session_id: str) -> SessionMeta:
    return SessionMeta(session_id=session_id, blueprint_id="bench", blueprint_hash="h", model="m")


def _round(session_id: str, index: int) -> RoundRecord:
    return RoundRecord(
        session_id=session_id, index=index, started_at=time.time(), duration_s=0.1, prompt_hash="p", reply="r"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(port: int, directory: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("redis-server did not start")


async def _fail_time(store: Store, session_id: str, index: int) -> float:
    t0 = time.perf_counter()
    try:
        await store.append_round(_round(session_id, index), segments=[], variables={})
    except StoreError:
        return time.perf_counter() - t0
    raise RuntimeError("the write did not fail")


async def _redis(out: dict[str, Any]) -> None:
    from codeact.engine.store.redis_store import RedisStore

    for outage in ("hung", "killed"):
        with tempfile.TemporaryDirectory() as directory:
            port = _free_port()
            server = _start_redis(port, directory)
            store = RedisStore(f"redis://127.0.0.1:{port}/0?prefix=bench")
            try:
                await store.create_session(_meta("s"))
                t0 = time.perf_counter()
                await store.append_round(_round("s", 1), segments=[], variables={})
                out["redis_live_ms"] = round((time.perf_counter() - t0) * 1000, 2)
                if outage == "hung":
                    server.send_signal(signal.SIGSTOP)
                else:
                    server.kill()
                    server.wait()
                out[f"redis_{outage}_s"] = round(await _fail_time(store, "s", 2), 2)
            finally:
                if server.poll() is None:
                    server.send_signal(signal.SIGCONT)
                    server.kill()
                    server.wait()
                await store.close()
    out["redis_timeout_s"] = 2.0


async def _takeover(out: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = SQLiteStore(Path(directory) / "s.db")
        try:
            t0 = time.perf_counter()
            async with store.lock("free"):
                pass
            out["free_lock_ms"] = round((time.perf_counter() - t0) * 1000, 2)
            child = subprocess.Popen([sys.executable, "-c", "pass"])
            child.wait()
            parts = make_token().split("|")
            dead = "|".join([parts[0], parts[1], str(child.pid), parts[3]])
            await store._acquire_lock("taken", dead, 300.0)  # a dead run's 300 s lock
            t0 = time.perf_counter()
            async with store.lock("taken") as lock:
                assert lock.took_over is not None  # noqa: S101 - a benchmark sanity check
            out["takeover_ms"] = round((time.perf_counter() - t0) * 1000, 2)
            out["takeover_ratio"] = round(out["takeover_ms"] / max(out["free_lock_ms"], 1e-6), 2)
        finally:
            await store.close()


async def _main() -> dict[str, Any]:
    out: dict[str, Any] = {}
    await _takeover(out)
    if shutil.which("redis-server") is not None and os.environ.get("CODEACT_BENCH_SKIP_REDIS") != "1":
        await _redis(out)
    return out


def run() -> dict[str, Any]:
    """Measure the figures above (seconds / milliseconds)."""
    return asyncio.run(_main())


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
