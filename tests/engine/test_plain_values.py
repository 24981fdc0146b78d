"""The model reads variables as Python shows them: the prompt's variables header never shows a codec tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeact.engine import Agent
from tests.engine.openai_server import OpenAIServer

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: plain-values
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""
FIRST = (
    "Thought: I keep a date and a pair.\n```python\nimport datetime\n"
    "when = datetime.date(2026, 1, 2)\npair = (1, 2)\nseen = {3}\n```"
)
SECOND = 'Thought: Done.\n```python\nsystem.finish("ok")\n```'


async def test_the_variables_header_shows_python_values(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    openai_server.push(FIRST, SECOND)
    async with Agent.from_blueprint(
        blueprint, model="openai/test-model", base_url=openai_server.base_url, store=f"sqlite:///{tmp_path / 's.db'}"
    ) as agent:
        result = await agent.invoke("Keep a date.")
    assert result.status == "completed", result.error
    prompt = json.dumps(openai_server.requests[-1].body["messages"])
    assert "$type" not in prompt
    header = openai_server.requests[-1].body["messages"][-1]["content"]
    assert "#   when: date = datetime.date(2026, 1, 2)\n" in header
    assert "#   pair: tuple = (1, 2)\n" in header
    assert "#   seen: set = {3}\n" in header
