"""The round's clock counts the code's own time: paused while a call is in flight on the host."""

from __future__ import annotations

import asyncio
from typing import Any

from codeact.sandbox import Limits, SubprocessSandbox


class Waits:
    """A bridge whose one operation answers after ``seconds``; counts the calls in flight."""

    def manifest(self) -> dict[str, Any]:
        ops = {"wait": {"params": ["seconds"], "required": ["seconds"]}}
        return {"toolkits": {"host": {"description": "waits on the host", "operations": ops}}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        seconds = params["arguments"]["seconds"]
        await asyncio.sleep(seconds)
        return seconds


async def test_waiting_on_the_host_is_not_the_codes_time() -> None:
    async with SubprocessSandbox(bridge=Waits(), limits=Limits(wall_s=1.0)) as box:
        waited = await box.execute("a = host.wait(0.8)\nb = await host.wait(0.8)\nprint(a + b)")
        assert (waited.status, waited.stdout) == ("ok", "1.6\n")
        assert waited.duration_s >= 1.6
        channel = box._worker.channel if box._worker is not None else None
        assert channel is not None and channel.in_flight == 0 and channel.paused_s() >= 1.6

        # Calls that overlap pause the clock once; code between them runs on it.
        gathered = await box.execute(
            "import asyncio\nr = await asyncio.gather(host.wait(1.2), host.wait(0.4), host.wait(0.9))\nprint(len(r))"
        )
        assert (gathered.status, gathered.stdout) == ("ok", "3\n")

        busy = await box.execute("n = 0\nwhile True:\n    n += 1\n")
        assert busy.status == "deadline_exceeded"
        assert busy.error is not None and busy.error.message.startswith(
            "the round ran past its 1 s limit of time running code (waiting on toolkit calls not counted)"
        )


async def test_the_wall_clock_counts_the_calls_too() -> None:
    # How a round recorded under the old rule replays (engine/replay.py): the call is cut off.
    async with SubprocessSandbox(bridge=Waits(), limits=Limits(wall_s=1.0)) as box:
        result = await box.execute("a = host.wait(5)", clock="wall")
        assert result.status == "deadline_exceeded"
        assert result.error is not None and result.error.message.startswith(
            "the round ran past its 1 s limit of time; the sandbox was killed"
        )
        after = await box.execute("print('fresh')")
        assert after.stdout == "fresh\n"
