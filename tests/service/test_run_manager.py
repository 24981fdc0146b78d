"""RunManager in-process (the API the console and the queue build on), with a scripted model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.model.scripted import ScriptedReplies
from codeact.engine.runner import BlueprintRunner, RunnerContext
from codeact.engine.service import RunManager, ServiceError
from tests.engine.slow_toolkit import Slow
from tests.service.conftest import BLUEPRINT, RUNNER
from tests.service.helpers import context

WAITING = "I ping the slow service.\n```python\npong = await slow.ping()\n```\n"
FINISH = "Approved, so I answer.\n```python\nsystem.finish(pong)\n```\n"


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[tuple[BlueprintRunner, ScriptedReplies]]:
    script = ScriptedReplies([WAITING, FINISH, WAITING])
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    built = BlueprintRunner.from_blueprint(
        blueprint, toolkits=[Slow()], store=f"sqlite:///{tmp_path / 's.db'}", model=script.model
    )
    yield built, script
    await built.aclose()


async def _until_waiting(manager: RunManager, run_id: str) -> None:
    while (info := await manager.get(run_id)) is not None and info.status != "waiting":
        assert not info.done, info
        await asyncio.sleep(0.02)


async def test_events_are_buffered_then_live_each_once_and_the_grants_live_as_long_as_the_run(
    runner: tuple[BlueprintRunner, ScriptedReplies],
) -> None:
    built, _ = runner
    manager = RunManager({RUNNER: built})
    ctx = RunnerContext.model_validate(context("Ping.", conversation="c1"))
    info = await manager.start(RUNNER, ctx)
    assert (info.run_id, info.runner_id, info.status) == (ctx.run_id, RUNNER, "running")
    assert manager.authorizations.get(ctx.run_id) is not None
    await _until_waiting(manager, ctx.run_id)
    waiting = await manager.get(ctx.run_id)
    assert waiting is not None and len(waiting.pending) == 1
    assert (await manager.by_session(info.session_id)) == waiting
    seen = [e async for e in _take(manager.events(ctx.run_id), count=2)]
    request_id = waiting.pending[0]["interaction_id"]
    done = await manager.interact(ctx.run_id, {"request_id": request_id, "data": {"allow": True}})
    assert done.status in ("running", "completed")
    rest = [e async for e in manager.events(ctx.run_id, after=seen[-1].sequence or 0)]
    everything = [e async for e in manager.events(ctx.run_id)]
    assert seen + rest == everything
    assert [e.sequence for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1].type == "run.completed"
    final = await manager.get(ctx.run_id)
    assert final is not None and final.status == "completed" and final.finished_at is not None
    assert manager.authorizations.get(ctx.run_id) is None  # unregistered when the run ended
    with pytest.raises(ServiceError) as caught:
        await manager.interact(ctx.run_id, {"request_id": request_id, "data": {}})
    assert caught.value.code == "service.run_finished"
    with pytest.raises(ServiceError, match="runner 'nope' not found"):
        await manager.start("nope", ctx)


async def test_close_cancels_the_running_runs(runner: tuple[BlueprintRunner, ScriptedReplies]) -> None:
    built, script = runner
    script.take("any")  # skip to the last WAITING reply
    script.take("any")
    manager = RunManager({RUNNER: built})
    ctx = RunnerContext.model_validate(context("Ping.", conversation="c2"))
    await manager.start(RUNNER, ctx)
    await _until_waiting(manager, ctx.run_id)
    await manager.close()
    info = await manager.get(ctx.run_id)
    assert info is not None and info.status == "cancelled"
    assert info.error == {"code": "cancelled", "message": "the run was cancelled", "retryable": False}
    assert [e.type async for e in manager.events(ctx.run_id)][-1] == "run.failed"


async def _take(events: AsyncIterator[Any], *, count: int) -> AsyncIterator[Any]:
    taken = 0
    async with contextlib.aclosing(events) as opened:  # type: ignore[type-var]
        async for event in opened:
            yield event
            taken += 1
            if taken == count:
                return
