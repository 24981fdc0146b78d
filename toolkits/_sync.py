"""How a synchronous (``def``) toolkit operation runs: in a worker thread, or inline once proven fast.

A thread hand-off per call (``asyncio.to_thread``) costs more than the whole bridge round trip of
a trivial operation: 190-260 us per call against 71 us for an ``async def`` one. Most ``def``
operations are trivial (look a value up, format a string), so each operation is watched:

* it runs in a worker thread (the event loop never waits on it), timed there, until
  :data:`PROBE_CALLS` of its calls took less than :data:`FAST_S` each; after :data:`SLOW_PROBES`
  slower ones it stays in the thread for good;
* once proven fast it runs inline, on the event loop's thread, with the running loop hidden
  (``asyncio.run`` and friends inside the tool work as they do in a thread), still timed;
* an inline call longer than :data:`INLINE_MAX_S` sends the operation back to the thread to be
  proven again, and the second time for good: a slow operation blocks the event loop at most
  twice, one call each time (a fast one preempted on a loaded machine is simply proven again).

An operation can opt out (always a thread) with ``blocking = True`` on the function.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["FAST_S", "INLINE_MAX_S", "PROBE_CALLS", "SLOW_PROBES", "SyncOperation"]

PROBE_CALLS: Final = 16
"""Calls run (and timed) in a worker thread before an operation may run inline."""
FAST_S: Final = 0.0005
"""Each probe call must take less than this for the operation to run inline."""
SLOW_PROBES: Final = 3
"""Probe calls slower than ``FAST_S`` after which the operation stays in the thread for good."""
INLINE_MAX_S: Final = 0.002
"""An inline call longer than this sends the operation back to the thread (the second time for good)."""

_perf = time.perf_counter
_get_running_loop = asyncio.events._get_running_loop
_set_running_loop = asyncio.events._set_running_loop


class SyncOperation:
    """Runs one synchronous operation for the event loop (see the module docstring).

    Args:
        method: The bound method or function.
    """

    __slots__ = ("_fast_probes", "_slow_inline", "_slow_probes", "inline", "method", "pinned")

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.inline = False
        """True once proven fast: calls run on the event loop's thread."""
        self.pinned = bool(getattr(method, "blocking", False))
        """True when the operation must always run in a thread (declared, or seen slow inline)."""
        self._fast_probes = 0
        self._slow_probes = 0
        self._slow_inline = 0

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        """Run the operation with ``arguments`` and return its result."""
        if self.inline:
            return self._inline(arguments)
        return await asyncio.to_thread(self._probe, arguments)

    def _inline(self, arguments: dict[str, Any]) -> Any:
        loop = _get_running_loop()
        _set_running_loop(None)  # as in a thread: no running loop (asyncio.run inside the tool works)
        started = _perf()
        try:
            return self.method(**arguments)
        finally:
            _set_running_loop(loop)
            if _perf() - started > INLINE_MAX_S:
                self.inline = False
                self._fast_probes = 0
                self._slow_inline += 1
                self.pinned = self._slow_inline >= 2

    def _probe(self, arguments: dict[str, Any]) -> Any:
        """A call in the worker thread, timed."""
        started = _perf()
        try:
            return self.method(**arguments)
        finally:
            if self.pinned:
                pass
            elif _perf() - started >= FAST_S:
                self._slow_probes += 1
                self.pinned = self._slow_probes >= SLOW_PROBES
            else:
                self._fast_probes += 1
                self.inline = self._fast_probes >= PROBE_CALLS
