"""A model client backed by the host's models (``invoke_llm`` / ``invoke_llm_stream`` through the proxy).

It stands in for :class:`codeact.engine.model.ModelClient` in an agent run under a host: every model
call of the run (code, thought, utility) goes to the host model the binding chose, through the
run-scoped proxy (checked, carrying ``run_id``, bounded by the deadline).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from codeact.engine.model.settings import ModelReply, ModelSettings, ToolCall
from codeact.engine.runner.proxy.client import RunAPIProxy

__all__ = ["HostModelClient"]


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping))
    return ""


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out = {k: int(v) for k, v in raw.items() if k.endswith("_tokens") and isinstance(v, int)}
    if "total_tokens" not in out and ("prompt_tokens" in out or "completion_tokens" in out):
        out["total_tokens"] = out.get("prompt_tokens", 0) + out.get("completion_tokens", 0)
    return out


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    found = call.get("function")
    function: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    raw = str(function.get("arguments") or "{}")
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = {}
    return ToolCall(
        id=str(call.get("id", "")),
        name=str(function.get("name", "")),
        arguments=decoded if isinstance(decoded, dict) else {},
        raw_arguments=raw,
    )


class HostModelClient:
    """``ModelClient``'s interface over one host model.

    Args:
        proxy: The run's API proxy.
        model_id: The host model (a ``resources.models[].model_id``).
        context_window: Its context window in tokens, when the host says.
    """

    def __init__(self, proxy: RunAPIProxy, model_id: str, *, context_window: int | None = None) -> None:
        self.proxy = proxy
        self.model_id = model_id
        self._window = context_window

    @property
    def name(self) -> str:
        """The model as recorded in sessions: ``host/<model id>``."""
        return f"host/{self.model_id}"

    def settings_for(self, purpose: str = "code") -> ModelSettings:
        """Settings naming the host model (every purpose uses it)."""
        return ModelSettings(model=self.name, context_window=self._window)

    def count_tokens(self, text_or_messages: str | Sequence[Mapping[str, Any]], *, purpose: str = "code") -> int:
        """About four characters per token (the host's tokenizer is not called per round)."""
        from codeact.engine.model.scripted import approx_tokens

        if isinstance(text_or_messages, str):
            return approx_tokens(text_or_messages)
        return approx_tokens("\n".join(str(m.get("content") or "") for m in text_or_messages))

    def context_window(self, *, purpose: str = "code") -> int | None:
        """The window given at construction, if any."""
        return self._window

    async def complete(
        self,
        *,
        purpose: str = "code",
        messages: Sequence[Mapping[str, Any]] | None = None,
        prompt: str | None = None,
        stop: Sequence[str] | None = None,
        on_delta: Any = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ModelReply:
        """One reply of the host model (streamed through ``on_delta`` when given and allowed).

        Raises:
            RunnerAPIError: the proxy refused the call (not authorized, deadline) or the host failed it.
        """
        chat = [dict(m) for m in messages] if messages else [{"role": "user", "content": prompt or ""}]
        extra = {"stop": list(stop)} if stop else {}
        started = time.perf_counter()
        text, usage, calls = "", dict[str, int](), tuple[ToolCall, ...]()
        streams = on_delta is not None and "stream" in self.proxy.auth.operations["model"].get(self.model_id, ())
        if streams:
            async for item in self.proxy.stream_llm(self.model_id, chat, funcs=tools, extra_args=extra):
                chunk = item.get("chunk")
                if isinstance(chunk, Mapping):
                    piece = _content(chunk)
                    if piece:
                        text += piece
                        outcome = on_delta(piece)
                        if inspect.isawaitable(outcome):
                            await outcome
                usage = _usage(item.get("usage")) or usage
        else:
            reply = await self.proxy.invoke_llm(self.model_id, chat, funcs=tools, extra_args=extra)
            message = reply["message"] if isinstance(reply.get("message"), Mapping) else {}
            text, usage = _content(message), _usage(reply.get("usage"))
            calls = tuple(_tool_call(c) for c in message.get("tool_calls") or () if isinstance(c, Mapping))
        return ModelReply(
            text=text,
            model=self.name,
            usage=usage,
            cost_usd=None,
            finish_reason="tool_calls" if calls else "stop",
            latency_s=time.perf_counter() - started,
            tool_calls=calls,
            purpose=purpose,
        )

    async def aclose(self) -> None:
        """Nothing to release (the host owns the connection)."""
