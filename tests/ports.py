"""Ports for the servers tests start: a free one, and waiting until a started process listens on it."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str], port: int, *, timeout: float, what: str
) -> None:
    """Return once ``port`` accepts connections; fail the test if ``proc`` exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited")
            time.sleep(0.1)
    pytest.fail(f"{what} did not listen on port {port} within {timeout} s")
