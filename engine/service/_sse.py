"""Server-sent events: one result envelope per SSE event, ``id:`` = its sequence.

The stream is pumped by its own task into a queue, so a keep-alive comment can be written while no
envelope comes (proxies and clients see a live connection, and a vanished client is noticed) without
cancelling the iteration of the run's events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from codeact.sandbox.aio import wait_for

if TYPE_CHECKING:
    from codeact.engine.runner import RunnerResult

__all__ = ["KEEPALIVE_S", "SSE_HEADERS", "envelope_json", "parse_last_event_id", "sse_stream"]

KEEPALIVE_S = 15.0
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
_DONE = object()


def envelope_json(envelope: RunnerResult) -> dict[str, object]:
    """The envelope as the JSON object the API sends."""
    return envelope.model_dump(mode="json", exclude_none=True)


def _frame(envelope: RunnerResult) -> bytes:
    data = json.dumps(envelope_json(envelope), ensure_ascii=False, separators=(",", ":"))
    return f"id: {envelope.sequence}\nevent: {envelope.type}\ndata: {data}\n\n".encode()


def parse_last_event_id(value: str | None) -> int:
    """The sequence a client last saw (``Last-Event-ID`` or ``?after=``); 0 when absent or not a number."""
    if value is None:
        return 0
    try:
        return max(0, int(value.strip()))
    except ValueError:
        return 0


async def sse_stream(events: AsyncIterator[RunnerResult], *, keepalive_s: float = KEEPALIVE_S) -> AsyncIterator[bytes]:
    """SSE frames of ``events``, with a ``: keep-alive`` comment after ``keepalive_s`` of silence."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for envelope in events:
                await queue.put(envelope)
        except Exception as exc:  # surfaced to the reader below
            await queue.put(exc)
        finally:
            await queue.put(_DONE)

    task = asyncio.get_running_loop().create_task(pump())
    try:
        while True:
            try:
                item = await wait_for(queue.get(), keepalive_s)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if item is _DONE:
                return
            if isinstance(item, Exception):
                raise item
            yield _frame(item)
    finally:
        task.cancel()
        await asyncio.wait({task})  # does not re-raise the pump's CancelledError
