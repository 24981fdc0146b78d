"""ModelClient -> real HTTP -> the local OpenAI-compatible server (no mocks), over both transports.

A base-URL route goes over httpx (no litellm); ``CODEACT_MODEL_TRANSPORT=litellm`` sends it through
litellm. Every test runs on both, so the two give the same replies, usage, cost, retries and errors.
"""

from __future__ import annotations

import pytest

from codeact.engine.model import (
    ModelAuthError,
    ModelBadRequestError,
    ModelClient,
    ModelConfigError,
    ModelConnectionError,
    ModelRateLimitError,
    ModelServerError,
    ModelSettings,
)
from tests.engine.openai_server import Failure, OpenAIServer, Reply, ToolCallReply

FAST = (0.0, 0.0)  # no waiting between retries in tests


@pytest.fixture(autouse=True, params=["httpx", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The transport of the base-URL route: the thin httpx client, or litellm."""
    if request.param == "litellm":
        monkeypatch.setenv("CODEACT_MODEL_TRANSPORT", "litellm")
    return str(request.param)


def _client(server: OpenAIServer, *, protocol: str = "chat", max_retries: int = 3, **kw: object) -> ModelClient:
    settings = ModelSettings(
        model=str(kw.pop("model", "gpt-4.1-mini")),
        api_base=server.base_url,
        protocol=protocol,  # type: ignore[arg-type]
        max_retries=max_retries,
        **kw,  # type: ignore[arg-type]
    )
    return ModelClient(settings, retry_backoff=FAST, env={})


async def test_chat_reply_usage_and_cost(openai_server: OpenAIServer) -> None:
    openai_server.push(
        Reply(text="hello world", usage={"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13})
    )
    client = _client(openai_server, options={"temperature": 0.2, "max_tokens": 64})
    reply = await client.complete(messages=[{"role": "user", "content": "say hello"}])
    assert reply.text == "hello world"
    assert reply.model == "openai/gpt-4.1-mini"
    assert reply.usage == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert reply.finish_reason == "stop"
    assert reply.attempts == 1
    assert reply.cost_usd is not None and reply.cost_usd > 0  # gpt-4.1-mini is in litellm's price map
    request = openai_server.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"] == [{"role": "user", "content": "say hello"}]
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 64
    assert "metadata" not in request.body


async def test_completion_protocol_sends_the_prompt_raw(openai_server: OpenAIServer) -> None:
    fim = "<|fim_prefix|>x = 1\n<|fim_suffix|>\nprint(y)<|fim_middle|>"
    openai_server.push("y = x + 1")
    client = _client(openai_server, model="qwen2.5-coder", protocol="completion")
    reply = await client.complete(prompt=fim, stop=["<|fim_pad|>"])
    assert reply.text == "y = x + 1"
    request = openai_server.requests[-1]
    assert request.path == "/v1/completions"
    assert request.body["prompt"] == fim
    assert request.body["model"] == "qwen2.5-coder"
    assert request.body["stop"] == ["<|fim_pad|>"]
    assert reply.usage["total_tokens"] > 0


async def test_prompt_with_chat_protocol_is_one_user_message(openai_server: OpenAIServer) -> None:
    openai_server.push("ok")
    reply = await _client(openai_server).complete(prompt="raw text")
    assert reply.text == "ok"
    assert openai_server.requests[-1].path == "/v1/chat/completions"
    assert openai_server.requests[-1].body["messages"] == [{"role": "user", "content": "raw text"}]


@pytest.mark.parametrize("protocol", [pytest.param("chat", id="chat"), pytest.param("completion", id="completion")])
async def test_streaming_deltas(openai_server: OpenAIServer, protocol: str) -> None:
    openai_server.push(Reply(text="x = 1\nprint(x)", chunks=("x = ", "1\n", "print(x)")))
    deltas: list[str] = []
    client = _client(openai_server, protocol=protocol)
    if protocol == "chat":
        reply = await client.complete(messages=[{"role": "user", "content": "go"}], on_delta=deltas.append)
    else:
        reply = await client.complete(prompt="go", on_delta=deltas.append)
    assert deltas == ["x = ", "1\n", "print(x)"]
    assert reply.text == "x = 1\nprint(x)"
    assert reply.finish_reason == "stop"
    assert openai_server.requests[-1].body["stream"] is True
    assert reply.usage["completion_tokens"] > 0


async def test_async_delta_callback(openai_server: OpenAIServer) -> None:
    openai_server.push(Reply(text="a b"))
    seen: list[str] = []

    async def on_delta(piece: str) -> None:
        seen.append(piece)

    reply = await _client(openai_server).complete(messages=[{"role": "user", "content": "go"}], on_delta=on_delta)
    assert "".join(seen) == reply.text == "a b"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "devops__get_project",
            "description": "Get a project.",
            "parameters": {"type": "object", "properties": {"project_id": {"type": "string"}}},
        },
    }
]


@pytest.mark.parametrize("stream", [pytest.param(False, id="json"), pytest.param(True, id="stream")])
async def test_tool_calls(openai_server: OpenAIServer, stream: bool) -> None:
    call = ToolCallReply(id="call_7", name="devops__get_project", arguments={"project_id": "123"})
    openai_server.push(Reply(tool_calls=(call,)))
    deltas: list[str] = []
    reply = await _client(openai_server).complete(
        messages=[{"role": "user", "content": "project 123?"}],
        tools=TOOLS,
        on_delta=deltas.append if stream else None,
    )
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_7", "devops__get_project", {"project_id": "123"})
    ]
    assert reply.finish_reason == "tool_calls"
    assert openai_server.requests[-1].body["tools"] == TOOLS


async def test_tool_call_with_invalid_json_arguments_is_kept_raw(openai_server: OpenAIServer) -> None:
    openai_server.push(Reply(tool_calls=(ToolCallReply(name="f", arguments="{not json"),)))
    reply = await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}], tools=TOOLS)
    (call,) = reply.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == "{not json"
    assert not call.arguments_valid


async def test_retry_on_429_then_success(openai_server: OpenAIServer) -> None:
    openai_server.fail(429, times=2)
    openai_server.push("finally")
    reply = await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}])
    assert reply.text == "finally"
    assert reply.attempts == 3
    assert len(openai_server.requests) == 3  # litellm's and the OpenAI SDK's own retries are off


async def test_retry_on_5xx(openai_server: OpenAIServer) -> None:
    openai_server.fail(503)
    openai_server.push("ok")
    reply = await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}])
    assert reply.text == "ok"
    assert len(openai_server.requests) == 2


async def test_rate_limit_gives_up_after_max_retries(openai_server: OpenAIServer) -> None:
    openai_server.fail(429, times=5)
    client = _client(openai_server, max_retries=2)
    with pytest.raises(ModelRateLimitError) as info:
        await client.complete(messages=[{"role": "user", "content": "x"}])
    assert len(openai_server.requests) == 3
    error = info.value
    assert error.retryable and error.status_code == 429 and error.attempts == 3 and error.provider == "openai"
    assert str(error) == (
        f"model 'openai/gpt-4.1-mini' at {openai_server.base_url} was rate limited (HTTP 429) after 3 attempts: "
        "Rate limit reached for requests; wait and retry, lower the request rate, or raise max_retries in the profile"
    )


async def test_auth_error_is_not_retried_and_says_what_to_do(openai_server: OpenAIServer) -> None:
    openai_server.fail(401)
    with pytest.raises(ModelAuthError) as info:
        await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}])
    assert len(openai_server.requests) == 1
    error = info.value
    assert not error.retryable and error.status_code == 401
    assert str(error).startswith(
        f"model 'openai/gpt-4.1-mini' at {openai_server.base_url} refused the credentials (HTTP 401): "
    )
    assert str(error).endswith("; set OPENAI_API_KEY or pass --profile NAME")


async def test_auth_error_names_the_profile_key_variable(openai_server: OpenAIServer) -> None:
    openai_server.fail(401)
    settings = ModelSettings(model="gpt-4.1-mini", api_base=openai_server.base_url, api_key_env="WORK_KEY")
    client = ModelClient(settings, retry_backoff=FAST, env={"WORK_KEY": "sk-wrong"})
    with pytest.raises(ModelAuthError, match=r"; set WORK_KEY or pass --profile NAME$"):
        await client.complete(messages=[{"role": "user", "content": "x"}])
    assert openai_server.requests[-1].headers["authorization"] == "Bearer sk-wrong"


async def test_missing_key_variable_fails_before_any_request(openai_server: OpenAIServer) -> None:
    settings = ModelSettings(
        model="gpt-4.1-mini", api_base=openai_server.base_url, api_key_env="NOPE_KEY", profile="work"
    )
    client = ModelClient(settings, retry_backoff=FAST, env={})
    with pytest.raises(ModelAuthError) as info:
        await client.complete(messages=[{"role": "user", "content": "x"}])
    assert str(info.value) == (
        "model 'openai/gpt-4.1-mini': environment variable NOPE_KEY is not set (api_key_env of profile 'work'): "
        "export NOPE_KEY or pass --profile NAME"
    )
    assert openai_server.requests == []


async def test_bad_request_is_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.push(Failure(status=400, message="temperature must be <= 2", type="invalid_request_error"))
    with pytest.raises(ModelBadRequestError, match="refused the request \\(HTTP 400\\): temperature must be <= 2"):
        await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}])
    assert len(openai_server.requests) == 1


async def test_server_error_after_retries(openai_server: OpenAIServer) -> None:
    openai_server.fail(500, times=2)
    with pytest.raises(ModelServerError) as info:
        await _client(openai_server, max_retries=1).complete(messages=[{"role": "user", "content": "x"}])
    assert info.value.attempts == 2 and info.value.retryable


async def test_connection_refused_is_retried_then_explained() -> None:
    from tests.engine.openai_server import serve

    with serve() as server:
        base = server.base_url
    settings = ModelSettings(model="gpt-4.1-mini", api_base=base, max_retries=1, timeout_s=5)
    with pytest.raises(ModelConnectionError) as info:
        await ModelClient(settings, retry_backoff=FAST, env={}).complete(messages=[{"role": "user", "content": "x"}])
    assert info.value.attempts == 2
    assert str(info.value).endswith(f"; check that the server at {base} is running (--base-url)")


async def test_no_delta_is_sent_twice_when_a_stream_fails_midway(openai_server: OpenAIServer) -> None:
    # a 429 before any delta is retried; the retried stream delivers each piece once
    openai_server.fail(429)
    openai_server.push(Reply(text="one two"))
    deltas: list[str] = []
    reply = await _client(openai_server).complete(messages=[{"role": "user", "content": "x"}], on_delta=deltas.append)
    assert deltas == ["one ", "two"] and reply.attempts == 2


async def test_completion_protocol_refused_for_chat_only_providers() -> None:
    client = ModelClient(ModelSettings(model="anthropic/claude-3-5-sonnet-latest", protocol="completion"), env={})
    with pytest.raises(ModelConfigError) as info:
        await client.complete(prompt="<fim>")
    assert str(info.value) == (
        "protocol 'completion' needs a raw /v1/completions endpoint and provider 'anthropic' "
        "(model 'anthropic/claude-3-5-sonnet-latest') has none: use --protocol chat, or serve the model behind "
        "an OpenAI-compatible server and pass --base-url"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({}, "ModelClient.complete() needs exactly one of messages= or prompt=", id="neither"),
        pytest.param(
            {"messages": [], "prompt": "x"},
            "ModelClient.complete() needs exactly one of messages= or prompt=",
            id="both",
        ),
        pytest.param(
            {"prompt": "x", "tools": TOOLS}, "tools need chat messages: pass messages=, not prompt=", id="tools"
        ),
    ],
)
async def test_complete_argument_errors(openai_server: OpenAIServer, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ModelConfigError) as info:
        await _client(openai_server).complete(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


async def test_a_model_served_on_this_machine_is_given_time_to_generate(openai_server: OpenAIServer) -> None:
    """A 1.5B behind a loopback URL outlasted the hosted attempt limit on a busy machine (HTTP 408, issue 39)."""
    openai_server.push(Reply(text="slow but here", delay_s=2.0))
    client = _client(openai_server, model="openai/qwen2.5-coder-1.5b", timeout_s=0.5, max_retries=0)
    reply = await client.complete(messages=[{"role": "user", "content": "say something"}])
    assert reply.text == "slow but here" and reply.attempts == 1
    await client.aclose()


def test_only_a_server_on_this_machine_gets_the_local_timeout_floor() -> None:
    from codeact.engine.model.routes import LOCAL_SERVER_TIMEOUT_S, route_for

    def floor(base: str | None, model: str = "openai/m") -> float:
        settings = ModelSettings(model=model, api_base=base)
        return route_for(settings, infer_provider=lambda m: None, is_provider=lambda p: p == "openai").min_timeout_s

    assert floor("http://127.0.0.1:8080/v1") == LOCAL_SERVER_TIMEOUT_S
    assert floor("http://localhost:11434") == LOCAL_SERVER_TIMEOUT_S
    assert floor("http://[::1]:8000/v1") == LOCAL_SERVER_TIMEOUT_S
    assert floor("https://api.example.com/v1") == 0.0
    assert floor(None) == 0.0
