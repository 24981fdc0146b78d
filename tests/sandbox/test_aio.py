"""sandbox.aio: a cancel that races with the awaited call completing is never lost."""

from __future__ import annotations

import asyncio

import pytest

from codeact.sandbox.aio import cancel_and_wait, wait_for


async def test_wait_for_keeps_a_cancel_that_arrives_as_the_call_completes() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(wait_for(fut, 10))
    await asyncio.sleep(0)  # the task waits on fut
    fut.set_result(1)
    task.cancel()  # in the same loop iteration: Python 3.11's asyncio.wait_for returns 1 here
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_wait_for_returns_the_result_and_times_out() -> None:
    assert await wait_for(asyncio.sleep(0, result="ok"), 5) == "ok"
    assert await wait_for(asyncio.sleep(0, result="none"), None) == "none"
    with pytest.raises(TimeoutError):
        await wait_for(asyncio.sleep(10), 0.01)


async def test_wait_for_inside_a_cancelled_task_still_times_out() -> None:
    # A clean-up running after the task took a cancel (recording an interrupted round) stays bounded.
    outcome: list[str] = []

    async def body() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            try:
                await wait_for(asyncio.sleep(10), 0.01)
            except TimeoutError:
                outcome.append("timeout")
            raise

    task = asyncio.create_task(body())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome == ["timeout"]


async def test_cancel_and_wait_repeats_a_swallowed_cancel() -> None:
    steps: list[str] = []

    async def swallow_once() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            steps.append("swallowed")
        await asyncio.sleep(10)

    task = asyncio.create_task(swallow_once())
    await asyncio.sleep(0)
    await cancel_and_wait(task, poll=0.01)
    assert task.cancelled() and steps == ["swallowed"]


async def test_cancel_and_wait_leaves_an_acknowledged_clean_up_alone() -> None:
    state = {"cleaning": False, "cleaned": False}

    async def with_clean_up() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            state["cleaning"] = True
            await asyncio.sleep(0.05)  # longer than the poll: a second cancel would cut it short
            state["cleaned"] = True
            raise

    task = asyncio.create_task(with_clean_up())
    await asyncio.sleep(0)
    await cancel_and_wait(task, poll=0.01, acknowledged=lambda: state["cleaning"])
    assert task.cancelled() and state["cleaned"]


async def test_cancel_and_wait_keeps_the_error_for_the_caller() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise ValueError("clean-up failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    with pytest.raises(ValueError, match="clean-up failed"):
        task.result()
