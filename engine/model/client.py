"""The model client (litellm is imported lazily, only by routes that need it, by :mod:`codeact.engine.model._litellm`).

:class:`ModelClient` sends chat messages or raw prompts to the model of a purpose (``code``,
``thought``, ``utility``), streams deltas to a callback, parses tool calls, retries transient
failures with exponential backoff and jitter, and reports usage and cost. litellm exceptions are
translated once, by :func:`map_litellm_errors`, into :mod:`codeact.engine.model.errors`.

Three transports, one reader. A ``scripted/...`` route never imports litellm: the script's reply is
built as the JSON an OpenAI server sends (:func:`~codeact.engine.model.scripted.openai_response`). An
OpenAI-compatible server at a base URL (``openai-compatible``, ``openai/NAME`` with ``api_base``,
``local/NAME``) is called over httpx (:mod:`codeact.engine.model._openai_http`), its prices read from
litellm's bundled map without importing litellm (:mod:`codeact.engine.model._prices`). Every other
route goes through litellm. All three hand ``_reply``/``_absorb`` the same OpenAI shape, and retries,
usage, streaming and error messages are this module's, whichever carried the call. A raw prompt to the
scripted model is recorded as one user message (what litellm's ``atext_completion`` did).

litellm quirks handled here, once:

* its import costs seconds and may fetch a price map: imported lazily with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True``;
* it emits pydantic warnings: a ``UserWarning`` while building response schemas (built once, at
  import, with warnings silenced) and a ``DeprecationWarning`` per streamed chunk (a filter
  ignoring ``DeprecationWarning`` raised from ``litellm.*`` modules is (re)installed before calls);
* its aiohttp transport leaves unclosed sessions (``ResourceWarning``): the httpx transport is used;
* passing ``tools`` imports an optional ``mcp`` package: ``_skip_mcp_handler=True`` skips that path;
* it retries on its own: ``max_retries=0``, the client retries (so retries are counted and logged once).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codeact.engine.model._errors_map import _what, map_litellm_errors
from codeact.engine.model._litellm import _litellm, litellm_loaded, stop_background_tasks
from codeact.engine.model._progress import slow_step
from codeact.engine.model._wire import as_object
from codeact.engine.model.errors import (
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelContextWindowError,
    ModelNotFoundError,
    ModelProviderError,
    ModelRateLimitError,
    ModelServerError,
    ModelStreamCutError,
    ModelTimeoutError,
)
from codeact.engine.model.local import is_local, local_context_window, local_route
from codeact.engine.model.providers import LITELLM_PROVIDERS
from codeact.engine.model.routes import Route, route_for
from codeact.engine.model.scripted import (
    SCRIPTED_PREFIX,
    ScriptedReplies,
    approx_tokens,
    lookup,
    openai_chunks,
    openai_response,
)
from codeact.engine.model.settings import ModelReply, ModelSettings, ToolCall

if TYPE_CHECKING:
    import httpx

__all__ = [
    "KEY_VARIABLES",
    "MAX_HOSTED_STOP",
    "DeltaCallback",
    "ModelClient",
    "map_litellm_errors",
    "over_httpx",
    "stop_background_tasks",
]

MAX_HOSTED_STOP = 4
"""Stop strings sent to a hosted API (OpenAI's cap); a model server with a base URL gets every one."""
# The key a hosted provider's route needs (any one of them), as litellm's validate_environment names it (a test
# compares): a missing key is reported before litellm is imported and before any request.
KEY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
}
_ENGINE_OPTIONS = frozenset({"vision"})  # model options codeact reads itself; never sent to the provider

DeltaCallback = Callable[[str], Awaitable[None] | None]


# --------------------------------------------------------------------------------------- the client


@dataclass
class _Stream:
    text: list[str] = field(default_factory=list)
    tools: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: object = None
    finish: str | None = None
    emitted: bool = False
    chunks: int = 0  # chunks received (a connection error after some is a stream cut off mid-reply)


class ModelClient:
    """Calls the model of a purpose through litellm, with retries, streaming and usage.

    Args:
        routes: Settings per purpose (``code``, ``thought``, ``utility``; a missing purpose uses
            ``default``, then ``code``), or one :class:`ModelSettings` for every purpose.
        retry_backoff: ``(base, cap)`` seconds: the n-th retry waits about ``min(cap, base * 2**(n-1))``,
            jittered to 50-100 %, at least the server's ``Retry-After`` (capped).
        env: Where ``api_key_env`` variables are read (defaults to ``os.environ``).
    """

    def __init__(
        self,
        routes: Mapping[str, ModelSettings] | ModelSettings,
        *,
        retry_backoff: tuple[float, float] = (0.5, 8.0),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._routes = {"code": routes} if isinstance(routes, ModelSettings) else dict(routes)
        if not self._routes:
            raise ModelConfigError("ModelClient needs at least one route: pass ModelSettings(model=...)")
        self._backoff = retry_backoff
        self._env = os.environ if env is None else env
        self._resolved: dict[str, Route] = {}
        self._resolving = threading.Lock()
        self._scripts: list[ScriptedReplies] = []  # keeps per-client scripts alive (the registry is weak)
        self._http: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}  # per event loop (over_httpx)

    # -- configuration ------------------------------------------------------------------------------

    def settings_for(self, purpose: str = "code") -> ModelSettings:
        """The settings used for ``purpose`` (its route, else ``default``, else ``code``)."""
        for key in (purpose, "default", "code"):
            if key in self._routes:
                return self._routes[key]
        return next(iter(self._routes.values()))

    def _resolve_once(self, purpose: str) -> None:
        with self._resolving:  # two first calls at once bind one script, start one server
            self._route(purpose)

    def _route(self, purpose: str) -> Route:
        settings = self.settings_for(purpose)
        if purpose in self._resolved:
            return self._resolved[purpose]
        for other, route in self._resolved.items():
            if self.settings_for(other) is settings:
                self._resolved[purpose] = route
                return route
        if is_local(settings):
            with slow_step(f"starting the local model {settings.model!r}"):
                route = local_route(settings)
            self._resolved[purpose] = route
            return route

        def infer(model: str) -> str | None:  # only for a bare model name (gpt-4.1-mini): litellm's table
            try:
                return str(_litellm().get_llm_provider(model)[1])
            except Exception:  # litellm raises BadRequestError for unknown names
                return None

        route = route_for(settings, infer_provider=infer, is_provider=LITELLM_PROVIDERS.__contains__)
        if route.scripted:
            route = self._bind_script(route)
        self._resolved[purpose] = route
        return route

    def _bind_script(self, route: Route) -> Route:
        target = route.chat_model[len(SCRIPTED_PREFIX) :]
        if target.startswith("@"):
            if lookup(target) is None:
                raise ModelConfigError(
                    f"scripted model {route.chat_model!r} is gone: keep the ScriptedReplies object alive while in use"
                )
            return route
        script = ScriptedReplies.from_file(target).fresh()
        self._scripts.append(script)
        return Route(display=route.display, chat_model=script.model, api_base=None, text_model=script.model,
                     text_api_base=None, provider="scripted", scripted=True)  # fmt: skip

    def _api_key(self, settings: ModelSettings, route: Route) -> str | None:
        if settings.api_key_env:
            value = self._env.get(settings.api_key_env)
            if not value:
                where = f" (api_key_env of profile {settings.profile!r})" if settings.profile else ""
                raise ModelAuthError(
                    f"model {route.display!r}: environment variable {settings.api_key_env} is not set{where}: "
                    f"export {settings.api_key_env} or pass --profile NAME",
                    provider=route.provider,
                    model=route.display,
                )
            return value
        if route.api_base and route.provider in ("openai", "codestral") and not self._env.get("OPENAI_API_KEY"):
            return "sk-no-key"  # local OpenAI-compatible servers (vLLM, Ollama) usually take no key
        return None

    def _require_key(self, settings: ModelSettings, route: Route) -> None:
        """Refuse a hosted route whose provider's key variable is unset, before litellm's import and any request."""
        names = KEY_VARIABLES.get(route.provider or "", ()) if not (route.api_base or settings.api_key_env) else ()
        if names and not any(self._env.get(name) for name in names):
            raise ModelAuthError(
                f"model {route.display!r} needs an API key and {names[0]} is not set (no request was sent): "
                f"set {names[0]} or pass --profile NAME",
                provider=route.provider,
                model=route.display,
            )

    def preload(self) -> None:
        """Start importing litellm on a background thread when a route will need it; return at once.

        The import costs seconds; started when the agent is assembled, it runs while the store opens and the
        sandbox starts, and the first call waits only for what is left of it. Scripted routes, OpenAI-compatible
        base URLs and local models need no litellm; a hosted route whose key is missing fails at its first call
        (no request, no import), so it starts nothing either.
        """
        if litellm_loaded():
            return
        for settings in self._routes.values():
            if is_local(settings) or settings.model.startswith(SCRIPTED_PREFIX) or settings.provider == "scripted":
                continue
            route = route_for(settings, infer_provider=lambda _: None, is_provider=LITELLM_PROVIDERS.__contains__)
            if over_httpx(route) or route.provider not in LITELLM_PROVIDERS:
                continue  # a misspelled provider fails validation: nothing to load for it
            try:
                self._require_key(settings, route)
            except ModelAuthError:
                continue
            threading.Thread(target=_import_quietly, name="codeact-litellm-import", daemon=True).start()
            return

    # -- calls --------------------------------------------------------------------------------------

    async def complete(
        self,
        *,
        purpose: str = "code",
        messages: Sequence[Mapping[str, object]] | None = None,
        prompt: str | None = None,
        stop: Sequence[str] | None = None,
        on_delta: DeltaCallback | None = None,
        tools: Sequence[Mapping[str, object]] | None = None,
    ) -> ModelReply:
        """Call the model for ``purpose`` with chat ``messages`` or a raw ``prompt``.

        A ``prompt`` goes to the raw completion endpoint when the route's protocol is ``completion``
        (see :mod:`codeact.engine.model.routes`), else it is sent as one user message. With ``on_delta`` the
        reply is streamed and every text piece is passed to it (sync or async); streamed tool calls
        are assembled from their fragments (index, id, name, argument pieces) into the same
        :class:`ToolCall` objects a non-streamed reply gives. Retryable failures are retried
        ``max_retries`` times, except once a delta was delivered (it cannot be unsent): a stream that
        breaks off after that raises :class:`ModelStreamCutError`.

        Args:
            purpose: ``code``, ``thought``, ``utility`` (or any configured route).
            messages: OpenAI-style chat messages.
            prompt: A raw prompt (a FIM frame).
            stop: Stop sequences (replace ``options['stop']``).
            on_delta: Receives text pieces as they arrive.
            tools: OpenAI function-calling tool schemas (chat only), for react mode.

        Returns:
            The reply, its usage, cost, finish reason and tool calls.

        Raises:
            ModelConfigError: Neither or both of ``messages`` and ``prompt``; no raw route for the provider.
            ModelProviderError: The provider call failed (a subclass says how), after retries.
            ModelStreamCutError: The stream broke off after its text had been streamed.
            ScriptExhaustedError: The scripted model has no reply left.
        """
        if (messages is None) == (prompt is None):
            raise ModelConfigError("ModelClient.complete() needs exactly one of messages= or prompt=")
        settings = self.settings_for(purpose)
        if purpose not in self._resolved:
            # The first call may start the embedded server (local/NAME): off the event loop, whose other runs
            # (a parallel flow's branches, a service's requests) and timers would otherwise stand still meanwhile.
            await asyncio.to_thread(self._resolve_once, purpose)
        route = self._route(purpose)
        raw = prompt is not None and settings.protocol == "completion"
        if raw and route.text_model is None:
            raise ModelConfigError(route.text_unavailable)
        if tools and prompt is not None:
            raise ModelConfigError("tools need chat messages: pass messages=, not prompt=")
        kwargs = self._kwargs(settings, route, purpose=purpose, raw=raw, stop=stop, tools=tools)
        if not (route.scripted or over_httpx(route)):
            self._require_key(settings, route)
            if not litellm_loaded():  # its import: 3 s, far more on a busy machine; off the loop for the same reason
                with slow_step("loading the model client (litellm)"):
                    await asyncio.to_thread(_litellm)
        chat_messages: list[dict[str, object]] = (
            [dict(m) for m in messages] if messages is not None else [{"role": "user", "content": prompt}]
        )
        attempts = settings.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            state = _Stream()
            started = time.monotonic()
            try:
                if raw:
                    response = await self._call(route, kwargs, prompt=prompt, on_delta=on_delta, state=state)
                else:
                    response = await self._call(route, kwargs, messages=chat_messages, on_delta=on_delta, state=state)
            except ModelProviderError as error:
                if not error.retryable or attempt == attempts or state.emitted:
                    raise self._final(error, attempt, settings, route, state) from error
                await asyncio.sleep(self._delay(attempt, error))
                continue
            latency = time.monotonic() - started
            return self._reply(response, state, route, purpose=purpose, raw=raw, prompt=prompt,
                               messages=chat_messages, latency=latency, attempt=attempt)  # fmt: skip

    def _kwargs(self, settings: ModelSettings, route: Route, *, purpose: str, raw: bool, stop: Sequence[str] | None,
                tools: Sequence[Mapping[str, object]] | None) -> dict[str, Any]:  # fmt: skip
        kwargs: dict[str, Any] = {k: v for k, v in settings.options.items() if k not in _ENGINE_OPTIONS}
        base = route.text_api_base if raw else route.api_base
        if stop is not None:
            # Hosted APIs take at most 4 stop strings (OpenAI refuses more); a server of one's own
            # (llama.cpp, vLLM, Ollama: a base URL) gets them all. Prompts put the decisive ones first.
            kwargs["stop"] = list(stop) if base else list(stop)[:MAX_HOSTED_STOP]
        kwargs["model"] = route.text_model if raw else route.chat_model
        kwargs["timeout"] = max(settings.timeout_s, route.min_timeout_s)
        kwargs["max_retries"] = 0
        if base:
            kwargs["api_base"] = base
        key = self._api_key(settings, route)
        if key:
            kwargs["api_key"] = key
        if tools:
            kwargs["tools"] = tools
            kwargs["_skip_mcp_handler"] = True
        if route.scripted:
            kwargs["metadata"] = {"codeact_purpose": purpose, "codeact_protocol": "completion" if raw else "chat"}
        return kwargs

    async def _call(self, route: Route, kwargs: dict[str, Any], *, on_delta: DeltaCallback | None, state: _Stream,
                    prompt: str | None = None, messages: list[dict[str, object]] | None = None) -> object:  # fmt: skip
        stream = on_delta is not None
        if route.scripted:
            response: Any = _scripted(kwargs, messages=messages, prompt=prompt, stream=stream)
        elif over_httpx(route):
            response = await self._over_httpx(route, kwargs, messages=messages, prompt=prompt, stream=stream)
        else:
            litellm = _litellm()
            call_kwargs = dict(kwargs)
            if stream:
                call_kwargs["stream"] = True
                call_kwargs["stream_options"] = {"include_usage": True}
            with map_litellm_errors(model=route.display, provider=route.provider):
                if messages is not None:
                    response = await litellm.acompletion(messages=messages, **call_kwargs)
                else:
                    response = await litellm.atext_completion(prompt=prompt, **call_kwargs)
        if on_delta is None:
            return response
        iterator: AsyncIterator[Any] = aiter(response)
        while True:
            with map_litellm_errors(model=route.display, provider=route.provider):
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    break
            state.chunks += 1
            for piece in _absorb(chunk, state):
                state.emitted = True
                result = on_delta(piece)
                if inspect.isawaitable(result):
                    await result
        return None

    async def _over_httpx(self, route: Route, kwargs: dict[str, Any], *, messages: list[dict[str, object]] | None,
                          prompt: str | None, stream: bool) -> object:  # fmt: skip
        from codeact.engine.model import _openai_http

        loop = asyncio.get_running_loop()
        client = self._http.get(loop)
        if client is None:
            import httpx

            # A finished loop's client cannot be used or closed any more: drop it (its sockets went with the loop).
            self._http = {other: c for other, c in self._http.items() if not other.is_closed()}
            client = self._http[loop] = httpx.AsyncClient()
        path = "/chat/completions" if messages is not None else "/completions"
        url = str(kwargs["api_base"]).rstrip("/") + path
        body = _openai_http.body_of(kwargs, messages=messages, prompt=prompt, stream=stream)
        api_key = kwargs.get("api_key") or self._env.get("OPENAI_API_KEY")
        where: dict[str, Any] = {"api_key": api_key, "timeout": kwargs["timeout"], "model": route.display,
                                 "provider": route.provider}  # fmt: skip
        if stream:
            return _openai_http.stream(client, url, body, **where)
        return await _openai_http.post(client, url, body, **where)

    def _reply(self, response: object, state: _Stream, route: Route, *, purpose: str, raw: bool, prompt: str | None,
               messages: list[dict[str, object]], latency: float, attempt: int) -> ModelReply:  # fmt: skip
        if response is not None:
            choices = getattr(response, "choices", None)
            choice = choices[0] if choices else None
            if raw:
                text = (getattr(choice, "text", None) or "") if choice else ""
            else:
                message = getattr(choice, "message", None)
                text = (getattr(message, "content", None) or "") if message else ""
                for index, call in enumerate(getattr(message, "tool_calls", None) or []):
                    function = getattr(call, "function", None)  # a server's JSON may leave any field out
                    state.tools[index] = {
                        "id": getattr(call, "id", None) or f"call_{index}",
                        "name": getattr(function, "name", None) or "",
                        "arguments": getattr(function, "arguments", None) or "",
                    }
            state.text = [text]
            state.finish = getattr(choice, "finish_reason", None) if choice else None
            state.usage = getattr(response, "usage", None)
        text = "".join(state.text)
        usage = self._usage(state.usage, route, text=text, prompt=prompt if raw else None, messages=messages)
        return ModelReply(
            text=text,
            model=route.display,
            usage=usage,
            cost_usd=self._cost(route, raw=raw, usage=usage),
            finish_reason=state.finish,
            latency_s=latency,
            tool_calls=tuple(_tool_call(index, data) for index, data in sorted(state.tools.items())),
            attempts=attempt,
            purpose=purpose,
        )

    def _usage(self, usage: object, route: Route, *, text: str, prompt: str | None,
               messages: list[dict[str, object]]) -> dict[str, int]:  # fmt: skip
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        if usage is None or (prompt_tokens == 0 and completion_tokens == 0):
            # The provider did not say (some streams, some local servers): estimate, so budgets still work.
            prompt_tokens = self._count(route, prompt if prompt is not None else messages)
            completion_tokens = self._count(route, text)
        total = int(getattr(usage, "total_tokens", 0) or 0) if usage is not None else 0
        counts = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": total or prompt_tokens + completion_tokens,
        }
        # Prompt tokens the server took from its prompt cache (OpenAI, llama.cpp, vLLM say so); local routes always.
        cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
        if isinstance(cached, int) and not isinstance(cached, bool) and (cached > 0 or route.local):
            counts["cached_tokens"] = cached
        return counts

    @staticmethod
    def _cost(route: Route, *, raw: bool, usage: dict[str, int]) -> float | None:
        if route.scripted:
            return None
        if over_httpx(route):
            from codeact.engine.model._prices import simple_cost

            cost = simple_cost(route.chat_model, prompt_tokens=usage["prompt_tokens"],
                               completion_tokens=usage["completion_tokens"])  # fmt: skip
            if cost is not ...:
                return cost
        litellm = _litellm()
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=route.chat_model,
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
            )
        except Exception:  # litellm raises for models missing from its price map
            return None
        return float(prompt_cost) + float(completion_cost)

    def _delay(self, attempt: int, error: ModelProviderError) -> float:
        base, cap = self._backoff
        delay = min(cap, base * 2.0 ** (attempt - 1))
        delay = delay / 2 + random.uniform(0, delay / 2)  # noqa: S311 - jitter, not cryptography
        if error.retry_after:
            delay = max(delay, min(error.retry_after, cap))
        return delay

    def _final(self, error: ModelProviderError, attempts: int, settings: ModelSettings,
               route: Route, state: _Stream | None = None) -> ModelProviderError:  # fmt: skip
        where = f" at {route.api_base}" if route.api_base else ""
        status = f" (HTTP {error.status_code})" if error.status_code else ""
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if state is not None and state.chunks and type(error) is ModelConnectionError:
            return _stream_cut(error, state, route=route, where=where, tries=tries, attempts=attempts)
        message = (
            f"model {route.display!r}{where} {_what(error)}{status}{tries}: {error.message}; "
            f"{self._fix(error, settings, route)}"
        )
        return type(error)(
            message,
            retryable=error.retryable,
            status_code=error.status_code,
            provider=error.provider or route.provider,
            model=route.display,
            attempts=attempts,
            retry_after=error.retry_after,
        )

    def _fix(self, error: ModelProviderError, settings: ModelSettings, route: Route) -> str:
        if isinstance(error, ModelAuthError):
            return f"set {self._key_variable(settings, route)} or pass --profile NAME"
        if isinstance(error, ModelRateLimitError):
            return "wait and retry, lower the request rate, or raise max_retries in the profile"
        if isinstance(error, ModelTimeoutError):
            return f"raise timeout_s (now {settings.timeout_s:g}s) in the profile or check the server"
        if isinstance(error, ModelConnectionError):
            if route.api_base:
                return f"check that the server at {route.api_base} is running (--base-url)"
            return "check the network connection to the provider"
        if isinstance(error, ModelServerError):
            return "the provider failed; retry later or use another model (--model)"
        if isinstance(error, ModelContextWindowError):
            return "shorten the history (session compaction) or use a model with a larger context window"
        if isinstance(error, ModelNotFoundError):
            return "check the model name (--model) and that the server serves it"
        return "check the model name and options in the blueprint or profile"

    def _key_variable(self, settings: ModelSettings, route: Route) -> str:
        if settings.api_key_env:
            return settings.api_key_env
        if route.scripted:
            return "the provider's API key variable"
        if over_httpx(route):
            return "OPENAI_API_KEY"  # what litellm's validate_environment names for an openai/ route
        litellm = _litellm()
        try:
            missing = litellm.validate_environment(model=route.chat_model).get("missing_keys") or []
        except Exception:  # unknown provider
            missing = []
        return str(missing[0]) if missing else f"{(route.provider or 'OPENAI').upper()}_API_KEY"

    # -- tokens -------------------------------------------------------------------------------------

    def count_tokens(self, text_or_messages: str | Sequence[Mapping[str, object]], *, purpose: str = "code") -> int:
        """Tokens in a text or chat messages for the route's model (about len/4 when litellm cannot tell)."""
        return self._count(self._route(purpose), text_or_messages)

    @staticmethod
    def _count(route: Route, value: str | Sequence[Mapping[str, object]]) -> int:
        flat = value if isinstance(value, str) else "\n".join(str(m.get("content") or "") for m in value)
        if route.scripted:
            return approx_tokens(flat)
        litellm = _litellm()
        try:
            if isinstance(value, str):
                return int(litellm.token_counter(model=route.chat_model, text=value))
            return int(litellm.token_counter(model=route.chat_model, messages=[dict(m) for m in value]))
        except Exception:  # no tokenizer for this model (litellm raises various errors)
            return approx_tokens(flat)

    def context_window(self, *, purpose: str = "code") -> int | None:
        """The route's context window in tokens: ``settings.context_window``, else litellm's model info."""
        settings = self.settings_for(purpose)
        if settings.context_window is not None:
            return settings.context_window
        if is_local(settings):
            return local_context_window(settings)
        route = self._route(purpose)
        if route.scripted:
            return None
        if over_httpx(route):
            from codeact.engine.model._prices import model_entry

            entry = model_entry(route.chat_model) or {}
            value = entry.get("max_input_tokens") or entry.get("max_tokens")
            return int(value) if value else None
        litellm = _litellm()
        try:
            info = litellm.get_model_info(route.chat_model)
        except Exception:  # not in litellm's model map
            return None
        value = info.get("max_input_tokens") or info.get("max_tokens")
        return int(value) if value else None

    def supports_vision(self, *, purpose: str = "code") -> bool:
        """Whether the route's model takes image parts.

        ``model.options.vision`` (true/false) decides when the blueprint sets it; else litellm's model
        info (``supports_vision``); a model litellm does not know, a local or a scripted one is text-only.
        """
        settings = self.settings_for(purpose)
        declared = settings.options.get("vision")
        if isinstance(declared, bool):
            return declared
        if is_local(settings):
            return False
        route = self._route(purpose)
        if route.scripted:
            return False
        if over_httpx(route):
            from codeact.engine.model._prices import model_entry

            return bool((model_entry(route.chat_model) or {}).get("supports_vision"))
        litellm = _litellm()
        try:
            return bool(litellm.supports_vision(model=route.chat_model))
        except Exception:  # not in litellm's model map
            return False

    async def aclose(self) -> None:
        """Release per-client state (scripts). litellm's HTTP clients are process-wide and stay.

        litellm's logging worker is a task on the loop of the first call: it is drained and stopped
        here, on that loop, so closing the loop later (``asyncio.run``, ``run_sync``) does not leave
        a pending task to be destroyed at garbage collection.
        """
        self._scripts.clear()
        self._resolved.clear()
        clients, self._http = self._http, {}
        running = asyncio.get_running_loop()
        for loop, client in clients.items():
            if loop is running:  # another (finished) loop's client cannot be closed here; its sockets go with it
                with contextlib.suppress(Exception):
                    await client.aclose()
        await stop_background_tasks()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # the first call imports again and reports what went wrong
        _litellm()


def over_httpx(route: Route) -> bool:
    """Whether ``route`` is an OpenAI-compatible server at a base URL, called over httpx (not litellm).

    ``CODEACT_MODEL_TRANSPORT=litellm`` sends it through litellm instead.
    """
    if route.scripted or route.provider != "openai" or not route.api_base:
        return False
    if route.text_model is not None and not route.text_model.startswith("text-completion-openai/"):
        return False
    if route.chat_model.startswith("openai/responses/"):
        return False  # --protocol responses: litellm's Responses API route (/v1/responses)
    return os.environ.get("CODEACT_MODEL_TRANSPORT", "").strip().lower() != "litellm"


def _scripted(kwargs: Mapping[str, Any], *, messages: list[dict[str, object]] | None, prompt: str | None,
              stream: bool) -> object:  # fmt: skip
    """Serve a scripted reply as a server would: the reply object, or an async iterator of its chunks."""
    model = str(kwargs["model"])
    script = lookup(model[len(SCRIPTED_PREFIX) :])
    if script is None:
        raise ModelConfigError(f"scripted model {model!r} is gone: keep the ScriptedReplies object alive while in use")
    sent = messages if messages is not None else [{"role": "user", "content": prompt}]
    metadata = kwargs.get("metadata") or {}
    purpose, protocol = str(metadata.get("codeact_purpose", "code")), str(metadata.get("codeact_protocol", "chat"))
    entry = script.take(purpose, messages=sent, protocol=protocol, stream=stream)
    if entry.error is not None:
        raise entry.to_error(model=model)
    raw = messages is None
    if not stream:
        return as_object(openai_response(entry, sent, model=model, raw=raw))
    chunks = [as_object(chunk) for chunk in openai_chunks(entry, sent, raw=raw)]

    async def replay() -> AsyncIterator[object]:
        for chunk in chunks:
            yield chunk

    return replay()


def _stream_cut(error: ModelProviderError, state: _Stream, *, route: Route, where: str, tries: str,
                attempts: int) -> ModelStreamCutError:  # fmt: skip
    """The error of a stream that broke off after ``state.chunks`` chunks: what had arrived, and what to do."""
    text = "".join(state.text)
    calls = tuple((slot["name"], slot["arguments"]) for _, slot in sorted(state.tools.items()))
    received = [f"{len(text)} characters of text"]
    received += [f"tool call {name!r} with {len(arguments)} characters of arguments" for name, arguments in calls]
    message = (
        f"model {route.display!r}{where}: the streamed reply broke off after {state.chunks} chunks{tries} "
        f"({', '.join(received)} received; nothing of it was used): {error.message}; "
        "check the server (its logs, a proxy's timeouts) and run again: a session resumes where it stopped"
    )
    return ModelStreamCutError(
        message,
        chunks=state.chunks,
        partial_text=text,
        partial_tool_calls=calls,
        retryable=True,  # the run may be run again (it resumes); this call is not repeated (its text was sent)
        status_code=error.status_code,
        provider=error.provider or route.provider,
        model=route.display,
        attempts=attempts,
    )


def _absorb(chunk: object, state: _Stream) -> list[str]:
    """Fold one stream chunk into ``state``; return its text pieces."""
    usage: object = getattr(chunk, "usage", None)
    counted: object = getattr(usage, "prompt_tokens", None) or getattr(usage, "completion_tokens", None)
    if usage is not None and counted:
        state.usage = usage
    pieces: list[str] = []
    for choice in getattr(chunk, "choices", None) or []:
        delta = getattr(choice, "delta", None)
        piece = getattr(delta, "content", None) if delta is not None else getattr(choice, "text", None)
        if piece:
            state.text.append(piece)
            pieces.append(piece)
        for call in (getattr(delta, "tool_calls", None) or []) if delta is not None else []:
            _absorb_tool_call(call, state.tools)
        if getattr(choice, "finish_reason", None):
            state.finish = choice.finish_reason
    return pieces


def _absorb_tool_call(call: object, tools: dict[int, dict[str, str]]) -> None:
    """Fold one streamed tool-call fragment into ``tools`` (slots by the call's ``index``).

    OpenAI's shape: the first fragment of a call has its ``index``, ``id`` and function ``name`` (and
    ``arguments: ""``); later ones the ``index`` and a piece of the arguments. The name is set, not
    appended (as litellm's own chunk builder does: some servers repeat it in every fragment). A server
    that gives no index starts a new call when a fragment brings a new id, else continues the last one.
    """
    index = getattr(call, "index", None)
    call_id = getattr(call, "id", None)
    if index is None:
        last = max(tools) if tools else None
        same = last is not None and (not call_id or tools[last]["id"] in ("", call_id))
        index = last if same and last is not None else (0 if last is None else last + 1)
    slot = tools.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if call_id:
        slot["id"] = call_id
    function = getattr(call, "function", None)
    if function is not None:
        name = getattr(function, "name", None)
        if name:
            slot["name"] = name
        slot["arguments"] += getattr(function, "arguments", None) or ""


def _tool_call(index: int, data: Mapping[str, str]) -> ToolCall:
    raw = data.get("arguments", "")
    try:
        decoded = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        decoded = None
    return ToolCall(
        id=data.get("id") or f"call_{index}",
        name=data.get("name", ""),
        arguments=decoded if isinstance(decoded, dict) else {},
        raw_arguments=raw,
    )


# ------------------------------------------------------------------------------ the scripted provider
