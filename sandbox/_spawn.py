"""Starting and releasing child processes so that a cancel never leaks their pipes.

A cancel that lands inside :func:`asyncio.create_subprocess_exec` while it connects the child's
pipes makes asyncio close the transport before the pipe task is done; that task then opens the
pipe transports on a closed transport, and nothing ever closes them (an "unclosed transport"
``ResourceWarning`` at some later garbage collection, in whatever code runs then). :func:`spawn`
lets the start finish (a fork and an exec: milliseconds), releases what it made, then lets the
cancel go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import weakref
from collections.abc import AsyncIterator
from typing import Any, Final

__all__ = ["START_SLOTS", "kill", "release", "spawn", "start_slot"]

_SETTLE_S: Final = 10.0  # how long a cancelled start is waited for before it is released when done


def kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the child's whole process group (bubblewrap then tears down its pid namespace)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        # Not proc.kill(): Popen.send_signal() polls first and would reap a child that just died,
        # from under asyncio's child watcher. Until that watcher reaps it, the pid cannot be reused,
        # so signalling it directly is safe.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)


def release(proc: asyncio.subprocess.Process) -> None:
    """:func:`kill` the child and close its pipes now (asyncio's child watcher still reaps it)."""
    kill(proc)
    transport = getattr(proc, "_transport", None)
    if transport is None:
        return
    # asyncio's child watcher reaps the child in a thread (waitpid(pid, 0)). Closing the transport
    # calls Popen.poll(), and a Popen dropped unreaped is reaped by the next subprocess.Popen: either
    # would take the (killed) child from under that thread, which then logs "Unknown child process
    # pid N, will report returncode 255". Mark the Popen as done: the watcher stays the only one to reap it.
    popen = getattr(transport, "_proc", None)
    if popen is not None and popen.returncode is None:
        popen.returncode = -signal.SIGKILL
    with contextlib.suppress(Exception):
        transport.close()


def _release_done(spawning: asyncio.Future[asyncio.subprocess.Process]) -> None:
    if not spawning.cancelled() and spawning.exception() is None:
        release(spawning.result())


async def spawn(*argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """:func:`asyncio.create_subprocess_exec`, except that a cancel leaves no process and no open pipe.

    Cancelled while the child starts, it waits for the start to finish, kills the child and closes
    its pipes, then raises :class:`asyncio.CancelledError`.
    """
    spawning = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **kwargs))
    try:
        return await asyncio.shield(spawning)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):  # cancelled again: released when it is done
            await asyncio.wait({spawning}, timeout=_SETTLE_S)
        if spawning.done():
            _release_done(spawning)
        else:
            spawning.add_done_callback(_release_done)
        raise


START_SLOTS: Final = max(4, 2 * (os.cpu_count() or 1))
"""Sandbox runtimes starting at once in one process (per event loop); more starts wait their turn."""

_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def start_slot() -> AsyncIterator[None]:
    """Hold one of ``START_SLOTS`` while a runtime starts (spawned until it has connected).

    Two hundred runs starting their sandboxes at once on a small machine each got a slice of the CPU
    too thin to connect within the start timeout, and failed (``sandbox.start``); queued, each start
    gets the machine and takes its usual fraction of a second, and the wait is not part of its timeout.
    """
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(START_SLOTS)
    async with slots:
        yield
