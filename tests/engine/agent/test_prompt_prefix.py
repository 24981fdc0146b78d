"""Rounds reuse the server's prompt cache: round k+1's prompt starts with round k's, byte for byte.

Everything before round k's code frame (system prompt, toolkit stubs, task, earlier rounds) reaches the
model unchanged in round k+1, with round k appended after it: no timestamp, counter or re-rendered
variable earlier in the prompt, so an OpenAI-compatible server with a prompt cache (llama.cpp, vLLM)
computes only the new tokens. Checked on the DevOps example's five scripted rounds through the real CLI
and the local OpenAI-compatible server, for the chat FIM frame and the raw FIM completion protocol.
The real share of cached tokens is measured by the real-model tier (tests/real_model).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "devops"
DEMO_INPUT = "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."


def _flat(body: dict[str, object]) -> str:
    """What the server tokenizes: the raw prompt, or the messages as a ChatML template lays them out."""
    if "prompt" in body:
        return str(body["prompt"])
    messages = body["messages"]
    assert isinstance(messages, list)
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def _before_frame(prompt: str, protocol: str) -> str:
    """The prompt up to where its code frame starts (the frame is the last thing and changes every round)."""
    marker = "Python:\nThis round's program" if protocol == "chat" else "# Variables from earlier rounds"
    return prompt[: prompt.rindex(marker)].rstrip("\n")


@pytest.mark.parametrize("protocol", [pytest.param("chat", id="fim-chat"), pytest.param("completion", id="fim-raw")])
def test_each_round_extends_the_previous_prompt(
    protocol: str, tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    replies = yaml.safe_load((DEMO / "replies.yaml").read_text(encoding="utf-8"))["replies"]
    openai_server.push(*replies)
    result = CliRunner().invoke(app, [
        "run", str(DEMO / "agent.yaml"), "--toolkit", f"{DEMO / 'toolkit.py'}:DevOps", "--input", DEMO_INPUT,
        "--model", "openai/qwen2.5-coder", "--base-url", openai_server.base_url, "--protocol", protocol,
        "--store", f"sqlite:///{tmp_path / 's.db'}",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    prompts = [_flat(r.body) for r in openai_server.requests if r.method == "POST"]
    assert len(prompts) == 5
    for k in range(1, len(prompts)):
        kept = _before_frame(prompts[k - 1], protocol)
        assert prompts[k].startswith(kept), f"round {k + 1} re-rendered round {k}'s prompt before its frame"
        # and what was kept is most of the new prompt: only round k's transcript and the new frame are new
        assert len(kept) / len(prompts[k]) > 0.8
