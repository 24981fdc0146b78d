"""Codeact steps: variables stay in their own session, a flow session replays whole, agents as tools."""

from __future__ import annotations

from collections.abc import Callable

from codeact.engine.agent import Agent
from codeact.engine.blueprint import AgentFactory, HostContext, load_text
from codeact.engine.flow import AgentTool, AgentToolkit, ParallelAgent, SequentialAgent, Step, replay_flow
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import Store
from codeact.toolkits import ToolkitRegistry

from .conftest import code

Make = Callable[..., Agent]


async def test_variables_do_not_leak_between_steps_and_the_flow_replays_whole(agent: Make, store: Store) -> None:
    first = agent(
        "first",
        [code('secret = 41\nsystem.finish(f"the answer is {secret + 1}")')],
        kind="codeact",
    )
    second = agent(
        "second",
        [
            code(
                """
                try:
                    print(secret)
                except NameError:
                    print("no secret here")
                """
            ),
            code('system.finish("second saw: " + "{answer}")'),
        ],
        kind="codeact",
        system="The first agent said: {answer}",
    )
    flow = SequentialAgent(name="isolated", agents=[Step(agent=first, output_key="answer"), second])
    result = await flow.invoke("go", session_id="iso-1")
    assert (result.status, result.answer) == ("completed", "second saw: {answer}")
    rounds = await store.rounds("iso-1.2.second")
    assert rounds[0].stdout == "no secret here\n"
    assert await store.variables("iso-1.1.first") == {"secret": 41}
    assert "secret" not in await store.variables("iso-1.2.second")
    system_prompt = second.script.requests[0].messages[0]["content"]  # type: ignore[attr-defined]
    assert "The first agent said: the answer is 42" in system_prompt

    seen: list[str] = []
    report = await replay_flow(store, "iso-1", on_step=lambda sid, name: seen.append(f"{name} {sid}"))
    assert report.ok and seen == ["first iso-1.1.first", "second iso-1.2.second"]
    assert [r.status for r in report.rounds] == ["match", "match", "match"]
    assert report.to_json()["steps"][1]["session_id"] == "iso-1.2.second"


async def test_agents_and_flows_as_tools(agent: Make, registry: ToolkitRegistry, store: Store) -> None:
    writer = agent("writer", ["Draft for: notes 2.4.0"], title="Writes release notes")
    checks = ParallelAgent(
        name="checks",
        description="Runs the release checks",
        agents=[agent("lint", ["lint ok"]), agent("tests", ["12 passed"])],
        merge_strategy="list",
    )
    schema = {
        "type": "object",
        "properties": {"project": {"type": "string"}, "urgent": {"type": "boolean"}},
        "required": ["project"],
    }
    tools = AgentToolkit([AgentTool(writer), AgentTool(checks, input_schema=schema)], name="team")
    assert [(s.name, s.description) for s in tools.operations()] == [
        ("writer", "Writes release notes"),
        ("checks", "Runs the release checks"),
    ]
    registry.register(tools)
    script = ScriptedReplies(
        [
            code(
                """
                draft = await team.writer(input="notes 2.4.0")
                results = await team.checks(project="P-123", urgent=True)
                system.finish({"draft": draft, "checks": results})
                """
            )
        ]
    )
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    text = f"""\
version: codeact.agent/v1
id: lead
model: {{provider: scripted, model: "{script.model}"}}
toolkits: [{{ref: system}}, {{ref: team}}]
workflow: {{mode: codeact, maxTurns: 2, codeact: {{thought: "off"}}}}
"""
    spec = AgentFactory().create(load_text(text), HostContext(model_client=client, toolkit_registry=registry))
    lead = Agent(spec, model=client, store=store, registry=registry, stream=False)
    result = await lead.invoke("Prepare the release", session_id="lead-1")
    assert result.status == "completed", result
    assert result.answer == {"draft": "Draft for: notes 2.4.0", "checks": ["lint ok", "12 passed"]}
    assert "async def writer(self, input: str) -> Any" in script.requests[0].messages[0]["content"]
    assert (await store.get_session("lead-1.writer.1")) is not None
    flow_meta = await store.get_session("lead-1.checks.1")  # n counts the calls of that tool in the session
    assert flow_meta is not None and flow_meta.extra["kind"] == "flow"
    lead_meta = await store.get_session("lead-1")  # both runs are tasks the lead launched (system.tasks())
    assert lead_meta is not None
    assert [(t["id"], t["kind"], t["state"]) for t in lead_meta.extra["tasks"]] == [
        ("lead-1.writer.1", "subagent", "completed"),
        ("lead-1.checks.1", "flow", "completed"),
    ]
    assert flow_meta.input == '{"project": "P-123", "urgent": true}'
