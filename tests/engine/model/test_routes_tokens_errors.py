"""Route mapping, token counting, context windows and litellm error translation."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest

from codeact.engine.model import (
    ModelAuthError,
    ModelBadRequestError,
    ModelClient,
    ModelConnectionError,
    ModelContextWindowError,
    ModelNotFoundError,
    ModelProviderError,
    ModelRateLimitError,
    ModelServerError,
    ModelSettings,
    ModelTimeoutError,
    ScriptedReplies,
    ScriptExhaustedError,
    map_litellm_errors,
    route_for,
)
from codeact.engine.model._litellm import _litellm

KNOWN = {"openai", "ollama", "anthropic", "hosted_vllm", "codestral", "mistral"}


def _route(**kw: Any) -> tuple[str, str | None, str | None, str | None]:
    route = route_for(
        ModelSettings(**kw),
        infer_provider=lambda name: "openai" if name.startswith("gpt") else None,
        is_provider=lambda name: name in KNOWN,
    )
    return route.chat_model, route.api_base, route.text_model, route.text_api_base


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        pytest.param(
            {"model": "gpt-4.1-mini"},
            ("gpt-4.1-mini", None, "text-completion-openai/gpt-4.1-mini", None),
            id="bare-openai",
        ),
        pytest.param(
            {"model": "qwen2.5-coder", "api_base": "http://h:8000/v1"},
            ("openai/qwen2.5-coder", "http://h:8000/v1", "text-completion-openai/qwen2.5-coder", "http://h:8000/v1"),
            id="base-url-means-openai-compatible",
        ),
        pytest.param(
            {"model": "Qwen/Qwen2.5-Coder-7B", "api_base": "http://h/v1"},
            (
                "openai/Qwen/Qwen2.5-Coder-7B",
                "http://h/v1",
                "text-completion-openai/Qwen/Qwen2.5-Coder-7B",
                "http://h/v1",
            ),
            id="hf-name-at-base-url",
        ),
        pytest.param(
            {"model": "qwen2.5-coder", "provider": "ollama"},
            ("ollama/qwen2.5-coder", None, "text-completion-openai/qwen2.5-coder", "http://localhost:11434/v1"),
            id="ollama-default-server",
        ),
        pytest.param(
            {"model": "ollama/qwen2.5-coder", "api_base": "http://gpu:11434/"},
            (
                "ollama/qwen2.5-coder",
                "http://gpu:11434/",
                "text-completion-openai/qwen2.5-coder",
                "http://gpu:11434/v1",
            ),
            id="ollama-custom-server",
        ),
        pytest.param(
            {"model": "hosted_vllm/m", "api_base": "http://v/v1"},
            ("hosted_vllm/m", "http://v/v1", "text-completion-openai/m", "http://v/v1"),
            id="vllm",
        ),
        pytest.param(
            {"model": "codestral/codestral-latest"},
            ("codestral/codestral-latest", None, "text-completion-codestral/codestral-latest", None),
            id="codestral",
        ),
        pytest.param(
            {"model": "text-completion-openai/m", "api_base": "http://x/v1"},
            ("openai/m", "http://x/v1", "text-completion-openai/m", "http://x/v1"),
            id="explicit-raw-route",
        ),
        pytest.param(
            {"model": "anthropic/claude-3-5-sonnet-latest"},
            ("anthropic/claude-3-5-sonnet-latest", None, None, None),
            id="no-raw-endpoint",
        ),
        pytest.param(
            {"model": "gpt-4.1", "provider": "openai"},
            ("openai/gpt-4.1", None, "text-completion-openai/gpt-4.1", None),
            id="provider-prefix-added",
        ),
        pytest.param(
            {"model": "openai/gpt-4.1", "provider": "openai"},
            ("openai/gpt-4.1", None, "text-completion-openai/gpt-4.1", None),
            id="provider-prefix-not-doubled",
        ),
    ],
)
def test_route_mapping(kw: dict[str, Any], expected: tuple[str, str | None, str | None, str | None]) -> None:
    assert _route(**kw) == expected


def test_count_tokens_with_litellm_tokenizer() -> None:
    client = ModelClient(ModelSettings(model="openai/gpt-4.1-mini"), env={})
    assert client.count_tokens("hello world, this is a test") == 7
    assert client.count_tokens([{"role": "user", "content": "hello world"}]) > 2


def test_count_tokens_falls_back_to_len_over_4() -> None:
    script = ScriptedReplies([])
    client = ModelClient(ModelSettings(model=script.model), env={})
    assert client.count_tokens("a" * 40) == 10
    assert client.count_tokens([{"role": "user", "content": "a" * 7}]) == 2


def test_context_window() -> None:
    known = ModelClient(ModelSettings(model="openai/gpt-4.1-mini"), env={})
    assert known.context_window() == 1047576
    overridden = ModelClient(ModelSettings(model="openai/gpt-4.1-mini", context_window=8000), env={})
    assert overridden.context_window() == 8000
    unknown = ModelClient(ModelSettings(model="openai/no-such-model-here"), env={})
    assert unknown.context_window() is None


def test_routes_fall_back_to_code() -> None:
    code, thought = ModelSettings(model="a/code"), ModelSettings(model="a/thought")
    client = ModelClient({"code": code, "thought": thought}, env={})
    assert client.settings_for("thought") is thought
    assert client.settings_for("utility") is code
    assert ModelClient(code, env={}).settings_for("thought") is code


def _http_error(cls_name: str, status: int, message: str = "boom") -> Exception:
    litellm = _litellm()
    response = httpx.Response(status, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    error: Exception = getattr(litellm, cls_name)(message=message, llm_provider="openai", model="m", response=response)
    return error


@pytest.mark.parametrize(
    ("cls_name", "status", "expected", "retryable"),
    [
        pytest.param("RateLimitError", 429, ModelRateLimitError, True, id="429"),
        pytest.param("AuthenticationError", 401, ModelAuthError, False, id="401"),
        pytest.param("PermissionDeniedError", 403, ModelAuthError, False, id="403"),
        pytest.param("NotFoundError", 404, ModelNotFoundError, False, id="404"),
        pytest.param("BadRequestError", 400, ModelBadRequestError, False, id="400"),
        pytest.param("ContextWindowExceededError", 400, ModelContextWindowError, False, id="context-window"),
        pytest.param("ServiceUnavailableError", 503, ModelServerError, True, id="503"),
        pytest.param("InternalServerError", 500, ModelServerError, True, id="500"),
    ],
)
def test_map_litellm_errors(cls_name: str, status: int, expected: type[ModelProviderError], retryable: bool) -> None:
    with pytest.raises(expected) as info, map_litellm_errors(model="openai/m", provider="openai"):
        raise _http_error(cls_name, status)
    assert type(info.value) is expected
    assert info.value.retryable is retryable
    assert (info.value.model, info.value.provider) == ("openai/m", "openai")


def test_map_timeout_and_connection() -> None:
    litellm = _litellm()
    with pytest.raises(ModelTimeoutError) as timeout, map_litellm_errors():
        raise litellm.Timeout(message="slow", model="m", llm_provider="openai")
    assert timeout.value.retryable
    with pytest.raises(ModelConnectionError) as conn, map_litellm_errors():
        raise litellm.APIConnectionError(message="refused", llm_provider="openai", model="m")
    assert conn.value.retryable and type(conn.value) is ModelConnectionError


def test_our_own_model_errors_pass_through_litellm_wrappers() -> None:
    litellm = _litellm()
    ours = ScriptExhaustedError(consumed=1, source="f.yaml", purpose="code")
    with pytest.raises(ScriptExhaustedError) as info, map_litellm_errors():
        try:
            raise ours
        except ScriptExhaustedError:
            raise litellm.APIConnectionError(message="wrapped", llm_provider="scripted", model="m") from None
    assert info.value is ours


def test_unknown_exceptions_become_non_retryable_provider_errors() -> None:
    with pytest.raises(ModelProviderError) as info, map_litellm_errors(model="m"):
        raise ValueError("odd")
    assert type(info.value) is ModelProviderError and not info.value.retryable
    assert str(info.value) == "odd"


def test_importing_engine_model_does_not_import_litellm() -> None:
    code = "import sys, engine.model; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
