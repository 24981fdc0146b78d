"""ai4j blueprint files are never templated; codeact files are (issue 27 item 3).

ai4j reads ``instructions`` as text, so ``{{ }}`` in an ``ai4j.agent/v1`` file reaches the prompt as
written; a ``codeact.agent/v1`` file's instructions are rendered once, by the blueprint factory (a
literal ``{{`` it produces is not read as a placeholder a second time).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

AI4J = """\
version: ai4j.agent/v1
id: templ
model: {provider: openai-compatible, model: openai/test-model}
instructions:
  system: "Answer in the shape {{ name }}: {{ value }} and never fill the braces yourself."
workflow: {mode: codeact, maxTurns: 2}
"""
CODEACT = """\
version: codeact.agent/v1
extend: codeact-base
id: templ
model: {provider: openai-compatible, model: openai/test-model}
instructions:
  system: "Work on {{ project }}. Reply in the shape {{ '{{ name }}' }}."
  variables: {project: P-123}
workflow: {maxTurns: 2, codeact: {thought: 'off'}}
"""


def run(tmp_path: Path, openai_server: OpenAIServer, text: str, *, thought: bool = False) -> str:
    """Validate and run the blueprint; the system prompt the model was sent."""
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    rc, out, err = cli("validate", str(path))
    assert rc == 0, out + err
    if thought:  # ai4j files keep the default thought mode: a thought call, then the code call
        openai_server.push("The task is trivial: I finish at once.")
    openai_server.push("I'll finish.\n```python\nsystem.finish('done')\n```")
    rc, out, err = cli(
        "run", str(path), "--input", "go", "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--base-url", openai_server.base_url, "--isolation", "process",
    )  # fmt: skip
    assert rc == 0, err
    assert out == "done\n"
    posts = [r for r in openai_server.requests if r.method == "POST"]
    return json.dumps(posts[0].body["messages"][0]["content"])


def test_ai4j_braces_are_text(tmp_path: Path, openai_server: OpenAIServer) -> None:
    system = run(tmp_path, openai_server, AI4J, thought=True)
    assert "Answer in the shape {{ name }}: {{ value }} and never fill the braces yourself." in system


def test_codeact_instructions_are_rendered_once(tmp_path: Path, openai_server: OpenAIServer) -> None:
    system = run(tmp_path, openai_server, CODEACT)
    assert "Work on P-123. Reply in the shape {{ name }}." in system
