"""The agent's own API (issue 26): input as messages, the run's state in the result, state between runs.

Every test runs ``codeact.Agent`` against the local OpenAI-compatible server with a real subprocess
sandbox and a SQLite store; the replies are written as models write them (prose, then a code block).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact import Agent
from codeact.engine import CodeactError
from codeact.engine.replay import replay_session
from tests.engine.openai_server import OpenAIServer

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: api-agent
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""


@pytest.fixture(autouse=True)
def model_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def make_agent(tmp_path: Path, server: OpenAIServer, text: str = BLUEPRINT, **kwargs: object) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return Agent.from_blueprint(
        path, model="openai/test", base_url=server.base_url, store=f"sqlite:///{tmp_path / 's.db'}", **kwargs
    )


def sent(server: OpenAIServer) -> str:
    """Everything the model was sent in the last chat request, as one text."""
    body = server.requests[-1].body
    return "\n".join(str(m.get("content")) for m in body.get("messages", ()))


async def test_a_list_of_messages_is_history_and_a_task(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push('Thought: the user is Ada.\n```python\nsystem.finish("Hello Ada")\n```')
    messages = [
        {"role": "user", "content": "My name is Ada Lovelace."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": [{"type": "text", "text": "Greet me by name."}]},
    ]
    async with make_agent(tmp_path, openai_server) as agent:
        result = await agent.invoke(messages)
    assert (result.status, result.answer) == ("completed", "Hello Ada")
    prompt = sent(openai_server)
    assert "My name is Ada Lovelace." in prompt and "Nice to meet you, Ada." in prompt
    assert prompt.index("Nice to meet you") < prompt.index("Greet me by name.")
    assert result.messages == [
        {"role": "user", "content": "My name is Ada Lovelace."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "Greet me by name."},
        {"role": "assistant", "content": "Hello Ada"},
    ]


async def test_a_single_message_and_bad_inputs(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push("Thought: easy.\n```python\nsystem.finish(2 + 2)\n```")
    async with make_agent(tmp_path, openai_server) as agent:
        result = await agent.invoke({"role": "user", "content": "What is 2 + 2?"})
        assert (result.status, result.answer) == ("completed", 4)
        image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}
        with pytest.raises(CodeactError, match="image input is not supported") as caught:
            await agent.invoke(image)
        assert caught.value.code == "input.image_unsupported"
        with pytest.raises(CodeactError, match="no user message"):
            await agent.invoke([{"role": "assistant", "content": "hi"}])
        with pytest.raises(CodeactError, match="role 'robot'"):
            await agent.invoke([{"role": "robot", "content": "hi"}])
    assert openai_server.pending == 0


async def test_result_variables_and_a_state_update_the_next_run_uses(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: I note the order.\n```python\norder = {'sku': 'A-1', 'qty': 2}\n"
        "when = (2026, 1, 2)\nsystem.finish('noted')\n```",
        "Thought: the host changed the quantity.\n```python\nsystem.finish(f\"{order['qty']} x {order['sku']}\")\n```",
    )
    async with make_agent(tmp_path, openai_server) as agent:
        first = await agent.invoke("Note an order of 2 A-1.")
        assert first.variables == {"order": {"sku": "A-1", "qty": 2}, "when": [2026, 1, 2]}
        assert await agent.state(first.session_id) == first.variables
        after = await agent.update_state(
            first.session_id, variables={"order": {"sku": "A-1", "qty": 5}}, remove=["when"]
        )
        assert after == {"order": {"sku": "A-1", "qty": 5}}
        second = await agent.invoke("How many now?", session_id=first.session_id)
        with pytest.raises(CodeactError, match="no session 'nope'"):
            await agent.update_state("nope", variables={"x": 1})
        with pytest.raises(CodeactError, match="not a Python identifier"):
            await agent.update_state(first.session_id, variables={"not a name": 1})
        rounds = await agent.store.rounds(first.session_id)
        report = await replay_session(agent.store, first.session_id)
    assert (second.status, second.answer) == ("completed", "5 x A-1")
    assert [r.status for r in rounds] == ["ok", "host_edit", "ok"]
    assert rounds[1].control == {"kind": "host_edit", "set": ["order"], "removed": ["when"]}
    assert report.ok, report.to_json()


async def test_invoke_without_a_session_starts_a_new_one(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        "Thought: x.\n```python\nx = 1\nsystem.finish('one')\n```",
        "Thought: is x there?\n```python\ntry:\n    system.finish(x)\n"
        "except NameError:\n    system.finish('unset')\n```",
    )
    async with make_agent(tmp_path, openai_server) as agent:
        first = await agent.invoke("Set x.")
        second = await agent.invoke("Is x set?")
    assert first.session_id != second.session_id
    assert second.variables == {} and second.answer == "unset"
