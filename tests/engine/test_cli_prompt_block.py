"""A blueprint's ``prompt:`` block sets the platform intro and the system sections (issue 36, seed 001).

``PromptConfig.platform/sections/templates/overrides`` existed, but nothing set them from a blueprint:
every prompt said "codeact, a code-driven agent engine". ``codeact run`` against the local
OpenAI-compatible server; the system message the server receives is asserted. A misspelled section is
an error of ``codeact validate`` that names the known sections.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

AGENT = """\
version: codeact.agent/v1
extend: codeact-base
id: desk
model: {{provider: openai-compatible, model: openai/test-model}}
workflow: {{maxTurns: 2, codeact: {{thought: 'off'}}}}
prompt:
{block}
"""


def _write(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(AGENT.format(block=block))
    return path


def test_the_platform_and_a_section_come_from_the_blueprint(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _write(
        tmp_path,
        "  platform: Acme's support desk\n"
        '  overrides:\n    principles: "## Principles\\nAnswer in one line, for the front desk."\n',
    )
    openai_server.push('```python\nsystem.finish("hello")\n```')
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", "Say hello.", "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--base-url", openai_server.base_url, "--isolation", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "hello"
    system = json.dumps(openai_server.requests[0].body["messages"][0]["content"])
    assert "You are an agent on Acme's support desk." in system
    assert "codeact, a code-driven agent engine" not in system
    assert "Answer in one line, for the front desk." in system


def test_a_misspelled_section_fails_validate_with_the_known_names(tmp_path: Path) -> None:
    path = _write(tmp_path, "  sections: [platform, role, mechansim]\n  templates: {role: no_such.j2}\n")
    result = CliRunner().invoke(app, ["validate", "--json", str(path)])
    assert result.exit_code == 1, result.output
    issues = {i["path"]: i for i in json.loads(result.stdout)["issues"]}
    assert issues["$.prompt.sections"]["code"] == "blueprint.prompt.invalid"
    assert "mechansim" in issues["$.prompt.sections"]["message"]
    assert "'mechanism'" in issues["$.prompt.sections"]["message"]  # the known names, to pick from
    assert "no_such.j2" in issues["$.prompt.templates"]["message"]
