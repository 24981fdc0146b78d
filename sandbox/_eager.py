"""The channel's eager request runner and its memory release (private helpers of ``codeact.sandbox.channel``)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import types
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["Runner", "release_memory"]


_malloc_trim: Any = None


def release_memory() -> None:
    """Give the C heap's free memory back to the system (glibc ``malloc_trim``; elsewhere a no-op).

    Large frames (a 5 MiB argument, an oversized line) are decoded in blocks that glibc keeps
    in its heap once freed: without this the host's RSS stays at its peak after bridge abuse.
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            trim = ctypes.CDLL(None).malloc_trim
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            _malloc_trim = trim
    if _malloc_trim:
        _malloc_trim(0)


class Runner:
    """A task that request handlers start in, right inside ``data_received`` (an "eager" task).

    Handlers must run inside a task (tools use ``asyncio.timeout``, anyio, ...), but a task per
    call costs a task, a scheduled first step and a done callback: three event-loop iterations
    before the answer leaves. Instead the handler's first step runs at once with this idle task
    entered as the current task (what ``eager_start`` does from Python 3.12 on), in a fresh copy
    of the context. A handler that finishes there (most calls) has sent its answer, and the runner
    stays idle for the next call. A handler that suspends is handed to the runner's task, which
    drives it to its end (so the task the handler saw is the one running it); the channel then
    makes a new runner for the next call.
    """

    __slots__ = ("_tasks", "_work", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, tasks: set[asyncio.Task[None]]) -> None:
        self._tasks = tasks
        self._work: asyncio.Future[tuple[Coroutine[object, object, None], object, contextvars.Context]] = (
            loop.create_future()
        )
        self.task: asyncio.Task[None] = loop.create_task(self._drive())

    def start(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[object, object, None]) -> bool:
        """Run ``coro`` up to its first suspension in this runner's task; True when it finished."""
        context = contextvars.copy_context()
        task = self.task
        _enter_task(loop, task)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            return True
        finally:
            _leave_task(loop, task)
        self._tasks.add(task)
        self._work.set_result((coro, yielded, context))
        return False

    async def _drive(self) -> None:
        coro, yielded, context = await self._work
        try:
            await _resume(coro, yielded, context)
        finally:
            self._tasks.discard(self.task)


@types.coroutine
def _resume(
    coro: Coroutine[object, object, None], yielded: object, context: contextvars.Context
) -> Generator[object, object, None]:
    """Continue a coroutine whose first step already ran (``yielded`` is its first suspension)."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            context.run(coro.close)
            raise
        except BaseException as exc:  # cancellation and friends go into the coroutine
            try:
                yielded = context.run(coro.throw, exc)
            except StopIteration:
                return
        else:
            try:
                yielded = context.run(coro.send, sent)
            except StopIteration:
                return
