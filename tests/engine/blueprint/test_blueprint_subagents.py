from __future__ import annotations

from pathlib import Path

from codeact.engine.blueprint import load_path, validate_blueprint

from ._helpers import FIXTURES, fixture, report_for, triples


def test_subagents_load_with_their_parent() -> None:
    parent = load_path(fixture("subagents/parent.yaml"))
    coder = parent.subagent_blueprints["coder"]
    assert coder.id == "coder" and coder.source_path == FIXTURES / "subagents" / "agents" / "coder.yaml"
    assert validate_blueprint(parent).issues == ()


def test_subagent_problems_are_reported_with_the_parent() -> None:
    report = report_for("subagents/problems.yaml")
    assert triples(report) == [
        ("ERROR", "$.subagents.ghost.path", "blueprint.subagent.notFound"),
        ("ERROR", "$.subagents.broken.path", "blueprint.subagent.invalid"),
        ("ERROR", "$.subagents.invalid.path", "blueprint.id.invalid"),
        ("ERROR", "$.subagents.invalid.path", "blueprint.model.provider.required"),
    ]
    assert [issue.message for issue in report.issues] == [
        "Subagent 'ghost': file 'agents/ghost.yaml' was not found; a path is relative to the file that declares it.",
        "Subagent 'broken' could not be loaded [blueprint.yaml.invalid]: Invalid Agent Blueprint YAML in broken.yaml: "
        "while "
        "parsing a flow sequence; expected ',' or ']', but got '<stream end>' at line 3, column 1. "
        "Fix the YAML syntax there.",
        "Subagent 'invalid' at $.id: id must contain only letters, digits, '.', '_' or '-' (got 'invalid sub').",
        "Subagent 'invalid' at $.model.provider: model.provider is required, e.g. provider: openai-compatible.",
    ]


def test_subagent_cycle_is_an_error_not_a_recursion() -> None:
    report = report_for("subagents/loop_parent.yaml")
    assert triples(report) == [("ERROR", "$.subagents.child.path", "blueprint.subagent.cycle")]
    assert report.issues[0].message == (
        "Subagent 'child' at $.subagents.parent.path: Subagent 'parent' refers back to a blueprint that declares "
        "it: loop_parent.yaml -> loop_child.yaml -> loop_parent.yaml. Remove the cycle."
    )


def test_null_removes_an_inherited_subagent() -> None:
    blueprint = load_path(fixture("subagents/removes_inherited.yaml"))
    assert blueprint.subagents == {"coder": None} and blueprint.subagent_blueprints == {}
    assert validate_blueprint(blueprint).issues == ()


def test_subagent_nesting_limit(tmp_path: Path) -> None:
    for index in range(10):
        sub = f"subagents: {{next: {{path: ./a{index + 1}.yaml, description: next}}}}\n" if index < 9 else ""
        (tmp_path / f"a{index}.yaml").write_text(
            f"version: codeact.agent/v1\nid: a{index}\nmodel: {{provider: openai, model: m}}\n{sub}"
        )
    report = validate_blueprint(load_path(tmp_path / "a0.yaml"))
    assert [issue.code for issue in report.issues] == ["blueprint.subagent.tooDeep"]
    assert report.issues[0].path == "$.subagents.next.path"
