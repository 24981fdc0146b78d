"""Shared pieces of the runner tests: a blueprint, a toolkit, contexts, a runner factory."""

from __future__ import annotations

import textwrap
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.model import stop_background_tasks
from codeact.engine.model.scripted import ScriptedReplies
from codeact.engine.runner import BlueprintRunner, Interactions, RunnerContext, RunnerResult
from codeact.toolkits import operation, toolkit

BLUEPRINT = """\
version: codeact.agent/v1
id: shop-runner
name: Shop assistant
model: {{provider: scripted, model: "{model}"}}
instructions:
  variables:
    shop: Example shop
toolkits:
  - ref: system
  - ref: inventory
  - ref: orders
    approval: ask
workflow: {{mode: codeact, maxTurns: 6, codeact: {{thought: "off"}}}}
"""


@toolkit(name="inventory", description="The shop's stock")
class Inventory:
    @operation
    async def stock(self, sku: str) -> int:
        """Units in stock.

        Args:
            sku: The article.
        """
        return {"A-1": 3, "B-2": 0}.get(sku, 0)


@toolkit(name="orders", description="Orders")
class Orders:
    @operation
    async def place(self, sku: str, qty: int) -> dict[str, Any]:
        """Place an order.

        Args:
            sku: The article.
            qty: How many.
        """
        return {"order_id": "O-1", "sku": sku, "qty": qty}


def code(source: str, prose: str = "") -> str:
    """A reply the way a model writes it: optional prose, then a fenced Python block."""
    block = "```python\n" + textwrap.dedent(source).strip("\n") + "\n```"
    return f"{prose}\n{block}" if prose else block


def context(
    text: str | None = "How many A-1?",
    *,
    run_id: str = "run-1",
    conversation: str | None = "chat-42",
    deadline_in: float | None = 60.0,
    **extra: Any,
) -> RunnerContext:
    """A run context as a chat host sends it."""
    data: dict[str, Any] = {
        "run_id": run_id,
        "trigger": {"type": "message.received", "source": "platform"},
        "event": {"event_id": f"ev-{run_id}", "event_type": "message.received", "source": "platform"},
        "conversation": {"conversation_id": conversation} if conversation else None,
        "actor": {"actor_type": "user", "actor_id": "u-7", "actor_name": "Ada"},
        "input": {"text": text},
        "delivery": {"surface": "platform", "supports_streaming": True},
        "resources": {},
        "runtime": {"deadline_at": time.time() + deadline_in if deadline_in is not None else None},
    }
    data.update(extra)
    return RunnerContext.model_validate(data)


async def collect(
    runner: BlueprintRunner,
    ctx: RunnerContext,
    *,
    run_id: str | None = None,
    interactions: Interactions | None = None,
    on_result: Callable[[RunnerResult], Any] | None = None,
    host: Any = None,
) -> list[RunnerResult]:
    out: list[RunnerResult] = []
    async for result in runner.run(ctx, run_id=run_id or ctx.run_id, interactions=interactions, host=host):
        out.append(result)
        if on_result is not None:
            await on_result(result)
    return out


def sent(runner: BlueprintRunner) -> str:
    """Everything the runner's scripted model was sent in its last request."""
    script: ScriptedReplies = runner.test_script  # type: ignore[attr-defined]
    return "\n".join(str(m.get("content", "")) for m in script.requests[-1].messages)


def types(results: Sequence[RunnerResult]) -> list[str]:
    return [r.type for r in results]


MakeRunner = Callable[..., BlueprintRunner]


@pytest.fixture
async def make_runner(tmp_path: Path) -> AsyncIterator[MakeRunner]:
    """Build a runner of ``BLUEPRINT`` with scripted replies over a SQLite store in ``tmp_path``."""
    made: list[BlueprintRunner] = []
    keep: list[ScriptedReplies] = []

    def build(replies: Sequence[Any], *, blueprint: str = BLUEPRINT, **options: Any) -> BlueprintRunner:
        script = ScriptedReplies(list(replies))
        keep.append(script)
        path = tmp_path / f"agent-{len(made)}.yaml"
        path.write_text(blueprint.format(model=script.model))
        options.setdefault("store", f"sqlite:///{tmp_path / 'sessions.db'}")
        options.setdefault("isolation", "process")
        runner = BlueprintRunner.from_blueprint(path, toolkits=[Inventory(), Orders()], **options)
        made.append(runner)
        runner.test_script = script  # type: ignore[attr-defined]
        return runner

    yield build
    for runner in made:
        await runner.aclose()
    await stop_background_tasks()
