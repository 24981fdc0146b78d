"""The four flow kinds from Python, over react agents on scripted models (real SQLite store)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from codeact.engine.agent import Agent
from codeact.engine.agent.hooks import Hook, HookContext, Jump
from codeact.engine.events import Event, FlowStepCompleted, FlowStepStarted, RunCompleted, RunStarted
from codeact.engine.flow import (
    AgentTool,
    AgentToolkit,
    FlowError,
    LoopAgent,
    LoopMode,
    ParallelAgent,
    RoutingAgent,
    SequentialAgent,
    Step,
    flow_tree,
    parse_routes,
)
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import Store

Make = Callable[..., Agent]


async def collect(flow: Any, text: str, session_id: str) -> list[Event]:
    return [event async for event in flow.run(text, session_id=session_id)]


def last(events: list[Event]) -> Event:
    top = [e for e in events if e.parent_run_id is None]
    return top[-1]


def router(replies: list[str]) -> tuple[ModelClient, ScriptedReplies]:
    script = ScriptedReplies(replies)
    return ModelClient(ModelSettings(model=script.model, max_retries=0)), script


# -- sequential -----------------------------------------------------------------------------------


async def test_sequential_output_keys_fill_placeholders_and_results_are_passed_on(agent: Make, store: Store) -> None:
    writer = agent("writer", ["Draft: ship 2.4.0 with passkeys"])
    reviewer = agent("reviewer", ["Approved."], system="Review this draft: {draft} (asked: {input})")
    flow = SequentialAgent(name="release", agents=[Step(agent=writer, output_key="draft"), reviewer])

    events = await collect(flow, "Notes for 2.4.0", "seq-1")

    end = last(events)
    assert isinstance(end, RunCompleted) and end.answer == "Approved." and end.rounds == 2
    request = reviewer.script.requests[0]  # type: ignore[attr-defined]
    assert (
        request.messages[0]["content"] == "Review this draft: Draft: ship 2.4.0 with passkeys (asked: Notes for 2.4.0)"
    )
    assert request.messages[1]["content"] == (
        "Notes for 2.4.0\n\nResults so far in this flow (earlier agents' answers, oldest first):\n\n"
        "[writer]\nDraft: ship 2.4.0 with passkeys"
    )
    # One run.started / run.completed at the top; each step's run as flow.step.* with both run ids.
    assert [e.type for e in events if e.parent_run_id is None] == ["run.started", "run.completed"]
    flow_run = events[0].run_id
    starts = [e for e in events if isinstance(e, FlowStepStarted)]
    assert [(s.agent, s.position, s.session_id) for s in starts] == [
        ("writer", "1", "seq-1.1.writer"),
        ("reviewer", "2", "seq-1.2.reviewer"),
    ]
    assert all(e.parent_run_id == flow_run for e in events[1:-1])
    inner = [e for e in events if e.run_id == starts[0].run_id]
    assert {e.type for e in inner} >= {"flow.step.started", "round.started", "flow.step.completed"}
    # Sessions: the flow's lists its steps; each step's names its parent and position.
    meta = await store.get_session("seq-1")
    assert meta is not None and meta.extra["kind"] == "flow" and meta.status == "completed"
    assert [c["session_id"] for c in meta.extra["children"]] == ["seq-1.1.writer", "seq-1.2.reviewer"]
    child = await store.get_session("seq-1.2.reviewer")
    assert child is not None and child.extra["flow"] == {
        "parent_session": "seq-1",
        "parent_run": flow_run,
        "position": "2",
        "agent": "reviewer",
    }


async def test_include_contents_false_and_return_reasoning_contents(agent: Make, meet: Any) -> None:
    meet.expected = 1
    thinker = agent(
        "thinker",
        [
            {"tool_calls": [{"name": "meet__wait", "arguments": {"who": "thinker"}}], "text": "Let me check."},
            "42",
        ],
    )
    echo = agent("echo", ["seen"])
    blind = agent("blind", ["alone"])
    flow = SequentialAgent(
        name="contents",
        agents=[
            Step(agent=thinker, return_reasoning_contents=True),
            echo,
            Step(agent=blind, include_contents=False),
        ],
    )
    result = await flow.invoke("What is the answer?", session_id="inc-1")
    assert (result.status, result.answer) == ("completed", "alone")
    sent = echo.script.requests[0].messages[-1]["content"]  # type: ignore[attr-defined]
    assert "[thinker]\nLet me check." in sent and "[thinker]\n42" in sent
    assert blind.script.requests[0].messages[-1]["content"] == "What is the answer?"  # type: ignore[attr-defined]


async def test_a_failed_step_fails_the_flow_naming_the_agent_and_its_session(agent: Make, store: Store) -> None:
    ok = agent("ok", ["fine"])
    broken = agent("broken", [{"error": "auth", "message": "bad key"}])
    flow = SequentialAgent(name="fragile", agents=[ok, broken])
    result = await flow.invoke("go", session_id="fail-1")
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "flow.step.failed"
    assert "flow 'fragile': agent 'broken' (2) failed" in result.error["message"]
    assert "codeact sessions show fail-1.2.broken" in result.error["message"]
    meta = await store.get_session("fail-1")
    assert meta is not None and meta.status == "failed"


# -- parallel -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        pytest.param("map", {"lint": "lint ok", "tests": "12 passed"}, id="map"),
        pytest.param("list", ["lint ok", "12 passed"], id="list"),
        pytest.param("concat", "lint ok\n---\n12 passed", id="concat"),
    ],
)
async def test_parallel_merge_strategies(agent: Make, strategy: str, expected: Any) -> None:
    lint = agent("lint", ["lint ok"])
    tests = agent("tests", ["12 passed"])
    report = agent("report", ["done"], system="Lint: {lint}; tests: {tests}; all: {checks}")
    checks = ParallelAgent(
        name="checks",
        agents=[lint, tests],
        merge_strategy=strategy,  # type: ignore[arg-type]
        merge_output_key="checks",
        separator="\n---\n",
    )
    flow = SequentialAgent(name="ci", agents=[Step(agent=checks, output_key="checks"), report])
    events = await collect(flow, "check it", f"par-{strategy}")
    completed = {e.agent: e for e in events if isinstance(e, FlowStepCompleted)}
    assert completed["checks"].answer == expected
    system = report.script.requests[0].messages[0]["content"]  # type: ignore[attr-defined]
    merged = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    assert system == f"Lint: lint ok; tests: 12 passed; all: {merged}"


async def test_parallel_branches_run_concurrently(agent: Make, store: Store) -> None:
    # Each branch waits in meet.wait until both arrived: they can only finish if they overlap.
    def branch(name: str) -> Agent:
        return agent(name, [{"tool_calls": [{"name": "meet__wait", "arguments": {"who": name}}]}, f"{name} done"])

    flow = ParallelAgent(name="fanout", agents=[branch("left"), branch("right")], merge_strategy="list")
    result = await flow.invoke("go", session_id="conc-1")
    assert (result.status, result.answer) == ("completed", ["left done", "right done"])
    meta = await store.get_session("conc-1")
    assert meta is not None
    spans = [(c["started_at"], c["ended_at"]) for c in meta.extra["children"]]
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # the recorded runs overlap
    left = await store.rounds("conc-1.1.left")
    assert left[0].calls[0]["result"] == "left met the others"


async def test_parallel_max_concurrency_one_runs_branches_one_after_the_other(agent: Make, store: Store) -> None:
    flow = ParallelAgent(
        name="serial", agents=[agent("a", ["A"]), agent("b", ["B"]), agent("c", ["C"])], max_concurrency=1
    )
    result = await flow.invoke("go", session_id="one-1")
    assert result.answer == {"a": "A", "b": "B", "c": "C"}
    meta = await store.get_session("one-1")
    assert meta is not None
    spans = [(c["started_at"], c["ended_at"]) for c in meta.extra["children"]]
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


@pytest.mark.parametrize(
    ("build", "code", "message"),
    [
        pytest.param(
            lambda a: ParallelAgent(name="p", agents=[a("x", ["x"])]),
            "flow.parallel.agents.count",
            "parallel flow 'p' runs 2 to 10 agents (got 1)",
            id="one-agent",
        ),
        pytest.param(
            lambda a: ParallelAgent(name="p", agents=[Step(agent=a(f"x{i}", ["x"])) for i in range(11)]),
            "flow.parallel.agents.count",
            "parallel flow 'p' runs 2 to 10 agents (got 11)",
            id="eleven-agents",
        ),
        pytest.param(
            lambda a: ParallelAgent(
                name="p", agents=[Step(agent=a("x", ["x"]), output_key="k"), Step(agent=a("y", ["y"]), output_key="k")]
            ),
            "flow.outputKey.duplicate",
            "parallel flow 'p': agents[1] writes output key 'k' like agents[0]",
            id="duplicate-key",
        ),
        pytest.param(
            lambda a: ParallelAgent(name="p", agents=[a("x", ["x"]), a("y", ["y"])], merge_output_key="x"),
            "flow.mergeOutputKey.duplicate",
            "merge_output_key 'x' is also an agent's output key",
            id="merge-key",
        ),
        pytest.param(
            lambda a: ParallelAgent(name="p", agents=[a("x", ["x"]), a("y", ["y"])], merge_strategy="zip"),
            "flow.mergeStrategy.invalid",
            "merge_strategy must be one of map, list, concat or a function (got 'zip')",
            id="strategy",
        ),
        pytest.param(
            lambda a: ParallelAgent(name="p", agents=[a("x", ["x"]), a("y", ["y"])], max_concurrency=0),
            "flow.maxConcurrency.invalid",
            "max_concurrency must be at least 1",
            id="concurrency",
        ),
        pytest.param(
            lambda a: SequentialAgent(name="s", agents=[a("x", ["x"]), a("x", ["x"])]),
            "flow.agent.name.duplicate",
            "agents[0] and agents[1] are both named 'x'",
            id="duplicate-name",
        ),
        pytest.param(
            lambda a: SequentialAgent(name="s", agents=[]), "flow.agents.required", "has no agents", id="no-agents"
        ),
        pytest.param(
            lambda a: SequentialAgent(name="bad name", agents=[a("x", ["x"])]),
            "flow.name.invalid",
            "a flow's name must be letters",
            id="name",
        ),
        pytest.param(
            lambda a: SequentialAgent(name="s", agents=["writer.yaml"]),
            "flow.agent.invalid",
            "agents[] items must be Agent, flow agents (SequentialAgent, ...) or Step(...), got str",
            id="not-an-agent",
        ),
        pytest.param(
            lambda a: LoopAgent(name="l", agents=[a("x", ["x"]), a("y", ["y"])], mode=LoopMode.count(2)),
            "flow.loop.agents.count",
            "loop flow 'l' runs exactly one agent (got 2)",
            id="loop-two",
        ),
        pytest.param(
            lambda a: LoopAgent(name="l", agents=[a("x", ["x"])], mode="count"),
            "flow.loop.invalid",
            "needs mode=LoopMode.count(n)",
            id="loop-mode",
        ),
        pytest.param(lambda a: LoopMode.count(0), "flow.loop.count.invalid", "needs n >= 1, got 0", id="count-0"),
        pytest.param(
            lambda a: SequentialAgent(name="s", agents=[Step(agent=a("x", ["x"]), output_key="my key")]),
            "flow.outputKey.invalid",
            "flow 's': agents[0] output key 'my key' must be an identifier",
            id="output-key",
        ),
        pytest.param(
            lambda a: SequentialAgent(name="s", agents=[Step(agent="writer")]),  # type: ignore[arg-type]
            "flow.agent.invalid",
            "flow 's': Step.agent must be an Agent or a flow agent, got str",
            id="step-agent",
        ),
        pytest.param(
            lambda a: RoutingAgent(name="r", agents=[a("x", ["x"])], model=None),  # type: ignore[arg-type]
            "flow.model.required",
            "routing flow 'r' needs a model: pass model=ModelClient(...)",
            id="routing-model",
        ),
        pytest.param(
            lambda a: AgentToolkit([a("x", ["x"]), AgentTool(a("y", ["y"]), name="x")]),
            "flow.tool.duplicate",
            "AgentToolkit 'agents': two tools are named 'x'",
            id="tool-duplicate",
        ),
        pytest.param(
            lambda a: AgentTool(a("x", ["x"]), input_schema={"type": "string"}),
            "flow.tool.schema.invalid",
            "AgentTool 'x': input_schema must be a JSON schema of an object with properties",
            id="tool-schema",
        ),
        pytest.param(
            lambda a: LoopMode.condition(bool, max_iterations=1001),
            "flow.loop.invalid",
            "max_iterations must be between 1 and 1000",
            id="cap",
        ),
        pytest.param(
            lambda a: RoutingAgent(
                name="r", agents=[SequentialAgent(name="inner", agents=[a("x", ["x"])])], model=router([])[0]
            ),
            "flow.agent.description.required",
            "agents[0] ('inner') has no description",
            id="routing-description",
        ),
    ],
)
def test_declaration_errors(agent: Make, build: Callable[[Make], Any], code: str, message: str) -> None:
    with pytest.raises(FlowError) as caught:
        build(agent)
    assert caught.value.code == code
    assert message in caught.value.message


def test_loops_are_capped_at_1000_iterations() -> None:
    assert LoopMode.count(5000).times == 1000
    assert LoopMode.condition(bool).max_iterations == 1000
    assert LoopMode.array().max_iterations == 1000


# -- routing --------------------------------------------------------------------------------------


async def test_routing_one_agent_passes_its_answer_through_verbatim(agent: Make) -> None:
    billing = agent("billing", [{"tool_calls": [{"name": "system__finish", "arguments": {"answer": {"due": 12}}}]}])
    support = agent("support", ["unused"])
    client, script = router(['```json\n{"agents": [{"agent": "billing", "query": "What is due?"}]}\n```'])
    flow = RoutingAgent(name="desk", agents=[billing, support], model=client)
    result = await flow.invoke("How much do I owe?", session_id="route-1")
    assert (result.status, result.answer) == ("completed", {"due": 12})
    assert billing.script.requests[0].messages[-1]["content"] == "What is due?"  # type: ignore[attr-defined]
    system = script.requests[0].messages[0]["content"]
    assert "- billing: The billing agent" in system and "- support: The support agent" in system


async def test_routing_retries_name_the_invalid_agents_then_several_are_merged(agent: Make) -> None:
    billing = agent("billing", ["You owe 12 EUR."])
    support = agent("support", ["Reset it under Settings."])
    client, script = router(
        [
            "I think billing should answer this.",  # prose, no JSON
            '{"agents": [{"agent": "finance", "query": "x"}, {"agent": "", "query": "y"}]}',
            '{"agents": [{"agent": "billing", "query": "What is due?"}, {"agent": "support", "query": "Password?"}]}',
            "You owe 12 EUR; reset your password under Settings.",
        ]
    )
    seen: list[tuple[str, str | None]] = []

    class Watch(Hook):
        async def before_model(self, ctx: HookContext) -> Jump | None:
            seen.append(("before", ctx.purpose))
            return None

        async def after_model(self, ctx: HookContext) -> Jump | None:
            seen.append(("after", ctx.purpose))
            return None

    flow = RoutingAgent(name="desk", agents=[billing, support], model=client, hooks=[Watch()])
    result = await flow.invoke("What do I owe, and how do I reset my password?", session_id="route-2")
    assert (result.status, result.answer) == ("completed", "You owe 12 EUR; reset your password under Settings.")
    first_retry = script.requests[1].messages[-1]["content"]
    assert first_retry.startswith('Your reply could not be used: it is not a JSON object with an "agents" list')
    second_retry = script.requests[2].messages[-1]["content"]
    assert "unknown or empty agent name(s): 'finance', ''" in second_retry
    assert "The agent names are: billing, support." in second_retry
    merge = script.requests[3].messages[0]["content"]
    assert "[billing] was asked: What is due?\nYou owe 12 EUR." in merge
    assert "[support] was asked: Password?\nReset it under Settings." in merge
    assert seen == [("before", "routing"), ("after", "routing")] * 3 + [("before", "merge"), ("after", "merge")]


async def test_routing_fails_clearly_after_two_retries(agent: Make) -> None:
    client, script = router(['{"agents": []}', '{"agents": [{"agent": "sales"}]}', "no idea"])
    flow = RoutingAgent(name="desk", agents=[agent("billing", ["x"]), agent("support", ["y"])], model=client)
    result = await flow.invoke("Hello?", session_id="route-3")
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "flow.routing.failed"
    assert result.error["message"].startswith(
        "routing flow 'desk' could not route the request after 3 attempts: the last reply was refused because "
        'it is not a JSON object with an "agents" list; the agents are billing, support.'
    )
    assert len(script.requests) == 3


def test_parse_routes() -> None:
    assert parse_routes('{"agents": [{"agent": "a", "query": "q"}]}', ["a"]) == ([("a", "q")], None)
    assert parse_routes('Sure: {"agents": [{"agent": "a"}]} done', ["a"]) == ([("a", None)], None)
    assert parse_routes('{"agents": []}', ["a"]) == ([], "it names no agent")


# -- loop -----------------------------------------------------------------------------------------


async def test_loop_count_feeds_each_iteration_the_previous_result(agent: Make) -> None:
    editor = agent("editor", ["v1", "v2", "v3"], system="Improve: {text}")
    flow = LoopAgent(name="polish", agents=[Step(agent=editor, output_key="text")], mode=LoopMode.count(3))
    result = await flow.invoke("v0", session_id="loop-1")
    assert (result.status, result.answer, result.rounds) == ("completed", "v3", 3)
    systems = [r.messages[0]["content"] for r in editor.script.requests]  # type: ignore[attr-defined]
    assert systems == ["Improve: {text}", "Improve: v1", "Improve: v2"]


async def test_loop_condition_stops_when_true(agent: Make) -> None:
    checker = agent("checker", ["pending", "pending", "APPROVED", "never"])
    flow = LoopAgent(name="wait", agents=[checker], mode=LoopMode.condition(lambda r: "APPROVED" in r))
    events = await collect(flow, "check", "loop-2")
    end = last(events)
    assert isinstance(end, RunCompleted) and (end.answer, end.reason, end.rounds) == ("APPROVED", "finished", 3)


async def test_loop_condition_cap_notes_max_loop_count_reached(agent: Make, store: Store) -> None:
    checker = agent("checker", ["pending"] * 3)
    flow = LoopAgent(name="wait", agents=[checker], mode=LoopMode.condition(lambda r: r == "ok", max_iterations=3))
    events = await collect(flow, "check", "loop-3")
    end = last(events)
    assert isinstance(end, RunCompleted) and (end.answer, end.reason, end.rounds) == ("pending", "max_loop_count", 3)
    notes = [e for e in events if e.type == "message.completed" and e.purpose == "note"]  # type: ignore[attr-defined]
    assert notes[0].text.startswith("max loop count reached: loop 'wait' stopped after 3 iterations")  # type: ignore[attr-defined]
    meta = await store.get_session("loop-3")
    assert meta is not None and meta.extra["notes"] == [notes[0].text]  # type: ignore[attr-defined]


async def test_loop_array_runs_once_per_element(agent: Make) -> None:
    greeter = agent("greeter", ["hello ann", "hello bob"])
    flow = LoopAgent(name="each", agents=[greeter], mode=LoopMode.array())
    result = await flow.invoke('```json\n["ann", {"name": "bob"}]\n```', session_id="loop-4")
    assert result.answer == ["hello ann", "hello bob"]
    inputs = [r.messages[-1]["content"] for r in greeter.script.requests]  # type: ignore[attr-defined]
    assert inputs[0] == "ann" and inputs[1].startswith('{"name": "bob"}')


@pytest.mark.parametrize(
    ("previous", "why"),
    [
        pytest.param("ann, bob", "it is not JSON (Expecting value at line 1 column 1)", id="prose"),
        pytest.param('{"names": ["ann"]}', "it is JSON but a dict, not an array", id="object"),
    ],
)
async def test_loop_array_without_an_array_runs_nothing_and_says_why(agent: Make, previous: str, why: str) -> None:
    greeter = agent("greeter", ["never"])
    flow = LoopAgent(name="each", agents=[greeter], mode=LoopMode.array())
    events = await collect(flow, previous, f"loop-5-{len(previous)}")
    end = last(events)
    assert isinstance(end, RunCompleted) and (end.answer, end.reason, end.rounds) == ([], "no_iterations", 0)
    note = next(e for e in events if e.type == "message.completed")
    assert note.text == f"loop 'each' ran no iteration: the previous result is not a JSON array: {why}"  # type: ignore[attr-defined]
    assert greeter.script.requests == []  # type: ignore[attr-defined]


async def test_loop_array_in_a_sequence_iterates_the_previous_steps_result(agent: Make) -> None:
    lister = agent("lister", [{"tool_calls": [{"name": "system__finish", "arguments": {"answer": ["a", "b"]}}]}])
    upper = agent("upper", ["A", "B"])
    flow = SequentialAgent(
        name="pipeline",
        agents=[lister, Step(agent=LoopAgent(name="each", agents=[upper], mode=LoopMode.array()), output_key="out")],
    )
    result = await flow.invoke("list then upper", session_id="loop-6")
    assert result.answer == ["A", "B"]


# -- flows of flows, hooks --------------------------------------------------------------------------


async def test_a_flow_of_flows_records_a_tree(agent: Make, store: Store) -> None:
    inner = ParallelAgent(name="checks", agents=[agent("lint", ["ok"]), agent("tests", ["passed"])])
    loop = LoopAgent(name="twice", agents=[agent("poll", ["p1", "p2"])], mode=LoopMode.count(2))
    flow = SequentialAgent(name="outer", agents=[agent("plan", ["plan"]), inner, loop])
    events = await collect(flow, "go", "tree-1")
    end = last(events)
    assert isinstance(end, RunCompleted) and end.answer == "p2"
    outer_run = events[0].run_id
    inner_start = next(e for e in events if isinstance(e, FlowStepStarted) and e.agent == "checks")
    assert inner_start.parent_run_id == outer_run
    lint_start = next(e for e in events if isinstance(e, FlowStepStarted) and e.agent == "lint")
    assert lint_start.parent_run_id == inner_start.run_id  # a nested step links to its own flow's run
    tree = await flow_tree(store, "tree-1")
    assert [(c.agent, c.kind, c.position) for c in tree.children] == [
        ("plan", "react", "1"),
        ("checks", "parallel", "2"),
        ("twice", "loop", "3"),
    ]
    assert [c.session_id for c in tree.children[1].children] == ["tree-1.2.checks.1.lint", "tree-1.2.checks.2.tests"]
    assert [c.position for c in tree.children[2].children] == ["iteration 1", "iteration 2"]
    assert tree.rounds == 5


async def test_flow_hooks_around_the_whole_flow(agent: Make) -> None:
    seen: list[str] = []

    class Around(Hook):
        async def before_agent(self, ctx: HookContext) -> Jump | None:
            seen.append(f"before {ctx.agent_id} {ctx.input}")
            return None

        async def after_agent(self, ctx: HookContext) -> Jump | None:
            seen.append(f"after {ctx.agent_id} {sorted(ctx.state)}")
            return None

    flow = SequentialAgent(name="hooked", agents=[agent("one", ["1"])], hooks=[Around()])
    assert (await flow.invoke("go", session_id="hook-1")).answer == "1"
    assert seen == ["before hooked go", "after hooked ['input', 'one']"]

    class Stop(Hook):
        async def before_agent(self, ctx: HookContext) -> Jump | None:
            return Jump(to="end", reason="maintenance window")

    stopped = SequentialAgent(name="stopped", agents=[agent("two", ["never"])], hooks=[Stop()])
    result = await stopped.invoke("go", session_id="hook-2")
    assert (result.status, result.answer, result.reason) == ("completed", "maintenance window", "hook")


async def test_run_started_is_the_flows_own(agent: Make) -> None:
    flow = SequentialAgent(name="solo", agents=[agent("one", ["1"])])
    events = await collect(flow, "go", "solo-1")
    started = [e for e in events if isinstance(e, RunStarted)]
    assert len(started) == 1 and started[0].session_id == "solo-1" and started[0].blueprint_id == "solo"
    assert json.loads(events[1].to_json_line())["parent_run_id"] == events[0].run_id
    assert "parent_run_id" not in events[0].to_json()


async def test_a_nested_flows_session_names_its_parent_like_an_agents(agent: Make, store: Store) -> None:
    inner = SequentialAgent(name="inner", agents=[agent("leaf", ["x"])])
    outer = SequentialAgent(name="outer", agents=[inner])
    events = await collect(outer, "go", "nest-1")
    meta = await store.get_session("nest-1.1.inner")
    assert meta is not None and meta.extra["flow"] == {
        "kind": "sequential",
        "name": "inner",
        "parent_session": "nest-1",
        "parent_run": events[0].run_id,
        "position": "1",
        "agent": "inner",
    }
    leaf = await store.get_session("nest-1.1.inner.1.leaf")
    assert leaf is not None and leaf.extra["flow"]["parent_session"] == "nest-1.1.inner"


async def test_a_flow_on_redis_records_and_links_its_sessions(agent: Make, redis_url: str) -> None:
    import uuid

    import redis.asyncio

    from codeact.engine.store import open_store

    prefix = f"codeact-flow-test-{uuid.uuid4().hex[:12]}"
    opened = open_store(f"{redis_url}?prefix={prefix}")
    try:
        branches = [agent("lint", ["ok"], on=opened), agent("tests", ["passed"], on=opened)]
        flow = SequentialAgent(
            name="ci", agents=[agent("plan", ["plan"], on=opened), ParallelAgent(name="checks", agents=branches)]
        )
        result = await flow.invoke("go", session_id="redis-1")
        assert result.answer == {"lint": "ok", "tests": "passed"}
        tree = await flow_tree(opened, "redis-1")
        checks = tree.children[1].children
        assert [c.session_id for c in checks] == ["redis-1.2.checks.1.lint", "redis-1.2.checks.2.tests"]
        assert {c.status for c in checks} == {"completed"}
    finally:
        await opened.close()
        client = redis.asyncio.Redis.from_url(redis_url)
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()  # type: ignore[attr-defined]


def test_a_flow_note_is_rendered() -> None:
    import io

    from rich.console import Console

    from codeact.engine.events import EventSequence, MessageCompleted, render_event

    out = io.StringIO()
    render_event(
        EventSequence("r").emit(MessageCompleted, text="max loop count reached: ...", purpose="note"),
        Console(file=out, width=120, force_terminal=False),
    )
    assert out.getvalue() == "note: max loop count reached: ...\n"


async def test_closing_a_flows_stream_interrupts_it_and_its_running_steps(agent: Make, meet: Any, store: Store) -> None:
    import contextlib

    meet.expected = 3  # never reached: both branches wait until cancelled
    waiting = [
        agent(name, [{"tool_calls": [{"name": "meet__wait", "arguments": {"who": name}}]}, "never"])
        for name in ("left", "right")
    ]
    flow = ParallelAgent(name="stuck", agents=waiting)
    calls = 0
    async with contextlib.aclosing(flow.run("go", session_id="stop-1")) as events:
        async for event in events:
            if event.type == "tool.call.started":
                calls += 1
                if calls == 2:
                    break
    meta = await store.get_session("stop-1")
    assert meta is not None and meta.status == "interrupted"
    for child in ("stop-1.1.left", "stop-1.2.right"):
        child_meta = await store.get_session(child)
        assert child_meta is not None and child_meta.status == "interrupted", child


async def test_a_step_that_asks_the_user_fails_the_flow(agent: Make) -> None:
    asking = agent(
        "asker", [{"tool_calls": [{"name": "system__ask_user", "arguments": {"question": "Which version?"}}]}]
    )
    result = await SequentialAgent(name="ask", agents=[asking]).invoke("deploy", session_id="ask-1")
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "flow.step.paused"
    assert result.error["message"].startswith(
        "flow 'ask': agent 'asker' (1) asked the user a question, which a flow cannot answer: Which version?"
    )


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        pytest.param("as is", "as is", id="string"),
        pytest.param({"ok": True, "n": [1, 2]}, '{"ok": true, "n": [1, 2]}', id="plain-json"),
        pytest.param({"$type": "tuple", "v": ["A", 4]}, "('A', 4)", id="tuple"),
        pytest.param({"when": {"$type": "date", "v": "2026-01-02"}}, "{'when': datetime.date(2026, 1, 2)}", id="date"),
    ],
)
def test_a_steps_answer_reads_as_text_without_codec_tags(answer: Any, text: str) -> None:
    """The next step's model reads ``('A', 4)``, not ``{"$type": "tuple", ...}`` (issue 39)."""
    from codeact.engine.flow._steps import as_text

    assert as_text(answer) == text
