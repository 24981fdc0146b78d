"""NextGoal (seed 001: the TaskExecutor states the next goal each round), issue 27 item 6.

In the inline thought mode the code reply is the round's only reply: it may state ``NextGoal: ...``
(a prose line, or a ``# NextGoal:`` comment in completion frames); the engine records it after the
round's Evaluation and the next round's frame header shows it as ``# Goal: ...``. The default mode
(a separate thought call) and its prompts are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: goals
model: {{provider: openai-compatible, model: openai/test-model}}
workflow: {{maxTurns: 4, codeact: {{thought: {thought}, protocol: {protocol}}}}}
"""
ROUND_1 = """Thought: I need the apps before I can deploy anything.
NextGoal: deploy version 2.4.0 of the api app
```python
apps = ["api", "web"]
print(apps)
```"""
ROUND_2 = """The api app is there.
```python
system.finish(f"deployed {apps[0]} 2.4.0")
```"""
INVITE = "one line `NextGoal: <what the round after this one should do>`"


def run(tmp_path: Path, server: OpenAIServer, *, thought: str, protocol: str = "chat") -> list[str]:
    """Run the two rounds; the text of every request body, in order."""
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(thought=thought, protocol=protocol))
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", "Deploy 2.4.0 of the api", "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--base-url", server.base_url, "--isolation", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "deployed api 2.4.0\n"
    return [json.dumps(r.body) for r in server.requests if r.method == "POST"]


def test_inline_reply_states_the_next_goal_and_the_next_frame_shows_it(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(ROUND_1, ROUND_2)
    first, second = run(tmp_path, openai_server, thought="inline")
    assert INVITE in first  # the code prompt invites it in this mode
    assert "# Goal:" not in first
    assert "# Goal: deploy version 2.4.0 of the api app" in second
    last_user = json.loads(second)["messages"][-1]["content"]
    assert "# Goal: deploy version 2.4.0 of the api app" in last_user  # in the program header


def test_completion_frames_take_the_goal_from_a_comment(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        'apps = ["api", "web"]\nprint(apps)\n# NextGoal: finish with the api app\n',
        'system.finish(f"deployed {apps[0]} 2.4.0")\n',
    )
    first, second = run(tmp_path, openai_server, thought="inline", protocol="completion")
    assert "# NextGoal: <what the round after this one should do>" in first
    assert "# Goal: finish with the api app" in second


def test_the_default_mode_neither_asks_nor_shows_a_goal(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push("Thought: list the apps.", ROUND_1, "Thought: deploy.", ROUND_2)
    bodies = run(tmp_path, openai_server, thought="separate")
    assert not any(INVITE in body or "# Goal:" in body for body in bodies)
