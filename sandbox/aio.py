"""Cancel-safe asyncio helpers shared by the sandbox, the toolkits and the engine.

On Python 3.11, :func:`asyncio.wait_for` swallows a cancellation that arrives just as the awaited
call completes (CPython gh-86296, fixed in 3.12 where ``wait_for`` is built on ``asyncio.timeout``):
the caller gets the result and goes on as if nobody had cancelled it. A run cancelled at that
instant would run its next round. :func:`wait_for` here has ``wait_for``'s contract without that
race, and :func:`cancel_and_wait` stops a task even when something inside it swallowed a cancel.
:func:`finish_through_cancels` is the other side: clean-up that must end (a started container
removed) even while :func:`cancel_and_wait` keeps cancelling its caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["cancel_and_wait", "finish_through_cancels", "wait_for"]

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """Await ``aw`` for at most ``timeout`` seconds (None: no limit), never losing a cancellation.

    Args:
        aw: A coroutine or future (wrap a task you must not cancel in :func:`asyncio.shield`).
        timeout: Seconds to wait; 0 or less times out unless ``aw`` completes without waiting.

    Raises:
        TimeoutError: ``aw`` did not complete in time (it is cancelled).
    """
    async with asyncio.timeout(timeout):
        return await aw


async def cancel_and_wait(
    task: asyncio.Future[T], *, poll: float = 1.0, acknowledged: Callable[[], bool] | None = None
) -> None:
    """Cancel ``task`` and wait until it is done, cancelling again if it swallowed the cancel.

    The task's result or error is not raised (call ``task.result()`` if it matters; it is marked
    retrieved, so asyncio does not log it). A cancellation of the caller while it waits cancels
    ``task`` once more and propagates.

    Args:
        task: The task (or future) to stop.
        poll: Seconds between checks that the cancel was taken.
        acknowledged: Returns True once the task saw the cancel and is cleaning up: it is then
            waited for without being cancelled again (a second cancel would cut its clean-up short).
    """
    while not task.done():
        if acknowledged is None or not acknowledged():
            task.cancel()
        try:
            await asyncio.wait({task}, timeout=poll)
        except asyncio.CancelledError:
            task.cancel()
            raise
    if not task.cancelled():
        task.exception()


async def finish_through_cancels(aw: Awaitable[T]) -> T:
    """Await ``aw`` to its end even if the caller is cancelled meanwhile (once or many times).

    For clean-up that must not be cut short: :func:`cancel_and_wait` cancels a task again every
    ``poll`` seconds, and a clean-up that awaits a slow engine (a container that is still starting)
    would otherwise stop half-way and leave what it was cleaning up. ``aw`` bounds the wait (it must
    end on its own). The caller goes on after it; a cancel received meanwhile is raised then.

    Raises:
        asyncio.CancelledError: The caller was cancelled while it waited (after ``aw`` is done).
    """
    task = asyncio.ensure_future(aw)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: asyncio does not log it
        raise asyncio.CancelledError
    return task.result()
