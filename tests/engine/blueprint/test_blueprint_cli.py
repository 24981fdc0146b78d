from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from codeact.engine.cli import app

from ._helpers import fixture

runner = CliRunner()


def test_validate_valid_file_exits_0() -> None:
    path = fixture("cli/valid.yaml")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0
    assert result.stdout == (
        f"Blueprint {path} is valid (0 errors, 1 warning).\n"
        "  WARNING $.session.memory blueprint.memory.scope.warning: session.memory.enabled is true but neither "
        "scope nor store is declared.\n"
    )


def test_validate_invalid_file_exits_1() -> None:
    path = fixture("cli/invalid.yaml")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"Blueprint {path} is invalid (2 errors, 0 warnings).",
        "  ERROR $.id blueprint.id.invalid: id must contain only letters, digits, '.', '_' or '-' (got 'cli invalid').",
        "  ERROR $.workflow.mode blueprint.workflow.mode.invalid: workflow.mode must be one of: react, codeact.",
    ]


def test_validate_json() -> None:
    result = runner.invoke(app, ["validate", str(fixture("cli/invalid.yaml")), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "valid": False,
        "issues": [
            {
                "severity": "ERROR",
                "path": "$.id",
                "code": "blueprint.id.invalid",
                "message": "id must contain only letters, digits, '.', '_' or '-' (got 'cli invalid').",
            },
            {
                "severity": "ERROR",
                "path": "$.workflow.mode",
                "code": "blueprint.workflow.mode.invalid",
                "message": "workflow.mode must be one of: react, codeact.",
            },
        ],
    }
    valid = runner.invoke(app, ["validate", "--json", str(fixture("validate/valid_ai4j_full.yaml"))])
    assert valid.exit_code == 0 and json.loads(valid.stdout) == {"valid": True, "issues": []}


def test_validate_load_error_exits_2() -> None:
    result = runner.invoke(app, ["validate", str(fixture("cli/broken.yaml"))])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "Blueprint load error [blueprint.yaml.invalid]: Invalid Agent Blueprint YAML in broken.yaml: "
        "while parsing a flow sequence; "
        "expected ',' or ']', but got '<stream end>' at line 3, column 1. Fix the YAML syntax there.\n"
    )
    for args in (["validate", str(fixture("cli/broken.yaml")), "--json"], ["validate", "no/such/file.yaml"]):
        other = runner.invoke(app, args)
        assert other.exit_code == 2 and other.stderr.startswith("Blueprint load error [blueprint.")


def test_validate_reports_extend_problems_as_invalid() -> None:
    result = runner.invoke(app, ["validate", str(fixture("inherit/cycle_a.yaml"))])
    assert result.exit_code == 1
    assert "ERROR $.extend blueprint.extend.cycle: extend forms a cycle: cycle_a.yaml -> cycle_b.yaml" in result.stdout


def test_a_react_agent_extending_codeact_base_is_not_warned_about_the_base_s_codeact_block(tmp_path: Path) -> None:
    """The eval's react blueprints were warned `workflow.codeact is ignored` for a block only the base writes."""
    inherited = tmp_path / "react.yaml"
    head = "version: codeact.agent/v1\nextend: codeact-base\nid: r\nmodel: {provider: openai, model: gpt-4o}\n"
    inherited.write_text(f"{head}workflow: {{mode: react}}\n")
    own = tmp_path / "react-own.yaml"
    own.write_text(f"{head}workflow: {{mode: react, codeact: {{thought: 'off'}}}}\n")
    quiet = runner.invoke(app, ["validate", str(inherited)])
    warned = runner.invoke(app, ["validate", str(own)])
    assert quiet.exit_code == 0 and quiet.stdout == f"Blueprint {inherited} is valid (0 errors, 0 warnings).\n"
    assert warned.exit_code == 0 and "WARNING $.workflow.codeact blueprint.workflow.codeact.ignored" in warned.stdout
