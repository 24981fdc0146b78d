"""Seed 002's predicate branch (``ConditionalAgent``, ``when:``) and ``interruptBefore``, from Python and the CLI.

The agents are react agents on scripted models (their replies written as models write them: prose
around JSON) with a real SQLite store; the CLI tests run the installed ``codeact`` on flow blueprints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codeact import RunConfig
from codeact.engine.agent import Agent
from codeact.engine.agent.hooks import Hook, HookContext
from codeact.engine.blueprint import load_path, validate_blueprint
from codeact.engine.blueprint.conditions import ConditionError, parse_condition
from codeact.engine.events import Event, FlowStepStarted, MessageCompleted
from codeact.engine.flow import ConditionalAgent, FlowError, SequentialAgent, Step
from codeact.engine.store import SQLiteStore, Store

Make = Callable[..., Agent]
CODEACT = str(Path(sys.executable).parent / "codeact")
CLASSIFIED = 'Sure. Here is the classification:\n```json\n{"kind": "refund", "amount": 40}\n```\nLet me know.'


def asked(agent: Agent) -> int:
    return len(agent.script.requests)  # type: ignore[attr-defined]


# -- the predicate branch ------------------------------------------------------------------------------


async def test_a_conditional_step_takes_the_first_branch_whose_condition_holds(agent: Make, store: Store) -> None:
    classify = agent("classify", [CLASSIFIED])
    refunds = agent("refunds", ["Refunded 40 euros to the card."], system="Refund {classify}")
    big = agent("big", ["Escalated."])
    general = agent("general", ["A general answer."])
    triage = ConditionalAgent(
        name="triage",
        agents=[
            Step(agent=big, when=lambda state: "urgent" in state["input"]),
            Step(agent=refunds, when="classify.kind == 'refund' and classify.amount <= 100"),
            general,  # the default branch
        ],
    )
    flow = SequentialAgent(name="support", agents=[classify, triage])
    events: list[Event] = []
    result = await flow.invoke("I want my money back for order 7.", session_id="sup-1", on_event=events.append)
    assert (result.status, result.answer) == ("completed", "Refunded 40 euros to the card.")
    assert (asked(classify), asked(refunds), asked(big), asked(general)) == (1, 1, 0, 0)
    started = [(e.agent, e.position) for e in events if isinstance(e, FlowStepStarted)]
    assert started == [("classify", "1"), ("triage", "2"), ("refunds", "when 2")]
    meta = await store.get_session("sup-1.2.triage")
    assert meta is not None and [c["agent"] for c in meta.extra["children"]] == ["refunds"]


async def test_no_branch_holding_runs_nothing_and_passes_the_previous_result_on(agent: Make) -> None:
    classify = agent("classify", ['{"kind": "question"}'])
    refunds = agent("refunds", ["never"])
    flow = SequentialAgent(
        name="support",
        agents=[
            classify,
            ConditionalAgent(name="triage", agents=[Step(agent=refunds, when="classify.kind == 'refund'")]),
        ],
    )
    events: list[Event] = []
    result = await flow.invoke("Where is my parcel?", on_event=events.append)
    assert (result.status, result.answer, asked(refunds)) == ("completed", '{"kind": "question"}', 0)
    notes = [e.text for e in events if isinstance(e, MessageCompleted) and e.purpose == "note"]
    assert notes == [
        "conditional flow 'triage' ran no agent: none of its conditions held (\"classify.kind == 'refund'\")"
    ]


@pytest.mark.parametrize(
    ("agents", "code", "message"),
    [
        pytest.param(
            lambda a: [Step(agent=a("x", []), when="__import__('os').system('id')"), a("y", [])],
            "flow.when.invalid",
            "conditional flow 'c': agents[0] ('x'): the condition \"__import__('os').system('id')\" uses a call other "
            "than len(x) or lower(x) at column 1; a condition has only: names (state keys), a.b, a['b'], a[0], "
            "strings, numbers, true/false/null, lists, ==, !=, <, <=, >, >=, in, not in, and, or, not, len(x), "
            "lower(x)",
            id="a-call",
        ),
        pytest.param(
            lambda a: [a("x", []), Step(agent=a("y", []), when="input == 'a'")],
            "flow.when.default",
            "conditional flow 'c': agents[0] ('x') has no condition, so the agents after it never run; give it "
            "when=... or make it the last (the default branch)",
            id="default-first",
        ),
        pytest.param(
            lambda a: [Step(agent=a("x", []), when="review.score >"), a("y", [])],
            "flow.when.invalid",
            "conditional flow 'c': agents[0] ('x'): the condition 'review.score >' is not an expression: invalid "
            "syntax",
            id="syntax",
        ),
    ],
)
def test_conditions_are_checked_when_the_flow_is_built(
    agent: Make, agents: Callable[[Make], list[Any]], code: str, message: str
) -> None:
    with pytest.raises(FlowError) as caught:
        ConditionalAgent(name="c", agents=agents(agent))
    assert (caught.value.code, caught.value.message) == (code, message)


def test_the_condition_language() -> None:
    state = {"input": "URGENT: refund", "review": '{"score": 8, "tags": ["a"]}', "n": None}
    holds = [
        "review.score >= 7 and 'a' in review.tags",
        "review['tags'][0] == 'a' and len(review.tags) == 1",
        "'urgent' in lower(input) and not missing",
        "missing.deep.key == null and n == None",
        "review.score in [7, 8, 9]",
    ]
    for text in holds:
        assert parse_condition(text).holds(state), text
    for refused in ("open('f')", "review.__class__", "lambda: 1", "x if y else z", "input + 'a'", "review[1:2]"):
        with pytest.raises(ConditionError):
            parse_condition(refused)
    with pytest.raises(ConditionError, match="could not be evaluated"):
        parse_condition("review.score > 'high'").holds(state)


# -- interruptBefore ---------------------------------------------------------------------------------------


class SeesConfig(Hook):
    def __init__(self) -> None:
        self.configs: list[RunConfig] = []

    async def before_agent(self, ctx: HookContext) -> None:
        self.configs.append(ctx.config)


async def test_a_flow_pauses_before_a_step_and_a_run_of_its_session_goes_on(agent: Make, store: Store) -> None:
    writer = agent("writer", ["Here is the draft: Release 2.4.0 ships passkeys."])
    publisher = agent("publisher", ["Published it."], system="Publish: {draft}")
    hook = SeesConfig()
    flow = SequentialAgent(
        name="release",
        agents=[Step(agent=writer, output_key="draft"), publisher],
        interrupt_before=["publisher"],
        hooks=[hook],
    )
    config = RunConfig(thread_id="rel-7", metadata={"ticket": 9})
    paused = await flow.invoke("Release notes for 2.4.0", config=config)
    assert (paused.status, paused.reason) == ("paused", "interrupt_before")
    assert paused.answer == "Here is the draft: Release 2.4.0 ships passkeys." and paused.metadata == {"ticket": 9}
    assert (asked(writer), asked(publisher)) == (1, 0)
    meta = await store.get_session("rel-7")
    assert meta is not None and meta.status == "paused" and meta.extra["paused"]["agent"] == "publisher"

    done = await flow.invoke("go on", session_id="rel-7")
    assert (done.status, done.answer, done.reason) == ("completed", "Published it.", "finished")
    assert (asked(writer), asked(publisher)) == (1, 1)  # the writer did not run again
    request = publisher.script.requests[0]  # type: ignore[attr-defined]
    assert request.messages[0]["content"] == "Publish: Here is the draft: Release 2.4.0 ships passkeys."
    assert request.messages[1]["content"].startswith("Release notes for 2.4.0")  # the flow's own input
    meta = await store.get_session("rel-7")
    assert meta is not None and meta.status == "completed" and "paused" not in meta.extra
    assert [c["agent"] for c in meta.extra["children"]] == ["writer", "publisher"]
    assert [(c.thread_id, c.metadata) for c in hook.configs] == [("rel-7", {"ticket": 9}), ("rel-7", {})]


def test_interrupt_before_names_a_step_of_the_flow(agent: Make) -> None:
    with pytest.raises(FlowError, match="interrupt_before names 'nope', not a step of this flow") as caught:
        SequentialAgent(name="s", agents=[agent("a", [])], interrupt_before=["nope"])
    assert caught.value.code == "flow.interruptBefore.unknown"


# -- through blueprints and codeact run -------------------------------------------------------------------------

LEAF = """\
version: codeact.agent/v1
id: {id}
model: {{provider: scripted, model: scripted/{id}.replies.yaml}}
instructions: {{system: "{system}"}}
toolkits: [{{ref: system}}]
workflow: {{mode: react, maxTurns: 2}}
"""


def leaf(directory: Path, name: str, replies: list[str], system: str = "You help.") -> None:
    (directory / f"{name}.replies.yaml").write_text(json.dumps({"replies": replies}))
    (directory / f"{name}.yaml").write_text(LEAF.format(id=name, system=system))


def flows(directory: Path) -> Path:
    leaf(directory, "classify", [CLASSIFIED])
    leaf(directory, "refunds", ["Refund of 40 euros approved, waiting for the payout."], system="Refund {classify}")
    leaf(directory, "general", ["A general answer."])
    leaf(directory, "payout", ["Paid out 40 euros."], system="Pay out: {refunds}")
    (directory / "triage.yaml").write_text(
        textwrap.dedent(
            """\
            version: codeact.agent/v1
            id: triage
            workflow: {mode: flow}
            flow:
              kind: conditional
              agents:
                - path: ./refunds.yaml
                  when: classify.kind == "refund" and classify.amount < 100
                - path: ./general.yaml
            """
        )
    )
    path = directory / "support.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: codeact.agent/v1
            id: support
            workflow: {mode: flow}
            flow:
              kind: sequential
              interruptBefore: [payout]
              agents:
                - path: ./classify.yaml
                - path: ./triage.yaml
                - path: ./payout.yaml
            """
        )
    )
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "CODEACT_HOME": str(cwd / "home")}
    return subprocess.run([CODEACT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_codeact_run_branches_pauses_and_resumes_a_flow_blueprint(tmp_path: Path) -> None:
    path = flows(tmp_path)
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    first = cli(
        "run", str(path), "--input", "Money back for order 7", "--store", store, "--session", "s1", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    assert "Refund of 40 euros approved, waiting for the payout." in first.stdout
    assert "paused before the flow's next step (interruptBefore); go on with codeact run" in first.stderr
    assert "--session s1 --input continue" in first.stderr

    second = cli("run", str(path), "--input", "continue", "--store", store, "--session", "s1", "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    top = [e for e in events if "parent_run_id" not in e]
    assert [e["type"] for e in top] == ["run.started", "run.completed"]
    assert (top[-1]["answer"], top[-1]["reason"]) == ("Paid out 40 euros.", "finished")
    assert [e["agent"] for e in events if e["type"] == "flow.step.started"] == ["payout"]

    async def children() -> list[str]:
        async with SQLiteStore(tmp_path / "sessions.db") as opened:
            meta = await opened.get_session("s1")
        assert meta is not None and meta.status == "completed"
        return [c["agent"] for c in meta.extra["children"]]

    import asyncio

    assert asyncio.run(children()) == ["classify", "triage", "payout"]


def test_codeact_validate_checks_conditions_and_interrupts(tmp_path: Path) -> None:
    path = flows(tmp_path)
    text = path.read_text().replace("interruptBefore: [payout]", "interruptBefore: [payot]")
    path.write_text(text)
    triage = tmp_path / "triage.yaml"
    triage.write_text(triage.read_text().replace('classify.kind == "refund"', "classify.kind.__class__"))
    report = validate_blueprint(load_path(path))
    assert [(i.path, i.code) for i in report.errors] == [
        ("$.flow.agents[1].path", "blueprint.flow.when.invalid"),
        ("$.flow.interruptBefore[0]", "blueprint.flow.interruptBefore.unknown"),
    ]
    run = cli("validate", str(path), cwd=tmp_path)
    assert run.returncode == 1
    assert "uses the private name '__class__' at column 1" in run.stdout
    assert "flow.interruptBefore[0] 'payot' is not an agent of this flow; its agents are 'classify', 'triage'" in (
        run.stdout
    )
    path.write_text(text.replace("kind: sequential", "kind: parallel"))
    codes = [(i.path, i.code) for i in validate_blueprint(load_path(path)).errors]
    assert ("$.flow.interruptBefore", "blueprint.flow.interruptBefore.kind") in codes


async def test_the_docs_example_runs(agent: Make) -> None:
    """docs/flow.md's Python example, as written: a branch by condition, a pause before payout, the resume."""
    text = (Path(__file__).parents[2] / "docs" / "flow.md").read_text()
    start = text.index("```python\nfrom codeact.engine.flow import ConditionalAgent")
    block = text[start + len("```python\n") :]
    namespace: dict[str, Any] = {}
    exec(compile(block[: block.index("```")], "flow.md", "exec"), namespace)  # noqa: S102 - our own docs
    classify = agent("classify", [CLASSIFIED])
    refunds = agent("refunds", ["Refund of 40 euros approved."])
    general = agent("general", ["never"])
    payout = agent("payout", ["Paid out 40 euros."])
    flow = namespace["support_flow"](classify, refunds, general, payout)
    result = await namespace["handle"](flow, "Money back for order 7", "docs-1")
    assert (result.status, result.answer) == ("completed", "Paid out 40 euros.")
    assert (asked(classify), asked(refunds), asked(general), asked(payout)) == (1, 1, 0, 1)
