"""The finish reason reaches the caller on both protocols, streamed or not, HTTP or scripted.

The loop continues a reply cut at the token limit (``length``), so the reason must survive litellm
on every path.
"""

from __future__ import annotations

import pytest

from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from tests.engine.openai_server import OpenAIServer, Reply


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("protocol", ["chat", "completion"])
async def test_length_over_http(openai_server: OpenAIServer, protocol: str, stream: bool) -> None:
    openai_server.push(Reply(text="rows = [1, 2,", finish_reason="length"), Reply(text=" 3]"))
    settings = ModelSettings(model="qwen2.5-coder", api_base=openai_server.base_url, protocol=protocol)  # type: ignore[arg-type]
    client = ModelClient(settings, retry_backoff=(0.0, 0.0), env={})
    pieces: list[str] = []
    on_delta = pieces.append if stream else None
    cut = await client.complete(prompt="x = ", on_delta=on_delta)
    assert (cut.text, cut.finish_reason) == ("rows = [1, 2,", "length")
    rest = await client.complete(prompt="x = rows = [1, 2,", on_delta=on_delta)
    assert (rest.text, rest.finish_reason) == (" 3]", "stop")
    assert openai_server.requests[-1].path == (
        "/v1/completions" if protocol == "completion" else "/v1/chat/completions"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("protocol", ["chat", "completion"])
async def test_length_from_the_scripted_model(protocol: str, stream: bool) -> None:
    script = ScriptedReplies([{"text": "rows = [1,", "finish_reason": "length"}, "print(1)"])
    client = ModelClient(ModelSettings(model=script.model, protocol=protocol))  # type: ignore[arg-type]
    on_delta = (lambda _: None) if stream else None
    cut = await client.complete(prompt="p", on_delta=on_delta)
    assert (cut.text, cut.finish_reason) == ("rows = [1,", "length")
    assert (await client.complete(prompt="p", on_delta=on_delta)).finish_reason == "stop"
