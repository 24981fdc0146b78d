"""What :class:`~codeact.engine.agent.Agent` and :class:`~codeact.engine.flow.FlowAgent` share about their lifetime.

Both own what ``from_blueprint`` opened (model clients, the store) and the event loop of ``run_sync``;
both close them in ``aclose``/``close`` and as (async) context managers.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterable
from typing import Self

from codeact.engine.errors import CodeactError


class Lifecycle:
    """Owned resources, the ``run_sync`` loop, and closing them (a mixin; ``_init_lifecycle`` in ``__init__``)."""

    _owned: tuple[object, ...]
    _runner: asyncio.Runner | None

    def _init_lifecycle(self) -> None:
        self._owned = ()
        self._runner = None

    def own(self, resources: Iterable[object]) -> None:
        """Take ``resources`` (model clients, a store, MCP servers: anything with ``aclose()`` or ``close()``).

        They are closed, in the order given, by :meth:`aclose` / :meth:`close`, after those owned before.
        """
        self._owned = (*self._owned, *resources)

    def _sync_runner(self, misuse: str) -> asyncio.Runner:
        """The loop ``run_sync`` runs on (made once); ``misuse`` is the error when a loop already runs here."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise CodeactError(misuse)
        if self._runner is None:
            self._runner = asyncio.Runner()
            # Dropped without close(), it still closes its loop (and the loop's sockets).
            weakref.finalize(self, _close_runner, self._runner)
        return self._runner

    async def aclose(self) -> None:
        """Close what :meth:`from_blueprint` opened (model clients, the store)."""
        owned, self._owned = self._owned, ()
        for resource in owned:
            await close_resource(resource)

    def close(self) -> None:
        """Close what was opened, and the event loop of ``run_sync`` (from synchronous code).

        Called inside a running event loop (a ``with`` block in a notebook or an async app, often after
        ``run_sync`` refused to run there), it raises nothing and leaves no coroutine un-awaited: the
        ``run_sync`` loop is closed as it is and the resources are closed by a task on the running loop
        (``async with`` / ``await agent.aclose()`` close them before returning).
        """
        runner, self._runner = self._runner, None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            if runner is not None:
                _close_runner(runner)
            if self._owned:
                task = running.create_task(self.aclose())
                _closing.add(task)  # a task only weakly referenced by its loop may be collected before it ends
                task.add_done_callback(_closed)
            return
        if runner is None:
            if self._owned:
                asyncio.run(self.aclose())
            return
        try:
            runner.run(self.aclose())
        finally:
            runner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def close_resource(resource: object) -> None:
    """Close ``resource``: its ``aclose()`` when it has one, else its ``close()`` (awaited when it is a coroutine)."""
    closer = getattr(resource, "aclose", None) or getattr(resource, "close")  # noqa: B009 - any owned object
    await closer()


_closing: set[asyncio.Task[None]] = set()


def _closed(task: asyncio.Task[None]) -> None:
    _closing.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a failed close is not reported again at garbage collection


def _close_runner(runner: asyncio.Runner) -> None:
    """Close a dropped agent's ``run_sync`` loop; inside another running loop only the loop itself is closed."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here: the runner can finish its loop's async generators first
        with contextlib.suppress(RuntimeError):
            runner.close()
        return
    # Runner.close() would create a coroutine it cannot run here (a "never awaited" warning).
    loop: asyncio.AbstractEventLoop | None = getattr(runner, "_loop", None)
    if loop is not None and not loop.is_closed() and not loop.is_running():
        loop.close()
