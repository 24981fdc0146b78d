"""An OpenAI-compatible server at a base URL, called over httpx: no litellm on the path.

A ``--base-url`` route (``openai-compatible``, ``openai/NAME`` at ``api_base``, ``local/NAME``) speaks
OpenAI's two endpoints, ``/chat/completions`` and ``/completions``. litellm's import costs seconds and
its call path tens of milliseconds; this module is the thin client in their place. It sends what litellm
sent (the model name without its ``openai/`` prefix, the options, ``stream_options.include_usage`` when
streaming, ``Authorization: Bearer KEY``), reads the JSON or the server-sent events into OpenAI's shape
(:mod:`codeact.engine.model._wire`), and turns failures into :mod:`codeact.engine.model.errors` once, the
way :func:`~codeact.engine.model._errors_map.map_litellm_errors` does for litellm (same classes, same
status codes, the server's own message).

``CODEACT_MODEL_TRANSPORT=litellm`` sends these routes through litellm again (a server that needs one
of litellm's quirks).

One ``httpx.AsyncClient`` per event loop and model client keeps connections open between rounds; the
model client closes it in ``aclose()``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence

import httpx

from codeact.engine.model._errors_map import MISSING_KEY, retry_after_of, status_error_class
from codeact.engine.model._wire import as_object
from codeact.engine.model.errors import (
    ModelAuthError,
    ModelConnectionError,
    ModelContextWindowError,
    ModelProviderError,
    ModelServerError,
    ModelTimeoutError,
)

__all__ = ["post", "stream"]

# What OpenAI-compatible servers say when the prompt is too long (OpenAI, vLLM, llama.cpp), as litellm matches it.
_CONTEXT_WINDOW = re.compile(
    r"maximum context length|context_length_exceeded|context length|exceeds the context|too many tokens",
    re.IGNORECASE,
)
_ENGINE_KEYS = frozenset({"model", "timeout", "max_retries", "api_base", "api_key", "_skip_mcp_handler", "metadata"})


def body_of(kwargs: Mapping[str, object], *, messages: Sequence[Mapping[str, object]] | None, prompt: str | None,
            stream: bool) -> dict[str, object]:  # fmt: skip
    """The request body litellm would send for these call arguments."""
    model = str(kwargs["model"]).split("/", 1)[1]  # openai/NAME, text-completion-openai/NAME
    body: dict[str, object] = {"model": model}
    if messages is not None:
        body["messages"] = messages
    else:
        body["prompt"] = prompt
    body.update((k, v) for k, v in kwargs.items() if k not in _ENGINE_KEYS and v is not None)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _status_error(response: httpx.Response, *, model: str, provider: str | None) -> ModelProviderError:
    status = response.status_code
    try:
        data = json.loads(response.content)
        error = data.get("error") if isinstance(data, dict) else None
        message = str((error.get("message") if isinstance(error, dict) else error) or data)
    except ValueError:
        message = response.text.strip() or response.reason_phrase
    message = message if len(message) <= 400 else message[:397] + "..."
    cls: type[ModelProviderError]
    code: int | None = status
    if _CONTEXT_WINDOW.search(message) and status in (400, 413):
        cls = ModelContextWindowError
    elif MISSING_KEY.search(message):
        cls, code = ModelAuthError, None
    else:
        cls = status_error_class(status)  # an error response: 4xx or 5xx
    return cls(message, status_code=code, provider=provider, model=model, retry_after=retry_after_of(response.headers))


def _transport_error(exc: httpx.HTTPError, *, model: str, provider: str | None) -> ModelProviderError:
    if isinstance(exc, httpx.TimeoutException):
        return ModelTimeoutError("Request timed out.", provider=provider, model=model)
    return ModelConnectionError(f"Connection error. ({type(exc).__name__}: {exc})", provider=provider, model=model)


async def post(client: httpx.AsyncClient, url: str, body: Mapping[str, object], *, api_key: str | None, timeout: float,
               model: str, provider: str | None) -> object:  # fmt: skip
    """POST ``body`` and return the reply as an attribute object (raises a ModelProviderError)."""
    try:
        response = await client.post(url, json=body, headers=_headers(api_key), timeout=timeout)
    except httpx.HTTPError as exc:
        raise _transport_error(exc, model=model, provider=provider) from exc
    if response.status_code >= 400:
        raise _status_error(response, model=model, provider=provider)
    try:
        data = response.json()
    except ValueError as exc:
        raise ModelServerError(
            f"the server's reply is not JSON: {response.text[:200]!r}", provider=provider, model=model
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise ModelServerError(
            f"the server's reply has no choices: {response.text[:200]!r}", provider=provider, model=model
        )
    return as_object(data)


async def stream(client: httpx.AsyncClient, url: str, body: Mapping[str, object], *, api_key: str | None,
                 timeout: float, model: str, provider: str | None) -> AsyncIterator[object]:  # fmt: skip
    """POST ``body`` and yield each server-sent event's chunk as an attribute object, up to ``[DONE]``."""
    try:
        async with client.stream("POST", url, json=body, headers=_headers(api_key), timeout=timeout) as response:
            if response.status_code >= 400:
                await response.aread()
                raise _status_error(response, model=model, provider=provider)
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ": keep-alive" comments, event names
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    chunk = json.loads(data)
                except ValueError as exc:
                    raise ModelServerError(
                        f"the server sent an event that is not JSON: {data[:200]!r}", provider=provider, model=model
                    ) from exc
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    message = str(error.get("message") if isinstance(error, dict) else error)
                    raise ModelServerError(message, provider=provider, model=model)
                yield as_object(chunk)
    except httpx.HTTPError as exc:
        raise _transport_error(exc, model=model, provider=provider) from exc
