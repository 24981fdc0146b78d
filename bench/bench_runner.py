"""The AgentRunner layer: what a run costs through ``BlueprintRunner`` over the engine, mapping, checks.

* ``run``: ``RUNS`` one-round runs (scripted model, ``system.finish``, subprocess sandbox, SQLite)
  through ``Agent.run`` (the baseline, same process, same store) and through
  ``BlueprintRunner.run`` (context parsing, input composition, per-run agent, result mapping,
  deadline bookkeeping), interleaved. Medians of the wall time per run, the runner's overhead in
  ms and as a ratio to the baseline, and the median time to the first result.
* ``mapper``: ``ResultMapper.map`` over ``EVENTS`` engine events (tool call pairs), results per second.
* ``authorization``: ``AuthorizationRegistry.check`` calls per second (a model call of a registered run).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 15
EVENTS = 20_000
CHECKS = 20_000

_BLUEPRINT = """\
version: codeact.agent/v1
id: bench-runner
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}]
workflow: {{mode: codeact, maxTurns: 2, codeact: {{thought: "off"}}}}
"""
_FINISH = '```python\nsystem.finish("ok")\n```'


def _context(run_id: str) -> Any:
    from codeact.engine.runner import RunnerContext

    return RunnerContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": run_id, "event_type": "message.received", "source": "api"},
            "input": {"text": "Finish"},
            "delivery": {"surface": "api"},
            "runtime": {"deadline_at": time.time() + 120},
        }
    )


async def _runs(tmp: Path) -> dict[str, Any]:
    from codeact.engine.model.scripted import ScriptedReplies
    from codeact.engine.runner import BlueprintRunner

    script = ScriptedReplies([_FINISH] * (2 * RUNS + 2))
    path = tmp / "agent.yaml"
    path.write_text(_BLUEPRINT.format(model=script.model))
    runner = BlueprintRunner.from_blueprint(path, store=f"sqlite:///{tmp / 's.db'}", isolation="process")
    base: list[float] = []
    wrapped: list[float] = []
    first: list[float] = []
    try:
        async for _ in runner.agent.run("warm up"):
            pass
        for i in range(RUNS):
            started = time.perf_counter()
            async for _ in runner.agent.run("Finish"):
                pass
            base.append(time.perf_counter() - started)
            started = time.perf_counter()
            seen_first = None
            async for _ in runner.run(_context(f"b-{i}"), run_id=f"b-{i}"):
                if seen_first is None:
                    seen_first = time.perf_counter() - started
            wrapped.append(time.perf_counter() - started)
            first.append(seen_first or 0.0)
    finally:
        await runner.aclose()
    base_ms, runner_ms = statistics.median(base) * 1000, statistics.median(wrapped) * 1000
    return {
        "runs": RUNS,
        "agent_run_ms_median": round(base_ms, 2),
        "runner_run_ms_median": round(runner_ms, 2),
        "runner_overhead_ms": round(runner_ms - base_ms, 2),
        "runner_vs_agent_ratio": round(runner_ms / base_ms, 3),
        "runner_first_result_ms_median": round(statistics.median(first) * 1000, 2),
    }


def _mapper() -> dict[str, Any]:
    from codeact.engine.events import ToolCallCompleted, ToolCallStarted
    from codeact.engine.runner import ResultMapper

    events = []
    for i in range(EVENTS // 2):
        common = {"run_id": "e", "timestamp": 0.0, "call_id": f"c{i}", "toolkit": "devops", "operation": "get"}
        events.append(ToolCallStarted(sequence=2 * i + 1, arguments={"id": i}, **common))
        events.append(ToolCallCompleted(sequence=2 * i + 2, result={"ok": True}, **common))
    mapper = ResultMapper("bench")
    started = time.perf_counter()
    count = sum(len(mapper.map(event)) for event in events)
    elapsed = time.perf_counter() - started
    return {"events": len(events), "results": count, "results_per_s": round(count / elapsed)}


def _authorization() -> dict[str, Any]:
    from codeact.engine.runner import AuthorizationRegistry
    from codeact.engine.runner.entities import ModelResource

    context = _context("auth")
    context.resources.models.append(ModelResource(model_id="m-1", operations=["invoke", "stream"]))
    registry = AuthorizationRegistry()
    registry.register(context, runner_id="bench")
    payload = {"run_id": "auth", "llm_model_uuid": "m-1", "messages": [{"role": "user", "content": "hi"}]}
    started = time.perf_counter()
    for _ in range(CHECKS):
        registry.check("invoke_llm", payload, caller="bench")
    elapsed = time.perf_counter() - started
    return {"checks": CHECKS, "checks_per_s": round(CHECKS / elapsed)}


def run() -> dict[str, Any]:
    """The figures (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        figures = {"run": asyncio.run(_runs(Path(tmp)))}
    figures["mapper"] = _mapper()
    figures["authorization"] = _authorization()
    return figures
