"""The fast paths of a toolkit call, on both sides, keep the semantics of the slow ones.

Runtime: an awaited call blocks on the socket only while the event loop has nothing else to do;
timers, other tasks and gathered calls still make progress. Host: handlers start inside an
"eager" runner task; one that suspends keeps that task to its end (timeouts work across the
suspension), context variables do not leak between calls, and nothing is left pending on close.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codeact.sandbox import ExecutionResult, SubprocessSandbox
from codeact.sandbox.channel import Channel
from codeact.sandbox.runtime import protocol as p

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("_SEEN", default="unset")


class Echo:
    """``echo.echo(value)`` at once; ``echo.slow(value)`` after a short sleep on the host."""

    def manifest(self) -> dict[str, Any]:
        one = {"params": ["value"], "required": ["value"]}
        ops = {"echo": one, "slow": one}
        return {"toolkits": {"echo": {"description": "echo", "operations": ops}}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        if params["operation"] == "slow":
            await asyncio.sleep(0.05)
        return params["arguments"]["value"]


@pytest.fixture
async def box() -> AsyncIterator[SubprocessSandbox]:
    sandbox = SubprocessSandbox(bridge=Echo(), isolation="process")
    yield sandbox
    await sandbox.aclose()


def ok(result: ExecutionResult) -> ExecutionResult:
    assert result.status == "ok", result.error
    return result


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            "import asyncio\nticks = []\n"
            "async def ticker():\n    for i in range(5):\n        await asyncio.sleep(0.001)\n        ticks.append(i)\n"
            "t = asyncio.create_task(ticker())\n"
            "out = [await echo.echo(i) for i in range(200)]\nawait t\nres = [out == list(range(200)), ticks]",
            [True, [0, 1, 2, 3, 4]],
            id="timer-in-another-task",
        ),
        pytest.param(
            "import asyncio\n"
            "async def worker(k):\n    return [await echo.echo(k * 100 + i) for i in range(50)]\n"
            "a, b = await asyncio.gather(worker(0), worker(1))\n"
            "res = [a == list(range(50)), b == list(range(100, 150))]",
            [True, True],
            id="two-tasks-awaiting-in-turn",
        ),
        pytest.param(
            "import asyncio\nslow = asyncio.ensure_future(echo.slow('s'))\n"
            "fast = [await echo.echo(i) for i in range(20)]\nres = [await slow, fast == list(range(20))]",
            ["s", True],
            id="direct-awaits-while-a-slow-call-is-in-flight",
        ),
        pytest.param(
            "import asyncio\nasync with asyncio.timeout(5):\n    a = await echo.echo(1)\n"
            "b = await asyncio.wait_for(echo.slow(2), 5)\nres = [a, b]",
            [1, 2],
            id="under-a-timeout",
        ),
        pytest.param(
            "import asyncio\nslow = asyncio.ensure_future(echo.slow('s'))\n"
            "def inner(i):\n    return echo.echo(i)\nfast = [inner(i) for i in range(20)]\n"
            "res = [await slow, fast == list(range(20))]",
            ["s", True],
            id="sync-style-while-a-task-is-pending",
        ),
        pytest.param(
            "import asyncio\nres = await asyncio.gather(echo.slow(0), *[echo.echo(i) for i in range(1, 50)])\n"
            "res = res == list(range(50))",
            True,
            id="gather-fast-and-slow",
        ),
    ],
)
async def test_runtime_call_paths(box: SubprocessSandbox, code: str, expected: Any) -> None:
    result = ok(await box.execute(code, deadline=30))
    assert result.variables["res"] == expected


class Probe:
    """Host handler that checks what a tool sees: its task across a suspension, context variables."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.same_task: list[bool] = []

    def manifest(self) -> dict[str, Any]:
        return {"toolkits": {}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        self.seen.append(_SEEN.get())
        _SEEN.set(str(params["arguments"]["value"]))
        if params["operation"] == "suspend":
            task = asyncio.current_task()
            async with asyncio.timeout(5):
                await asyncio.sleep(0.01)
            self.same_task.append(asyncio.current_task() is task and task is not None)
        elif params["operation"] == "expire":
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        return params["arguments"]["value"]


class _Peer:
    """A raw runtime connection: authenticates, then sends batches of frames and reads the answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, channel: Channel) -> _Peer:
        reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
        peer = cls(reader, writer)
        assert "result" in (await peer.exchange([p.request(0, "auth", {"token": channel.token})]))[0]
        return peer

    async def exchange(self, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.writer.write(b"".join(json.dumps(frame).encode() + b"\n" for frame in frames))
        await self.writer.drain()
        return [json.loads(await asyncio.wait_for(self.reader.readline(), 10)) for _ in frames]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def _call(id_: int, operation: str, value: Any) -> dict[str, Any]:
    return p.request(id_, "call", {"toolkit": "probe", "operation": operation, "arguments": {"value": value}})


async def test_host_handlers_keep_their_task_and_their_own_context() -> None:
    probe = Probe()
    channel = await Channel.open(probe)
    peer = await _Peer.connect(channel)
    try:
        frames = [_call(1, "now", "a"), _call(2, "suspend", "b"), _call(3, "now", "c"), _call(4, "suspend", "d")]
        answers = await peer.exchange(frames)
        expired = await peer.exchange([_call(5, "expire", "e"), _call(6, "now", "f")])
    finally:
        await peer.close()
        await channel.close()
    assert sorted((a["id"], a["result"]) for a in answers) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert probe.same_task == [True, True]
    assert probe.seen == ["unset"] * 6  # a context variable one call sets is invisible to the next
    assert expired[0]["id"] == 6 and expired[0]["result"] == "f"  # the fast call answered first
    assert expired[1]["error"]["code"] == p.INTERNAL_ERROR  # the handler's own TimeoutError, a host bug here


async def test_closing_the_channel_leaves_no_task_behind() -> None:
    channel = await Channel.open(Probe())
    peer = await _Peer.connect(channel)
    answers = await peer.exchange([_call(1, "now", 1)])
    assert answers[0]["result"] == 1
    await channel.close()
    await peer.close()
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


class _Sizes:
    """``size.of(value)``: the length of the value; the frames carrying it are big."""

    def manifest(self) -> dict[str, Any]:
        return {"toolkits": {}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        return len(params["arguments"]["value"])


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        pytest.param([3 * 1024 * 1024, 10], [3 * 1024 * 1024, 10], id="big-frame-in-pieces-then-a-small-one"),
        pytest.param([p.MAX_FRAME + 10, 10], ["payload_too_large", 10], id="oversized-in-pieces-then-resync"),
    ],
)
async def test_frames_arriving_in_pieces(sizes: list[int], expected: list[Any]) -> None:
    channel = await Channel.open(_Sizes())
    peer = await _Peer.connect(channel)
    try:
        data = b"".join(json.dumps(_call(i, "of", "x" * n)).encode() + b"\n" for i, n in enumerate(sizes, 1))
        for offset in range(0, len(data), 100_000):  # many reads per frame on the host
            peer.writer.write(data[offset : offset + 100_000])
            await peer.writer.drain()
            await asyncio.sleep(0)
        answers = [json.loads(await asyncio.wait_for(peer.reader.readline(), 30)) for _ in sizes]
    finally:
        await peer.close()
        await channel.close()
    got = [a["result"] if "result" in a else p.ERROR_NAMES[a["error"]["code"]] for a in answers]
    assert got == expected
