"""Overhead of a flow step over running the same agent alone (issue 16; goal <= 2 ms per step).

A react agent on a scripted model that answers at once (no sandbox, SQLite store in a temp dir) is
run alone (the baseline) and as the only step of a ``SequentialAgent``, alternately, ``RUNS`` times;
every other time, ``STEPS`` runs alone are compared with one ``STEPS``-step sequential flow. The
overheads are medians of those paired differences, per step: the flow's own session (create +
update, shared by its steps), the step events and the input composition.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from codeact.engine.agent import Agent
from codeact.engine.blueprint import AgentFactory, HostContext, load_text
from codeact.engine.flow import SequentialAgent, Step
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import SQLiteStore
from codeact.toolkits import ToolkitRegistry

RUNS = 60
STEPS = 5
TARGET_MS = 2.0
_BLUEPRINT = """\
version: codeact.agent/v1
id: {name}
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}]
workflow: {{mode: react, maxTurns: 2}}
"""


def _agent(name: str, store: SQLiteStore, registry: ToolkitRegistry, replies: int) -> tuple[Agent, ScriptedReplies]:
    script = ScriptedReplies([f"answer {i}" for i in range(replies)])
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    text = _BLUEPRINT.format(name=name, model=script.model)
    spec = AgentFactory().create(load_text(text), HostContext(model_client=client, toolkit_registry=registry))
    return Agent(spec, model=client, store=store, registry=registry, stream=False), script


async def _measure() -> dict[str, Any]:
    registry = ToolkitRegistry.from_entry_points()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db")
        try:
            alone, _s1 = _agent("alone", store, registry, RUNS + (RUNS // 2 + 1) * STEPS + 2)
            await alone.invoke("warm up", session_id="warm-alone")  # litellm's import and first call
            single, _s2 = _agent("single", store, registry, RUNS + 2)
            flow1 = SequentialAgent(name="one-step", agents=[single])
            await flow1.invoke("warm up", session_id="warm-flow")
            chained = [_agent(f"s{i}", store, registry, RUNS // 2 + 2) for i in range(STEPS)]
            flow5 = SequentialAgent(
                name="five-steps",
                agents=[Step(agent=a, include_contents=False) for a, _ in chained],
            )
            await flow5.invoke("warm up", session_id="warm-flow5")

            # Paired and interleaved: each flow run is compared with the agent-alone runs right before it,
            # so a load change on the machine (other processes) hits both sides of a pair alike.
            alone_s: list[float] = []
            flow_s: list[float] = []
            single_pairs: list[float] = []
            chain_pairs: list[float] = []
            for i in range(RUNS):
                t0 = time.perf_counter()
                first = await alone.invoke("go", session_id=f"alone-{i}")
                alone_t = time.perf_counter() - t0
                t0 = time.perf_counter()
                second = await flow1.invoke("go", session_id=f"flow-{i}")
                flow_t = time.perf_counter() - t0
                assert first.status == second.status == "completed"  # noqa: S101 - a benchmark's sanity check
                alone_s.append(alone_t)
                flow_s.append(flow_t)
                single_pairs.append(flow_t - alone_t)
                if i % 2 == 0:
                    t0 = time.perf_counter()
                    for k in range(STEPS):
                        await alone.invoke("go", session_id=f"alone5-{i}-{k}")
                    five_alone = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    chain = await flow5.invoke("go", session_id=f"chain-{i}")
                    chain_pairs.append((time.perf_counter() - t0 - five_alone) / STEPS)
                    assert chain.status == "completed"  # noqa: S101
        finally:
            await store.close()
    alone_ms = statistics.median(alone_s) * 1000
    flow_ms = statistics.median(flow_s) * 1000
    step_overhead = statistics.median(single_pairs) * 1000
    chain_overhead = statistics.median(chain_pairs) * 1000
    return {
        "agent_alone_ms": round(alone_ms, 3),
        "one_step_flow_ms": round(flow_ms, 3),
        "step_overhead_ms": round(step_overhead, 3),
        f"step_overhead_in_{STEPS}_step_flow_ms": round(chain_overhead, 3),
        "ratio_one_step_vs_alone": round(flow_ms / alone_ms, 3),
        "target_ms": TARGET_MS,
        "meets_target": chain_overhead <= TARGET_MS,
        "runs": RUNS,
    }


def run() -> dict[str, Any]:
    """Run the benchmark; returns its figures."""
    return asyncio.run(_measure())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
