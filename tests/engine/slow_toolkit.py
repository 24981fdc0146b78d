"""A toolkit whose call can hang past a round's deadline (tests/engine/test_replay_exact.py)."""

from __future__ import annotations

import asyncio

from codeact.toolkits import operation, toolkit


@toolkit(name="slow", description="A service that can hang")
class Slow:
    @operation
    async def ping(self) -> str:
        """Answer at once."""
        return "pong"

    @operation
    async def wait(self, seconds: float) -> str:
        """Answer after seconds.

        Args:
            seconds: How long to wait.
        """
        await asyncio.sleep(seconds)
        return "late"
