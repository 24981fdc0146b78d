"""Synchronous (``def``) operations: inline once proven fast, in a thread otherwise, never blocking the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox.runtime import codec
from codeact.toolkits import ToolkitBridge, ToolkitRegistry, operation, toolkit
from codeact.toolkits._sync import INLINE_MAX_S, PROBE_CALLS, SLOW_PROBES, SyncOperation


@toolkit(name="ops", description="Synchronous operations")
class Ops:
    def __init__(self) -> None:
        self.threads: list[int] = []
        self.delay = 0.0

    @operation
    def fast(self, n: int) -> int:
        """Return n."""
        self.threads.append(threading.get_ident())
        return n

    @operation
    def sometimes_slow(self, n: int) -> int:
        """Return n, after ``delay`` seconds."""
        self.threads.append(threading.get_ident())
        if self.delay:
            time.sleep(self.delay)
        return n

    @operation
    def slow(self, seconds: float) -> float:
        """Sleep (a blocking call)."""
        time.sleep(seconds)
        return seconds

    @operation
    def runs_a_loop(self, n: int) -> int:
        """Uses asyncio.run inside, as sync wrappers of async code do."""

        async def inner() -> int:
            await asyncio.sleep(0)
            return n * 2

        return asyncio.run(inner())


def _call(bridge: ToolkitBridge, op: str, **arguments: Any) -> Any:
    params = {"toolkit": "ops", "operation": op, "arguments": {k: codec.encode(v) for k, v in arguments.items()}}
    return bridge.handle("call", params)


def _bridge(ops: Ops) -> ToolkitBridge:
    return ToolkitBridge(ToolkitRegistry([ops]), grants={"ops": "*"}, session_id="sync")


async def test_a_fast_operation_runs_inline_after_its_probe_calls() -> None:
    ops = Ops()
    bridge = _bridge(ops)
    loop_thread = threading.get_ident()
    for i in range(PROBE_CALLS + 5):
        assert await _call(bridge, "fast", n=i) == i
    assert all(t != loop_thread for t in ops.threads[:PROBE_CALLS])  # probed in a worker thread
    assert ops.threads[-5:] == [loop_thread] * 5  # then inline


async def test_an_inline_operation_that_turns_slow_goes_back_to_the_thread_for_good() -> None:
    ops = Ops()
    bridge = _bridge(ops)
    loop_thread = threading.get_ident()
    for i in range(PROBE_CALLS + 1):
        await _call(bridge, "sometimes_slow", n=i)
    assert ops.threads[-1] == loop_thread
    ops.delay = INLINE_MAX_S * 3
    for i in range(SLOW_PROBES + 1):  # the first blocks the loop, once; the others run in the thread
        await _call(bridge, "sometimes_slow", n=i)
    assert ops.threads[-SLOW_PROBES:] != [loop_thread] * SLOW_PROBES
    ops.delay = 0.0
    ops.threads.clear()
    for i in range(PROBE_CALLS + 5):
        await _call(bridge, "sometimes_slow", n=i)
    assert loop_thread not in ops.threads


async def test_a_slow_operation_never_blocks_the_event_loop() -> None:
    bridge = _bridge(Ops())
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(ticker())
    try:
        for _ in range(PROBE_CALLS + 2):
            before = ticks
            assert await _call(bridge, "slow", seconds=0.05) == 0.05
            assert ticks > before  # the loop kept running while the operation slept
    finally:
        task.cancel()


async def test_asyncio_run_inside_an_inline_operation_works() -> None:
    bridge = _bridge(Ops())
    for i in range(PROBE_CALLS + 3):
        assert await _call(bridge, "runs_a_loop", n=i) == i * 2
    assert asyncio.get_running_loop().is_running()


async def test_an_operation_declared_blocking_always_runs_in_a_thread() -> None:
    seen: list[int] = []

    def op() -> None:
        seen.append(threading.get_ident())

    op.blocking = True  # type: ignore[attr-defined]
    runner = SyncOperation(op)
    for _ in range(PROBE_CALLS + 3):
        await runner({})
    assert threading.get_ident() not in seen and not runner.inline


async def test_sandbox_code_calls_sync_operations_both_ways() -> None:
    ops = Ops()
    code = (
        "total = 0\n"
        f"for i in range({PROBE_CALLS * 2}):\n"
        "    total += await ops.fast(i)\n"
        "def f(i):\n"
        "    return ops.fast(i)\n"
        f"plain = sum(f(i) for i in range({PROBE_CALLS}))\n"
        "slow = ops.slow(0.01)\n"
    )
    async with SubprocessSandbox(bridge=_bridge(ops)) as box:
        result = await box.execute(code)
    assert result.error is None, result.error
    assert result.variables["total"] == sum(range(PROBE_CALLS * 2))
    assert result.variables["plain"] == sum(range(PROBE_CALLS))
    assert result.variables["slow"] == 0.01
