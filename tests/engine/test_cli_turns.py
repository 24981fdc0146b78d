"""The ``turns`` layout of chat code prompts (issue 29, item 5): each round a chat turn.

Qwen2.5-Coder-1.5B, given every round in one user message ending with the program to fill in,
repeats its first code until the run is stuck (5 of 5 multitool tasks); given the rounds as chat
turns (its code an assistant message, the output the next user message, which says what to reply)
it finishes. Through ``codeact run`` against the local OpenAI-compatible server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: turns
model: {{provider: openai-compatible, model: openai/test-model}}
workflow: {{maxTurns: 4, codeact: {{thought: '{thought}', layout: {layout}{extra}}}}}
"""
ROUND_1 = """```python
gc = round(21 / 33, 4)
print(gc)
```"""
ROUND_2 = "```python\nawait system.finish(answer=gc)\n```"


def _run(path: Path, tmp_path: Path, openai_server: OpenAIServer) -> Result:
    """``codeact run`` of ``path`` on the question against the test server; it must succeed."""
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", "What is 21/33 to 4 decimals?", "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--base-url", openai_server.base_url, "--isolation", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return result


def test_each_round_is_a_chat_turn_and_the_last_message_says_what_to_reply(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(layout="turns", thought="off", extra=""))
    openai_server.push(ROUND_1, ROUND_2)
    result = _run(path, tmp_path, openai_server)
    assert result.stdout == "0.6364\n"
    first, second = ([m for m in r.body["messages"]] for r in openai_server.requests if r.method == "POST")
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"].startswith("User: What is 21/33 to 4 decimals?\n")
    assert "Reply with the code of the first step, in one ```python block." in first[1]["content"]
    assert "```python\n" not in first[1]["content"]  # no program frame to fill in
    assert "Reply with one ```python block: the code of one step." in first[0]["content"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[:2] == first[:1] + [{"role": "user", "content": "User: What is 21/33 to 4 decimals?"}]
    assert second[2]["content"] == "```python\ngc = round(21 / 33, 4)\nprint(gc)\n```"
    last = second[3]["content"]
    assert last.startswith("Evaluation: Output:\n0.6364\n")
    assert "#   gc: float = 0.6364" in last  # the variables header, as comments
    assert "If the output above answers the task, reply with `await system.finish(answer=...)`" in last
    # the task again just above what to reply: a small model that read one output checks it against the task
    assert "\nThe task: What is 21/33 to 4 decimals?\nIf the output above answers the task" in last


@pytest.mark.parametrize(
    ("thought", "extra", "restated"),
    [
        pytest.param("inline", "", False, id="inline-thought-states-its-own-goal"),
        pytest.param("off", ", restateTask: false", False, id="switched-off"),
        pytest.param("inline", ", restateTask: true", True, id="switched-on-with-inline-thought"),
    ],
)
def test_the_task_is_said_again_unless_the_reply_states_its_own_goal_or_the_blueprint_says_no(
    tmp_path: Path, openai_server: OpenAIServer, thought: str, extra: str, restated: bool
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(layout="turns", thought=thought, extra=extra))
    openai_server.push(*(f"Thought: step {n}.\n{reply}" for n, reply in enumerate((ROUND_1, ROUND_2))))
    result = _run(path, tmp_path, openai_server)
    assert result.stdout == "0.6364\n"
    last = [r.body["messages"] for r in openai_server.requests if r.method == "POST"][1][-1]["content"]
    assert last.startswith("Evaluation: Output:\n0.6364\n")
    assert ("The task: What is 21/33" in last) is restated


def test_the_frame_layout_stays_the_default(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(layout="frame", thought="off", extra="").replace(", layout: frame", ""))
    openai_server.push(ROUND_1, ROUND_2)
    _run(path, tmp_path, openai_server)
    second = [r.body["messages"] for r in openai_server.requests if r.method == "POST"][1]
    assert [m["role"] for m in second] == ["system", "user"]
    assert "your code replaces the line `# <your code for this round>`" in json.dumps(second)


def test_an_unknown_layout_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(layout="chat", thought="off", extra=""))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    assert "workflow.codeact.layout must be one of: frame, turns (got 'chat')." in result.stdout + result.stderr
