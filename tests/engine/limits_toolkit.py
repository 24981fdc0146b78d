"""A toolkit of real-world slow operations (tests/engine/test_time_limits.py)."""

from __future__ import annotations

import asyncio

from codeact.toolkits import operation, toolkit


@toolkit(name="ops", description="Deployments and other operations that take a while")
class Ops:
    @operation(timeout=60)
    async def deploy(self, version: str, seconds: float) -> str:
        """Deploy a version; takes a while.

        Args:
            version: The version to deploy.
            seconds: How long the deployment takes.
        """
        await asyncio.sleep(seconds)
        return f"deployed {version}"

    @operation(approval="ask", timeout=60)
    async def release(self, version: str) -> str:
        """Release a version to everyone (a person approves it first).

        Args:
            version: The version to release.
        """
        return f"released {version}"
