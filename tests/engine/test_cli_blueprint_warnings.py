"""Blueprint mistakes caught where the author looks (issue 27 item 2).

``codeact run`` (and ``serve``, ``worker``, ``eval``, ``Agent.from_blueprint``) print the validator's
warnings on stderr, one line each, before the run; an unknown field names the closest known field of
its mapping; ``--strict`` (``strict=True``) makes warnings errors. Real CLI, real sandbox, the local
OpenAI-compatible server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeact.engine.agent import Agent
from codeact.engine.blueprint import load_text, validate_blueprint
from codeact.engine.errors import BlueprintFactoryError
from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

TYPO = (
    "WARNING $.instruction blueprint.field.unknown: Unknown top-level field: instruction; did you mean 'instructions'?"
)
TYPO_BLUEPRINT = """\
version: codeact.agent/v1
id: typo
model: {provider: openai-compatible, model: openai/test-model}
toolkits:
  - ref: system
instruction: {system: Add numbers.}
workflow: {mode: codeact, maxTurns: 3, codeact: {thought: 'off'}}
"""


def test_run_prints_the_typo_with_its_suggestion_before_the_run(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(TYPO_BLUEPRINT)
    openai_server.push("Let me add them.\n```python\nsystem.finish(2 + 3)\n```")
    rc, out, err = cli(
        "run", str(path), "--input", "add 2 and 3", "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--base-url", openai_server.base_url,
    )  # fmt: skip
    assert rc == 0, err
    assert out == "5\n"
    lines = err.splitlines()
    assert TYPO in lines
    assert lines.index(TYPO) < next(i for i, line in enumerate(lines) if "round 1" in line)


def test_run_strict_refuses_the_typo_with_exit_1(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(TYPO_BLUEPRINT)
    rc, out, err = cli(
        "run", str(path), "--input", "add 2 and 3", "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--base-url", openai_server.base_url, "--strict", "--json",
    )  # fmt: skip
    assert rc == 1
    assert err.splitlines() == [
        "Blueprint factory error [blueprint.validation.strict]: Agent Blueprint has 1 warning and --strict makes "
        "warnings errors; fix the issues listed (codeact validate FILE shows them).",
        f"  {TYPO}",
    ]
    assert json.loads(out)["error"]["code"] == "blueprint.validation.strict"
    assert openai_server.requests == []  # nothing ran


def test_validate_strict_and_suggestions_of_nested_fields(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        TYPO_BLUEPRINT.replace("instruction: {system: Add numbers.}\n", "").replace(
            "maxTurns: 3, codeact: {thought: 'off'}", "maxTurn: 3, codeact: {thougth: 'off', max_repeats: 2}"
        )
    )
    rc, out, _ = cli("validate", str(path))
    assert rc == 0
    assert out.splitlines()[1:] == [
        "  WARNING $.workflow.maxTurn blueprint.field.unknown: Unknown field: workflow.maxTurn; "
        "did you mean 'maxTurns'?",
        "  WARNING $.workflow.codeact.thougth blueprint.field.unknown: Unknown field: workflow.codeact.thougth; "
        "did you mean 'thought'?",
        "  WARNING $.workflow.codeact.max_repeats blueprint.field.unknown: Unknown field: "
        "workflow.codeact.max_repeats; did you mean 'maxRepeats'?",
    ]
    rc, out, _ = cli("validate", str(path), "--strict", "--json")
    assert rc == 1
    report = json.loads(out)
    assert report["valid"] is False
    assert {issue["severity"] for issue in report["issues"]} == {"ERROR"}


def test_far_names_get_no_suggestion_and_ai4j_keeps_its_rule() -> None:
    codeact = load_text("version: codeact.agent/v1\nid: a\nmodel: {provider: openai, model: m}\nzzzzzz: 1\n")
    assert [i.message for i in validate_blueprint(codeact).issues] == ["Unknown top-level field: zzzzzz."]
    # ai4j.agent/v1: unknown fields stay warnings, only at the top level (ai4j's rule); a codeact field says so.
    ai4j = load_text(
        "version: ai4j.agent/v1\nid: a\nmodel: {provider: openai, model: m, routes: {}}\nteam: [a]\n"
        "workflow: {mode: codeact, maxTurn: 2}\n"
    )
    report = validate_blueprint(ai4j)
    assert report.valid
    assert [(i.severity.value, i.message) for i in report.issues] == [("WARNING", "Unknown top-level field: team.")]
    # ... except where a key decides what the model may do: a grant is never ignored silently (issue 35).
    report = validate_blueprint(load_text("version: ai4j.agent/v1\nid: a\nmodel: {provider: openai, model: m}\n"
                                          "toolkits: [{ref: system}]\n"))  # fmt: skip
    assert [(i.severity.value, i.message) for i in report.issues] == [
        (
            "ERROR",
            "Unknown top-level field: toolkits; it is a codeact.agent/v1 field: set version: codeact.agent/v1 "
            "to use it. Keys that decide what the model may do are never ignored: fix this one or remove it.",
        )
    ]


def test_from_blueprint_prints_warnings_and_strict_raises(
    tmp_path: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(TYPO_BLUEPRINT)
    store = f"sqlite:///{tmp_path / 's.db'}"
    openai_server.push("```python\nsystem.finish('ok')\n```")
    with Agent.from_blueprint(path, base_url=openai_server.base_url, store=store, isolation="process") as agent:
        assert capsys.readouterr().err.splitlines() == [TYPO]
        assert agent.run_sync("go").answer == "ok"
    with pytest.raises(BlueprintFactoryError) as caught:
        Agent.from_blueprint(path, base_url=openai_server.base_url, store=store, strict=True)
    assert caught.value.code == "blueprint.validation.strict"
    assert [issue.format() for issue in caught.value.report.issues] == [TYPO]  # type: ignore[union-attr]
