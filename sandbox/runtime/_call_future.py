"""Inside the sandbox: a toolkit call made while an event loop runs (standard library only).

Apart from :mod:`codeact.sandbox.runtime.proxy` because it subclasses ``asyncio.Future``: the proxy
imports this module only once a loop runs a call, so a round without one never imports asyncio.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Protocol

__all__ = ["CallFuture"]


class _Bridge(Protocol):  # proxy.Bridge (not imported: proxy imports this module)
    def _wait_inline(self, target: CallFuture) -> None: ...


class CallFuture(asyncio.Future):  # type: ignore[type-arg]
    """A call made while an event loop runs: a future that, awaited directly, may skip the loop.

    ``asyncio.gather`` and friends use it as the plain future it is. A direct ``await`` blocks on
    the socket instead of going round the event loop when the loop has nothing else to do
    (``Bridge._wait_inline``): a sequential call then costs one frame each way and no loop step.
    """

    __slots__ = ("_bridge",)
    _bridge: _Bridge

    def __await__(self) -> Generator[object, None, object]:
        if not self.done():
            self._bridge._wait_inline(self)
        return (yield from super().__await__())

    __iter__ = __await__
