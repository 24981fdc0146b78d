"""A run that fails before its first round leaves no empty "failed" session behind (issue 35 item 10).

``codeact run`` against the local OpenAI-compatible server: the server refuses the key (HTTP 401) on the
first request, so nothing ran; ``codeact sessions list`` then shows no session. A run that did something
(round 1 ran code, round 2's request is refused) keeps its session, marked failed, with its round.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

AGENT = """\
version: codeact.agent/v1
extend: codeact-base
id: failing
model: {provider: openai-compatible, model: openai/test-model}
workflow: {maxTurns: 3, codeact: {thought: 'off'}}
"""


def _run(tmp_path: Path, server: OpenAIServer, session: str) -> tuple[int, str]:
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(AGENT)
    result = CliRunner().invoke(
        app,
        ["run", str(blueprint), "--input", "Count to three.", "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--session", session, "--base-url", server.base_url, "--isolation", "process"],
    )  # fmt: skip
    return result.exit_code, result.stderr + result.stdout


def _listed(tmp_path: Path) -> str:
    listed = CliRunner().invoke(app, ["sessions", "list", "--store", f"sqlite:///{tmp_path / 's.db'}"])
    assert listed.exit_code == 0, listed.stderr
    return listed.stdout


def test_a_run_refused_at_its_first_request_leaves_no_session(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.fail(401)
    code, output = _run(tmp_path, openai_server, "s-refused")
    assert code != 0 and "model.auth" in output, output
    assert "s-refused" not in _listed(tmp_path)


def test_a_run_that_did_something_keeps_its_session_marked_failed(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push("```python\ncount = 3\nprint(count)\n```")
    openai_server.fail(401)
    code, output = _run(tmp_path, openai_server, "s-partial")
    assert code != 0 and "model.auth" in output, output
    [row] = [line for line in _listed(tmp_path).splitlines() if line.startswith("s-partial")]
    assert row.split()[3:5] == ["failed", "1"], row
