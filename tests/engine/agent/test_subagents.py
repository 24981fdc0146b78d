"""Sub-agents: ``subagents:`` in a blueprint become operations of the ``agents`` toolkit."""

from __future__ import annotations

import textwrap
from pathlib import Path

from codeact.engine.agent import Agent
from codeact.engine.blueprint import AgentFactory, HostContext, load_path
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import Store
from codeact.toolkits import ToolkitRegistry

from .conftest import code, of_type

PARENT = """\
version: codeact.agent/v1
id: lead
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}]
subagents:
  code-reviewer:
    path: ./reviewer.yaml
    description: Reviews a plan and lists the risks.
workflow: {{mode: codeact, maxTurns: 4, codeact: {{thought: "off"}}}}
"""
CHILD = """\
version: codeact.agent/v1
id: reviewer
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}]
workflow: {{mode: codeact, maxTurns: 2, codeact: {{thought: "off"}}}}
"""


async def test_subagent_runs_in_its_own_session_and_returns_its_answer(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store
) -> None:
    script = ScriptedReplies(
        [
            code('review = await agents.code_reviewer(task="deploy checkout-api 2.4.0")\nprint(review)'),
            code('system.finish("risk: " + "no rollback plan")'),  # the sub-agent's round
            code('system.finish(f"reviewed: {review}")'),
        ]
    )
    (tmp_path / "lead.yaml").write_text(PARENT.format(model=script.model))
    (tmp_path / "reviewer.yaml").write_text(CHILD.format(model=script.model))
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    spec = AgentFactory().create(
        load_path(tmp_path / "lead.yaml"), HostContext(model_client=client, toolkit_registry=registry)
    )
    agent = Agent(spec, model=client, store=sqlite_store, registry=registry, stream=False)
    assert "agents" not in registry  # the host's registry is not changed

    result = await agent.invoke("Review then report.", session_id="lead-1")

    assert result.status == "completed", result
    assert result.answer == "reviewed: risk: no rollback plan"
    child = await sqlite_store.get_session("lead-1.code_reviewer.1")
    assert child is not None and child.blueprint_id == "reviewer" and child.status == "completed"
    parent_rounds = await sqlite_store.rounds("lead-1")
    assert [c["operation"] for c in parent_rounds[0].calls] == ["code_reviewer"]
    assert parent_rounds[0].stdout == "risk: no rollback plan\n"


async def test_subagent_stub_is_shown_to_the_parent(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store
) -> None:
    script = ScriptedReplies([code('system.finish("ok")')])
    (tmp_path / "lead.yaml").write_text(PARENT.format(model=script.model))
    (tmp_path / "reviewer.yaml").write_text(CHILD.format(model=script.model))
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    spec = AgentFactory().create(
        load_path(tmp_path / "lead.yaml"), HostContext(model_client=client, toolkit_registry=registry)
    )
    agent = Agent(spec, model=client, store=sqlite_store, registry=registry, stream=False)
    events = [e async for e in agent.run("go")]
    assert of_type(events, "run.completed")
    system_prompt = script.requests[0].messages[0]["content"]
    assert "class agents" in system_prompt
    assert "async def code_reviewer(self, task: str) -> Any" in system_prompt
    assert "exactly the value it passed to system.finish()" in system_prompt
    assert textwrap.dedent("Reviews a plan and lists the risks.") in system_prompt


async def test_subagent_answer_comes_back_as_it_was_finished(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store
) -> None:
    # The stub says `-> Any`: a sub-agent that finishes with data hands the parent a dict.
    script = ScriptedReplies(
        [
            code('review = await agents.code_reviewer(task="review")\nprint(type(review).__name__, review["risk"])'),
            code('system.finish({"risk": "high", "items": [1, 2]})'),
            code('system.finish(review["items"])'),
        ]
    )
    (tmp_path / "lead.yaml").write_text(PARENT.format(model=script.model))
    (tmp_path / "reviewer.yaml").write_text(CHILD.format(model=script.model))
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    spec = AgentFactory().create(
        load_path(tmp_path / "lead.yaml"), HostContext(model_client=client, toolkit_registry=registry)
    )
    agent = Agent(spec, model=client, store=sqlite_store, registry=registry, stream=False)
    result = await agent.invoke("Review.", session_id="lead-2")
    assert (result.status, result.answer) == ("completed", [1, 2])
    assert (await sqlite_store.rounds("lead-2"))[0].stdout == "dict high\n"
