"""A redis-server of a test's own, to kill (-9), stop (SIGSTOP) and restart on the same port.

The append-only file (fsync always) in ``directory`` keeps the data across a kill and restart.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.ports import free_port

__all__ = ["PrivateRedis", "free_port", "running"]


class PrivateRedis:
    """One redis-server process on a free port; ``url`` carries the password and ``query`` given."""

    def __init__(self, directory: Path, *, password: str | None = None, query: str = "") -> None:
        self.port = free_port()
        self.directory = directory
        self.password = password
        self.query = query
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0" + (f"?{self.query}" if self.query else "")

    def start(self) -> None:
        """Start (or restart) the server and wait until it answers PING."""
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if self.password:
            argv += ["--requirepass", self.password]
        argv += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not self._answers():
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"redis-server on port {self.port} did not start within 20 s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        import redis

        client = redis.Redis(port=self.port, password=self.password, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGSTOP / SIGCONT) to the server."""
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()


def running(server: PrivateRedis) -> Iterator[PrivateRedis]:
    """Start ``server``, yield it, and kill it afterwards (woken first if it was stopped): a fixture body."""
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.signal(signal.SIGCONT)
        server.kill()
