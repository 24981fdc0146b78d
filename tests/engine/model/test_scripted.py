"""The scripted provider, in-process and from files, through litellm's custom-provider path."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.model import (
    ModelClient,
    ModelConfigError,
    ModelRateLimitError,
    ModelSettings,
    ScriptedReplies,
    ScriptExhaustedError,
)

FAST = (0.0, 0.0)


def _client(model: str, **kw: object) -> ModelClient:
    return ModelClient(ModelSettings(model=model, **kw), retry_backoff=FAST, env={})  # type: ignore[arg-type]


async def test_replies_are_served_in_order_with_usage() -> None:
    script = ScriptedReplies(["first", {"text": "second", "usage": {"prompt_tokens": 7, "completion_tokens": 3}}])
    client = _client(script.model)
    one = await client.complete(messages=[{"role": "user", "content": "hello there"}])
    two = await client.complete(messages=[{"role": "user", "content": "again"}])
    assert (one.text, two.text) == ("first", "second")
    assert one.model == script.model and one.cost_usd is None and one.finish_reason == "stop"
    assert one.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}  # ~len/4 estimates
    assert two.usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert [r.messages[0]["content"] for r in script.requests] == ["hello there", "again"]
    assert script.consumed == 2 and script.remaining == 0


async def test_purposes_take_their_own_replies() -> None:
    script = ScriptedReplies(
        [
            {"text": "think first", "purpose": "thought"},
            "x = 1",
            {"text": "done?", "purpose": "utility"},
            "y = 2",
        ]
    )
    client = ModelClient({"code": ModelSettings(model=script.model)}, env={})
    assert (await client.complete(purpose="code", messages=[{"role": "user", "content": "c"}])).text == "x = 1"
    assert (await client.complete(purpose="thought", messages=[{"role": "user", "content": "t"}])).text == "think first"
    assert (await client.complete(purpose="code", messages=[{"role": "user", "content": "c"}])).text == "y = 2"
    assert (await client.complete(purpose="utility", messages=[{"role": "user", "content": "u"}])).text == "done?"
    assert [r.purpose for r in script.requests] == ["code", "thought", "code", "utility"]


async def test_exhausted_script_message() -> None:
    script = ScriptedReplies(["only"])
    client = _client(script.model)
    await client.complete(messages=[{"role": "user", "content": "1"}])
    with pytest.raises(ScriptExhaustedError) as info:
        await client.complete(messages=[{"role": "user", "content": "2"}])
    assert str(info.value) == (
        "scripted model ran out of replies after 1 (file <memory>): add a reply for purpose 'code' to the script"
    )


async def test_streaming_yields_chunks() -> None:
    script = ScriptedReplies([{"text": "x = 1\nprint(x)\n", "chunks": ["x = 1\n", "print(x)\n"]}, "a b  c"])
    client = _client(script.model)
    deltas: list[str] = []
    reply = await client.complete(messages=[{"role": "user", "content": "go"}], on_delta=deltas.append)
    assert deltas == ["x = 1\n", "print(x)\n"] and reply.text == "x = 1\nprint(x)\n"
    deltas.clear()
    reply = await client.complete(messages=[{"role": "user", "content": "go"}], on_delta=deltas.append)
    assert deltas == ["a ", "b  ", "c"] and reply.text == "a b  c"
    assert reply.usage["completion_tokens"] == 2 and reply.finish_reason == "stop"
    assert script.requests[-1].stream


async def test_raw_prompt_is_recorded_for_the_completion_protocol() -> None:
    script = ScriptedReplies(["middle"])
    client = _client(script.model, protocol="completion")
    reply = await client.complete(prompt="<PRE> a <SUF> b <MID>")
    assert reply.text == "middle"
    (request,) = script.requests
    assert request.protocol == "completion"
    assert request.messages == ({"role": "user", "content": "<PRE> a <SUF> b <MID>"},)


@pytest.mark.parametrize("stream", [pytest.param(False, id="json"), pytest.param(True, id="stream")])
async def test_scripted_tool_calls(stream: bool) -> None:
    script = ScriptedReplies([{"tool_calls": [{"name": "devops__list", "arguments": {"limit": 2}}]}])
    deltas: list[str] = []
    reply = await _client(script.model).complete(
        messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "devops__list", "parameters": {"type": "object"}}}],
        on_delta=deltas.append if stream else None,
    )
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("devops__list", {"limit": 2})]
    assert reply.finish_reason == "tool_calls"


async def test_scripted_error_entry_is_retried() -> None:
    script = ScriptedReplies([{"error": "rate_limit"}, "after the retry"])
    reply = await _client(script.model).complete(messages=[{"role": "user", "content": "x"}])
    assert reply.text == "after the retry" and reply.attempts == 2


async def test_scripted_error_entry_gives_up() -> None:
    script = ScriptedReplies([{"error": "rate_limit", "message": "slow down"}] * 2)
    with pytest.raises(ModelRateLimitError) as info:
        await _client(script.model, max_retries=1).complete(messages=[{"role": "user", "content": "x"}])
    assert str(info.value) == (
        f"model {script.model!r} was rate limited (HTTP 429) after 2 attempts: slow down; "
        "wait and retry, lower the request rate, or raise max_retries in the profile"
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("r.yaml", "- one\n- text: two\n", id="yaml-list"),
        pytest.param("r.yaml", "replies:\n  - one\n  - {text: two}\n", id="yaml-mapping"),
        pytest.param("r.json", '["one", {"text": "two"}]', id="json"),
    ],
)
async def test_reply_files(tmp_path: Path, name: str, text: str) -> None:
    path = _write(tmp_path, name, text)
    client = _client(f"scripted/{path}")
    first = await client.complete(messages=[{"role": "user", "content": "x"}])
    second = await client.complete(messages=[{"role": "user", "content": "x"}])
    assert (first.text, second.text) == ("one", "two")
    assert first.model == f"scripted/{path}"


async def test_each_client_replays_a_file_from_the_start(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.yaml", "- one\n")
    for _ in range(2):
        reply = await _client(f"scripted/{path}").complete(messages=[{"role": "user", "content": "x"}])
        assert reply.text == "one"


async def test_file_exhausted_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.yaml", "- one\n")
    client = _client(f"scripted/{path}")
    await client.complete(messages=[{"role": "user", "content": "x"}])
    with pytest.raises(ScriptExhaustedError, match=rf"^scripted model ran out of replies after 1 \(file {path}\)"):
        await client.complete(messages=[{"role": "user", "content": "x"}])


async def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ModelConfigError) as info:
        await _client(f"scripted/{missing}").complete(messages=[{"role": "user", "content": "x"}])
    assert str(info.value) == (
        f"scripted reply file not found: {str(missing)!r} (No such file or directory): "
        "pass --model scripted/<path to a YAML or JSON list of replies>"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("- [1, 2]\n", "at replies[0]: expected a string or a mapping, got list", id="nested-list"),
        pytest.param("- {txt: a}\n", "at replies[0].txt: Extra inputs are not permitted", id="unknown-key"),
        pytest.param(
            "- ok\n- {error: meltdown}\n",
            "at replies[1].error: Input should be 'rate_limit', 'connection', 'timeout', 'server', 'auth' or "
            "'bad_request'",
            id="bad-error",
        ),
        pytest.param(
            "replies: 3\n",
            ": expected a list of replies (strings or mappings with text, purpose, usage, tool_calls), "
            "or {replies: [...]}; got int",
            id="not-a-list",
        ),
    ],
)
def test_invalid_reply_file(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad.yaml", text)
    with pytest.raises(ModelConfigError) as info:
        ScriptedReplies.from_file(path)
    assert str(info.value) == f"scripted reply file {path} is invalid{' ' if message.startswith('at') else ''}{message}"


def test_in_memory_entries_are_validated() -> None:
    with pytest.raises(ModelConfigError) as info:
        ScriptedReplies(["fine", {"text": "a", "purpose": 3}])
    assert (
        str(info.value)
        == "scripted reply file <memory> is invalid at replies[1].purpose: Input should be a valid string"
    )


async def test_direct_litellm_call_uses_the_registered_provider(tmp_path: Path) -> None:
    # the provider is a real litellm custom provider: a plain litellm call reaches it too
    from codeact.engine.model._litellm import _litellm

    path = _write(tmp_path, "r.yaml", "- from litellm\n")
    litellm = _litellm()
    response = await litellm.acompletion(model=f"scripted/{path}", messages=[{"role": "user", "content": "x"}])
    assert response.choices[0].message.content == "from litellm"


def test_example_reply_files_are_valid() -> None:
    root = Path(__file__).resolve().parents[3] / "examples" / "replies"
    files = sorted(root.glob("*.yaml"))
    for path in files:
        assert ScriptedReplies.from_file(path).remaining > 0
