"""Redis going away mid-run: the run fails with a StoreError naming the URL; recorded rounds stay intact."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codeact.engine.store.redis_store import RedisStore
from tests.ports import free_port

from .conftest import BASE, MakeAgent, Probe, code


@dataclass
class _Server:
    port: int
    directory: Path
    pid: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.directory),
                "--pidfile",
                str(self.directory / "redis.pid"),
                "--daemonize",
                "yes",
            ],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        self.pid = int((self.directory / "redis.pid").read_text())
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"redis-server on port {self.port} did not start")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait_dead(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)
        raise AssertionError("redis-server did not exit")


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[_Server]:
    """A redis-server of this test's own (AOF on, fsync always), stopped afterwards."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (make test installs it)")
    server = _Server(port=free_port(), directory=tmp_path)
    server.start()
    yield server
    try:
        server.signal(signal.SIGCONT)
        server.signal(signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize(
    "outage", [pytest.param("kill-restart", id="kill-restart"), pytest.param("stop-cont", id="stop-cont")]
)
async def test_redis_outage_fails_the_run_and_keeps_the_recorded_rounds(
    make_agent: MakeAgent, probe: Probe, own_redis: _Server, outage: str
) -> None:
    store = RedisStore(own_redis.url, prefix="outage", socket_timeout=1.0, retries=0)
    blueprint = BASE.replace("  - ref: devops", "  - ref: probe")
    built = make_agent(blueprint, [code("before = 1"), code("after = probe.block()"), code("system.finish(after)")])
    built.agent.store = store
    try:
        running = asyncio.create_task(built.run("go", session_id="s-outage"))
        await asyncio.wait_for(probe.entered.wait(), 30)
        recorded = await store.rounds("s-outage")
        assert [r.index for r in recorded] == [1]

        own_redis.signal(signal.SIGKILL if outage == "kill-restart" else signal.SIGSTOP)
        if outage == "kill-restart":
            own_redis.wait_dead()
        probe.release.set()
        events = await asyncio.wait_for(running, 60)

        assert events[0].type == "run.started"
        failed = events[-1]
        assert failed.type == "run.failed"
        assert failed.error["code"] == "store.unavailable"  # type: ignore[attr-defined]
        message = failed.error["message"]  # type: ignore[attr-defined]
        assert message.startswith(f"Redis at {own_redis.url}")
        assert message.endswith("check that the server is running and that CODEACT_STORE / --store points to it")
        assert failed.retryable is True  # type: ignore[attr-defined]
        assert failed.rounds == 1  # type: ignore[attr-defined]

        if outage == "kill-restart":
            own_redis.start()  # same directory: the append-only file brings the data back
        else:
            own_redis.signal(signal.SIGCONT)
        back = await store.rounds("s-outage")
        assert back[0] == recorded[0]
        meta = await store.get_session("s-outage")
        assert meta is not None
        # A round is written whole or not at all.
        assert [r.index for r in back] == list(range(1, meta.rounds + 1))
        assert meta.rounds in (1, 2)
        if outage == "kill-restart":
            assert meta.rounds == 1
            assert await store.variables("s-outage") == {"before": 1}
    finally:
        await store.close()
