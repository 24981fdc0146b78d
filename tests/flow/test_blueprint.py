"""Flow blueprints: loading (paths, cycles), validation of the whole tree, ``from_blueprint``, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codeact.engine.blueprint import load_path, validate_blueprint
from codeact.engine.errors import BlueprintFactoryError
from codeact.engine.flow import FlowAgent, LoopAgent, ParallelAgent, RoutingAgent, SequentialAgent
from codeact.engine.store import SessionMeta, SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flow" / "agent.yaml"
DEVOPS = f"{ROOT / 'examples' / 'devops' / 'toolkit.py'}:DevOps"
CODEACT = str(Path(sys.executable).parent / "codeact")

LEAF = """\
version: codeact.agent/v1
id: {id}
model: {{provider: scripted, model: scripted/{id}.replies.yaml}}
toolkits: [{{ref: system}}]
workflow: {{mode: react, maxTurns: 2}}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def leaf(directory: Path, name: str, replies: list[str]) -> Path:
    write(directory, f"{name}.replies.yaml", json.dumps({"replies": replies}))
    return write(directory, f"{name}.yaml", LEAF.format(id=name))


def flow_file(directory: Path, flow: str, name: str = "flow.yaml", extra: str = "") -> Path:
    body = textwrap.indent(textwrap.dedent(flow).strip("\n"), "  ")
    return write(
        directory,
        name,
        f"version: codeact.agent/v1\nid: {Path(name).stem}\n{extra}workflow: {{mode: flow}}\nflow:\n{body}\n",
    )


def issues(path: Path) -> list[tuple[str, str, str]]:
    report = validate_blueprint(load_path(path))
    return [(i.path, i.code, i.message) for i in report.issues]


@pytest.mark.parametrize(
    ("flow", "expected"),
    [
        pytest.param(
            "agents: [{path: ./a.yaml}]",
            (
                "$.flow.kind",
                "blueprint.flow.kind.required",
                "flow.kind is required: one of sequential, conditional, parallel, routing, loop.",
            ),
            id="kind-required",
        ),
        pytest.param(
            "kind: graph\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.kind",
                "blueprint.flow.kind.invalid",
                "flow.kind must be one of: sequential, conditional, parallel, routing, loop (got 'graph').",
            ),
            id="kind-invalid",
        ),
        pytest.param(
            "kind: sequential",
            ("$.flow.agents", "blueprint.flow.agents.required", "flow.agents is required: list the sub-agents."),
            id="agents-required",
        ),
        pytest.param(
            "kind: parallel\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.agents",
                "blueprint.flow.parallel.agents.count",
                "a parallel flow runs 2 to 10 sub-agents (got 1).",
            ),
            id="parallel-one",
        ),
        pytest.param(
            "kind: parallel\nagents: [" + ", ".join([f"{{path: ./a.yaml, name: a{i}}}" for i in range(11)]) + "]",
            (
                "$.flow.agents",
                "blueprint.flow.parallel.agents.count",
                "a parallel flow runs 2 to 10 sub-agents (got 11).",
            ),
            id="parallel-eleven",
        ),
        pytest.param(
            "kind: parallel\nagents: [{path: ./a.yaml, outputKey: k}, {path: ./b.yaml, outputKey: k}]",
            (
                "$.flow.agents[1].outputKey",
                "blueprint.flow.outputKey.duplicate",
                "flow.agents[1].outputKey 'k' is also the outputKey of flow.agents[0]: parallel branches must write "
                "distinct keys.",
            ),
            id="parallel-duplicate-key",
        ),
        pytest.param(
            "kind: parallel\nmergeStrategy: zip\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]",
            (
                "$.flow.mergeStrategy",
                "blueprint.flow.mergeStrategy.invalid",
                "flow.mergeStrategy must be one of: map, list, concat (got 'zip').",
            ),
            id="merge-strategy",
        ),
        pytest.param(
            "kind: parallel\nmergeOutputKey: k\nagents: [{path: ./a.yaml, outputKey: k}, {path: ./b.yaml}]",
            (
                "$.flow.mergeOutputKey",
                "blueprint.flow.mergeOutputKey.duplicate",
                "flow.mergeOutputKey 'k' is also the outputKey of flow.agents[0]; rename one.",
            ),
            id="merge-key-duplicate",
        ),
        pytest.param(
            "kind: parallel\nmergeOutputKey: 2bad\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]",
            (
                "$.flow.mergeOutputKey",
                "blueprint.flow.mergeOutputKey.invalid",
                "flow.mergeOutputKey '2bad' must be an identifier (letters, digits, '_').",
            ),
            id="merge-key-invalid",
        ),
        pytest.param(
            "kind: parallel\nmaxConcurrency: 0\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]",
            (
                "$.flow.maxConcurrency",
                "blueprint.flow.maxConcurrency.invalid",
                "flow.maxConcurrency must be at least 1 (leave it out for no limit).",
            ),
            id="max-concurrency",
        ),
        pytest.param(
            "kind: sequential\nagents: [{path: ./a.yaml, outputKey: 'my key'}]",
            (
                "$.flow.agents[0].outputKey",
                "blueprint.flow.outputKey.invalid",
                "flow.agents[0].outputKey 'my key' must be an identifier (letters, digits, '_'), so instructions can "
                "refer to it as {my key}.",
            ),
            id="output-key",
        ),
        pytest.param(
            "kind: sequential\nagents: [{outputKey: x}]",
            (
                "$.flow.agents[0].path",
                "blueprint.flow.agent.path.required",
                "flow.agents[0].path is required: the sub-agent's blueprint file.",
            ),
            id="path-required",
        ),
        pytest.param(
            "kind: sequential\nagents: [{path: ./missing.yaml}]",
            (
                "$.flow.agents[0].path",
                "blueprint.flow.agent.notFound",
                "flow.agents[0]: file 'missing.yaml' was not found; a path is relative to the file that declares it.",
            ),
            id="not-found",
        ),
        pytest.param(
            "kind: sequential\nagents: [{path: ./a.yaml}, {path: ./a.yaml}]",
            (
                "$.flow.agents[1].name",
                "blueprint.flow.agent.name.duplicate",
                "two sub-agents are named 'a' (flow.agents[0] and [1]); give one a name: field.",
            ),
            id="name-duplicate",
        ),
        pytest.param(
            "kind: routing\nagents: [{path: ./a.yaml, description: A}, {path: ./b.yaml}]",
            (
                "$.flow.agents[1].description",
                "blueprint.flow.agent.description.required",
                "flow.agents[1].description is required in a routing flow: the router picks agents by it.",
            ),
            id="routing-description",
        ),
        pytest.param(
            "kind: routing\nagents: [{path: ./a.yaml, description: A}]",
            (
                "$.model",
                "blueprint.flow.routing.model.required",
                "a routing flow calls a model to pick its agents: add a model block with provider and model.",
            ),
            id="routing-model",
        ),
        pytest.param(
            "kind: loop\nloop: {count: 2}\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]",
            (
                "$.flow.agents",
                "blueprint.flow.loop.agents.count",
                "a loop flow runs exactly one sub-agent (got 2); wrap several in a sequential flow first.",
            ),
            id="loop-two",
        ),
        pytest.param(
            "kind: loop\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop",
                "blueprint.flow.loop.required",
                "a loop flow needs flow.loop with one of: count, condition, array (e.g. loop: {count: 3}).",
            ),
            id="loop-required",
        ),
        pytest.param(
            "kind: loop\nloop: {count: 2, array: true}\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop",
                "blueprint.flow.loop.mode",
                "flow.loop takes exactly one of: count, condition, array (got count, array).",
            ),
            id="loop-mode",
        ),
        pytest.param(
            "kind: loop\nloop: {count: -1}\nagents: [{path: ./a.yaml}]",
            ("$.flow.loop.count", "blueprint.flow.loop.count.invalid", "flow.loop.count must be at least 1."),
            id="loop-count",
        ),
        pytest.param(
            "kind: loop\nloop: {condition: {contains: a, equals: b}}\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop.condition",
                "blueprint.flow.loop.condition.invalid",
                "flow.loop.condition takes exactly one of: contains, equals, matches (a regular expression).",
            ),
            id="loop-condition",
        ),
        pytest.param(
            "kind: loop\nloop: {condition: {matches: '(['}}\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop.condition.matches",
                "blueprint.flow.loop.condition.invalid",
                "flow.loop.condition.matches is not a regular expression: unterminated character set at position 1.",
            ),
            id="loop-regex",
        ),
        pytest.param(
            "kind: loop\nloop: {array: true, maxIterations: 5000}\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop.maxIterations",
                "blueprint.flow.loop.maxIterations.invalid",
                "flow.loop.maxIterations must be between 1 and 1000.",
            ),
            id="loop-max",
        ),
    ],
)
def test_flow_validation_errors(tmp_path: Path, flow: str, expected: tuple[str, str, str]) -> None:
    leaf(tmp_path, "a", ["A"])
    leaf(tmp_path, "b", ["B"])
    found = issues(flow_file(tmp_path, flow))
    assert expected in found, found


@pytest.mark.parametrize(
    ("flow", "expected"),
    [
        pytest.param(
            "kind: loop\nloop: {count: 5000}\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.loop.count",
                "blueprint.flow.loop.count.capped",
                "flow.loop.count 5000 is capped at 1000 iterations.",
            ),
            id="count-capped",
        ),
        pytest.param(
            "kind: sequential\nmaxConcurrency: 2\nagents: [{path: ./a.yaml}]",
            (
                "$.flow.maxConcurrency",
                "blueprint.flow.option.ignored",
                "flow.maxConcurrency only applies to parallel flows; it is ignored in a sequential flow.",
            ),
            id="ignored-option",
        ),
        pytest.param(
            "kind: sequential\nagents: [{path: ./a.yaml, outputKey: k}, {path: ./b.yaml, outputKey: k}]",
            (
                "$.flow.agents[1].outputKey",
                "blueprint.flow.outputKey.overwritten",
                "flow.agents[1].outputKey 'k' overwrites the result of flow.agents[0].",
            ),
            id="overwritten",
        ),
    ],
)
def test_flow_validation_warnings(tmp_path: Path, flow: str, expected: tuple[str, str, str]) -> None:
    leaf(tmp_path, "a", ["A"])
    leaf(tmp_path, "b", ["B"])
    report = validate_blueprint(load_path(flow_file(tmp_path, flow)))
    assert report.valid
    assert expected in [(i.path, i.code, i.message) for i in report.warnings]


def test_mode_flow_without_a_flow_block_and_a_flow_block_without_the_mode(tmp_path: Path) -> None:
    path = write(tmp_path, "f.yaml", "version: codeact.agent/v1\nid: f\nworkflow: {mode: flow}\n")
    assert issues(path) == [
        (
            "$.flow",
            "blueprint.flow.required",
            "workflow.mode is flow but there is no flow block; add flow: {kind: sequential, agents: [...]}.",
        )
    ]
    leaf(tmp_path, "a", ["A"])
    path = write(
        tmp_path,
        "g.yaml",
        "version: codeact.agent/v1\nid: g\nmodel: {provider: scripted, model: scripted/a.replies.yaml}\n"
        "flow: {kind: sequential, agents: [{path: ./a.yaml}]}\n",
    )
    assert issues(path) == [
        (
            "$.flow",
            "blueprint.flow.ignored",
            "the flow block is ignored because workflow.mode is not flow; set workflow: {mode: flow}.",
        )
    ]
    ai4j = write(
        tmp_path,
        "h.yaml",
        "version: ai4j.agent/v1\nid: h\nmodel: {provider: openai, model: m}\nworkflow: {mode: flow}\n",
    )
    assert (
        "$.workflow.mode",
        "blueprint.workflow.mode.invalid",
        "workflow.mode must be one of: react, codeact.",
    ) in issues(ai4j)


def test_cycles_are_refused_and_child_issues_name_the_entry(tmp_path: Path) -> None:
    flow_file(tmp_path, "kind: sequential\nagents: [{path: ./inner.yaml}]", name="outer.yaml")
    flow_file(tmp_path, "kind: sequential\nagents: [{path: ./outer.yaml}, {path: ./bad.yaml}]", name="inner.yaml")
    write(tmp_path, "bad.yaml", "version: codeact.agent/v1\nid: bad agent\nmodel: {provider: scripted, model: m}\n")
    found = issues(tmp_path / "outer.yaml")
    assert (
        "$.flow.agents[0].path",
        "blueprint.flow.agent.cycle",
        "flow agent 'inner' at $.flow.agents[0].path: flow.agents[0] refers back to a blueprint that declares it: "
        "outer.yaml -> inner.yaml -> outer.yaml. Remove the cycle.",
    ) in found
    assert (
        "$.flow.agents[0].path",
        "blueprint.id.invalid",
        "flow agent 'inner' at $.flow.agents[1].path: flow agent 'bad agent' at $.id: id must contain only letters, "
        "digits, '.', '_' or '-' (got 'bad agent').",
    ) in found


@pytest.mark.filterwarnings("ignore:coroutine .*acompletion' was never awaited:RuntimeWarning")
def test_from_blueprint_builds_the_tree_and_refuses_an_invalid_one(tmp_path: Path) -> None:
    leaf(tmp_path, "a", ["A"])
    leaf(tmp_path, "b", ["B"])
    leaf(tmp_path, "c", ["not yet", "C"])
    routed = '{"agents": [{"agent": "loop", "query": "until C"}]}'
    write(tmp_path, "router.replies.yaml", json.dumps({"replies": [routed]}))
    flow_file(
        tmp_path, "kind: parallel\nmergeStrategy: list\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]", name="par.yaml"
    )
    flow_file(tmp_path, "kind: loop\nloop: {condition: {contains: C}}\nagents: [{path: ./c.yaml}]", name="loop.yaml")
    flow_file(
        tmp_path,
        "kind: routing\nagents: [{path: ./loop.yaml, description: loops}, {path: ./par.yaml, description: fans out}]",
        name="route.yaml",
        extra="model: {provider: scripted, model: scripted/router.replies.yaml}\n",
    )
    path = flow_file(
        tmp_path,
        "kind: sequential\nagents: [{path: ./par.yaml, outputKey: both}, {path: ./route.yaml}]",
        name="top.yaml",
    )
    with FlowAgent.from_blueprint(path, store=f"sqlite:///{tmp_path / 's.db'}") as flow:
        assert isinstance(flow, SequentialAgent)
        par, route = (step.agent for step in flow.steps)
        assert isinstance(par, ParallelAgent) and par.merge_strategy == "list"
        assert isinstance(route, RoutingAgent) and [s.label for s in route.steps] == ["loop", "par"]
        assert isinstance(route.steps[0].agent, LoopAgent)
        assert [a.spec.id for a in flow.leaves()] == ["a", "b", "c", "a", "b"]
        result = flow.run_sync("go", session_id="top-1")
    # parallel, then routed to the loop until "C"
    assert (result.status, result.answer) == ("completed", "C"), result.error["message"] if result.error else None
    write(
        tmp_path,
        "b.yaml",
        "version: codeact.agent/v1\nid: b\nmodel: {provider: scripted, model: m}\ntoolkits: [{ref: nope}]\n",
    )
    with pytest.raises(BlueprintFactoryError) as caught:
        FlowAgent.from_blueprint(path, store=f"sqlite:///{tmp_path / 's.db'}")
    assert caught.value.code == "blueprint.toolkit.notFound"
    assert caught.value.message.startswith("flow agent 'par' (flow.agents[0]): flow agent 'b' (flow.agents[1]): ")


async def _meta(path: Path, session_id: str) -> SessionMeta:
    async with SQLiteStore(path) as store:
        meta = await store.get_session(session_id)
    assert meta is not None
    return meta


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([CODEACT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_cli_validate_checks_the_whole_tree(tmp_path: Path) -> None:
    leaf(tmp_path, "a", ["A"])
    write(tmp_path, "b.yaml", "version: codeact.agent/v1\nid: b\nworkflow: {mode: react}\n")
    path = flow_file(tmp_path, "kind: parallel\nagents: [{path: ./a.yaml}, {path: ./b.yaml}, {path: ./c.yaml}]")
    result = _cli("validate", str(path), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"Blueprint {path} is invalid (2 errors, 0 warnings).",
        "  ERROR $.flow.agents[1].path blueprint.model.required: flow agent 'b' at $.model: model is required; add a "
        "model block with provider and model.",
        "  ERROR $.flow.agents[2].path blueprint.flow.agent.notFound: flow.agents[2]: file 'c.yaml' was not found; a "
        "path is relative to the file that declares it.",
    ]
    assert validate_blueprint(load_path(EXAMPLE)).issues == ()


def test_the_example_runs_offline_and_its_session_shows_and_replays_as_a_tree(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    run = _cli(
        "run", str(EXAMPLE), "--toolkit", DEVOPS, "--input", "Release P-123", "--store", store,
        "--session", "rel-1", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    top = [e for e in events if "parent_run_id" not in e]
    assert [e["type"] for e in top] == ["run.started", "run.completed"]
    assert top[-1]["answer"] == {
        "open_requirements": ["Login with passkeys", "Login audit log"],
        "deployment": "Deployed checkout-api 2.4.0 as deployment D-1001.",
    }
    steps = [
        (e["agent"], e["position"], e["parent_run_id"] == top[0]["run_id"])
        for e in events
        if e["type"] == "flow.step.started"
    ]
    assert steps == [
        ("planner", "1", True),
        ("release-checks", "2", True),
        ("requirements", "branch 1", False),
        ("deployer", "branch 2", False),
    ]
    deploy = next(e for e in events if e["type"] == "tool.call.completed" and e["operation"] == "deploy_app")
    assert deploy["result"]["version"] == "2.4.0"

    shown = _cli("sessions", "show", "rel-1", "--store", store, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    tree = shown.stdout[shown.stdout.index("  flow:") :].splitlines()[1:6]
    assert [line.rstrip() for line in tree] == [
        "    release-flow (sequential) · rel-1 · completed, 5 rounds",
        "    ├─ 1 planner (codeact) · rel-1.1.planner · completed, 2 rounds",
        "    └─ 2 release-checks (parallel) · rel-1.2.release-checks · completed, 3 rounds",
        "       ├─ branch 1 requirements (codeact) · rel-1.2.release-checks.1.requirements · completed, 1 round",
        "       └─ branch 2 deployer (react) · rel-1.2.release-checks.2.deployer · completed, 2 rounds",
    ]
    child = asyncio.run(_meta(tmp_path / "sessions.db", "rel-1.2.release-checks.2.deployer"))
    assert child.extra["flow"]["parent_session"] == "rel-1.2.release-checks"
    assert child.extra["flow"]["position"] == "branch 2"

    replay = _cli("replay", "rel-1", "--store", store, "--toolkit", DEVOPS, "--json", cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    report = json.loads(replay.stdout)
    assert report["ok"] and report["flow"]
    assert [(s["agent"], [r["status"] for r in s["rounds"]]) for s in report["steps"]] == [
        ("planner", ["match", "match"]),
        ("requirements", ["match"]),
        ("deployer", ["skipped", "skipped"]),
    ]


def test_agent_from_blueprint_points_to_the_flow_builder() -> None:
    from codeact.engine.agent import Agent

    with pytest.raises(BlueprintFactoryError) as caught:
        Agent.from_blueprint(EXAMPLE)
    assert caught.value.code == "blueprint.flow.isAFlow"
    assert "build it with engine.flow.FlowAgent.from_blueprint(...)" in caught.value.message


def test_the_example_runs_from_python(tmp_path: Path) -> None:
    with FlowAgent.from_blueprint(EXAMPLE, toolkits=[DEVOPS], store=f"sqlite:///{tmp_path / 's.db'}") as flow:
        result = flow.run_sync("Release P-123", session_id="py-1")
    assert result.status == "completed", result
    assert result.answer["deployment"] == "Deployed checkout-api 2.4.0 as deployment D-1001."


def test_the_flow_hash_does_not_depend_on_where_the_files_live(tmp_path: Path) -> None:
    import shutil

    from codeact.engine.flow._build import flow_hash

    copy = tmp_path / "elsewhere"
    shutil.copytree(EXAMPLE.parent, copy)
    assert flow_hash(load_path(copy / "agent.yaml")) == flow_hash(load_path(EXAMPLE))
    (copy / "deployer.yaml").write_text((copy / "deployer.yaml").read_text().replace("maxTurns: 3", "maxTurns: 4"))
    assert flow_hash(load_path(copy / "agent.yaml")) != flow_hash(load_path(EXAMPLE))


def test_more_loading_errors(tmp_path: Path) -> None:
    write(tmp_path, "broken.yaml", "version: codeact.agent/v1\nid: [unclosed\n")
    leaf(tmp_path, "a", ["A"])
    found = issues(
        flow_file(tmp_path, "kind: sequential\nagents: [{path: ./broken.yaml}, {path: ./a.yaml, name: 'a b'}]")
    )
    codes = {(path, code) for path, code, _ in found}
    assert ("$.flow.agents[0].path", "blueprint.flow.agent.invalid") in codes
    assert (
        "$.flow.agents[1].name",
        "blueprint.flow.agent.name.invalid",
        "flow.agents[1].name 'a b' must contain only letters, digits, '.', '_' or '-'.",
    ) in found
    # A chain of 10 flows: the 9th level is refused.
    leaf(tmp_path, "end", ["E"])
    for level in range(10, 0, -1):
        target = "end.yaml" if level == 10 else f"level{level + 1}.yaml"
        flow_file(tmp_path, f"kind: sequential\nagents: [{{path: ./{target}}}]", name=f"level{level}.yaml")
    deep = validate_blueprint(load_path(tmp_path / "level1.yaml"))
    assert any(i.code == "blueprint.flow.agent.tooDeep" for i in deep.errors)
    with pytest.raises(BlueprintFactoryError) as caught:
        FlowAgent.from_blueprint(tmp_path / "a.yaml", store=f"sqlite:///{tmp_path / 's.db'}")
    assert caught.value.code == "blueprint.flow.notAFlow"


def test_the_agent_factory_refuses_a_flow_even_as_a_subagent(tmp_path: Path) -> None:
    from codeact.engine.blueprint import AgentFactory, HostContext

    leaf(tmp_path, "a", ["A"])
    flow_file(tmp_path, "kind: sequential\nagents: [{path: ./a.yaml}]", name="team.yaml")
    lead = write(
        tmp_path,
        "lead.yaml",
        "version: codeact.agent/v1\nid: lead\nmodel: {provider: scripted, model: m}\n"
        "subagents: {team: {path: ./team.yaml, description: A team}}\n",
    )
    with pytest.raises(BlueprintFactoryError) as caught:
        AgentFactory().create(load_path(lead), HostContext(model_client=object()))
    assert caught.value.code == "blueprint.flow.isAFlow"
    assert caught.value.message.startswith("Subagent 'team': blueprint 'team' is a flow (workflow.mode: flow)")
