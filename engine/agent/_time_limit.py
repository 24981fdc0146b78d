"""The run's time limit (``workflow.runSeconds``): past it the run stops and fails with ``run.time_limit``.

The round's own limit (seconds of code, host time not counted) is the sandbox's business
(:meth:`codeact.sandbox.Sandbox.execute`); this one is wall-clock time over everything the run does:
model calls, rounds, toolkit calls, approvals and sub-agents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from codeact.engine.agent.context import Outcome, RunContext

__all__ = ["run_within"]


async def run_within(seconds: float | None, loop: Coroutine[Any, Any, Outcome], ctx: RunContext) -> Outcome:
    """Await the run's ``loop`` for at most ``seconds`` (None: no limit).

    When the time is up the loop is cancelled (the round in progress is recorded as ``interrupted``
    with the toolkit calls it completed) and the run fails with ``run.time_limit``.
    """
    if seconds is None:
        return await loop
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await loop
    except TimeoutError:
        if not scope.expired():
            raise  # a TimeoutError of the run's own, not the limit
    reason = f"the run passed its time limit of {seconds:g} s (workflow.runSeconds)"
    await ctx.record_interrupted(reason=reason)
    message = f"{reason}; the round in progress was stopped. Raise workflow.runSeconds, or continue the session"
    return Outcome(status="failed", reason="time_limit", error={"code": "run.time_limit", "message": message})
