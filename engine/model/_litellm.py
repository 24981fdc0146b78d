"""litellm, imported lazily and once: its set-up, the scripted provider it routes to, its background task.

The model client serves ``scripted/...`` without litellm; the custom provider registered here serves
direct litellm use (``litellm.acompletion(model="scripted/...")``) from the same script.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

from codeact.engine.model.errors import (
    ModelConfigError,
)
from codeact.engine.model.scripted import (
    SCRIPTED_PREFIX,
    ScriptedReplies,
    ScriptedReply,
    lookup,
    reply_finish,
    reply_usage,
)
from codeact.sandbox.aio import wait_for

_import_lock = threading.Lock()
_WARNING_AT_IMPORT = (
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.per_user_auth",
)
_litellm_module: Any = None


def _quiet_litellm() -> None:
    # pytest (and `python -W error`) reset the warning filters per test, so this is re-applied per call.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"litellm(\.|$)")


def _litellm() -> Any:
    """Import and configure litellm once (thread-safe); register the scripted provider."""
    global _litellm_module
    if _litellm_module is not None:
        _quiet_litellm()
        return _litellm_module
    with _import_lock:
        if _litellm_module is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import litellm
                from litellm.types.utils import (
                    Delta,
                    Message,
                    ModelResponse,
                    ModelResponseStream,
                    TextCompletionResponse,
                )

                # litellm >= 1.106 imports its GitHub Copilot authenticator lazily, inside a call, and
                # that import builds pydantic TypeAdapters that warn about `ReadOnly` TypedDict items:
                # import those modules now, while warnings are silenced.
                for name in _WARNING_AT_IMPORT:
                    with contextlib.suppress(ImportError):
                        importlib.import_module(name)
                # Build the lazily generated pydantic schemas now, while warnings are silenced.
                ModelResponse()
                ModelResponse(stream=True)
                ModelResponseStream()
                Message()
                Delta()
                TextCompletionResponse()
            module: Any = litellm
            module.suppress_debug_info = True
            module.disable_aiohttp_transport = True
            # litellm cuts `stop` to 4 strings silently; the client caps it where the API does (ModelClient._kwargs)
            module.disable_stop_sequence_limit = True
            handler = _scripted_handler_class(module)()
            others = [p for p in module.custom_provider_map if p.get("provider") != "scripted"]
            module.custom_provider_map = [*others, {"provider": "scripted", "custom_handler": handler}]
            module.utils.custom_llm_setup()
            _litellm_module = module
    _quiet_litellm()
    return _litellm_module


def litellm_loaded() -> bool:
    """Whether litellm was imported (and set up) in this process."""
    return _litellm_module is not None


async def stop_background_tasks() -> None:
    """Stop litellm's background logging task if it runs on the current event loop.

    litellm starts that task on the loop of the first call and leaves it pending; a loop closed
    with it pending destroys it with a warning at garbage collection. Call this before closing a
    loop that made model calls (``ModelClient.aclose`` and ``Agent.run_sync`` do). Cheap, and a
    no-op when litellm was never imported; the task restarts on the next call.
    """
    if _litellm_module is None:
        return
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER as worker
    except ImportError:  # an older litellm without the worker
        return
    if getattr(worker, "_bound_loop", None) is not asyncio.get_running_loop():
        return
    with contextlib.suppress(Exception):
        await wait_for(worker.flush(), timeout=1.0)
    with contextlib.suppress(Exception):
        await worker.stop()


def _scripted_handler_class(litellm: Any) -> type:
    """Build the litellm ``CustomLLM`` serving ``scripted/...`` (needs litellm, so built lazily)."""
    from litellm.types.utils import Message, Usage

    files: dict[str, ScriptedReplies] = {}
    files_lock = threading.Lock()

    def script_for(model: str) -> ScriptedReplies:
        name = model[len(SCRIPTED_PREFIX) :] if model.startswith(SCRIPTED_PREFIX) else model
        if name.startswith("@"):
            script = lookup(name)
            if script is None:
                raise ModelConfigError(
                    f"scripted model {SCRIPTED_PREFIX + name!r} is gone: keep the ScriptedReplies object alive"
                )
            return script
        with files_lock:  # direct litellm use: one shared cursor per file
            if name not in files:
                files[name] = ScriptedReplies.from_file(name)
            return files[name]

    def take(model: str, messages: list[dict[str, object]], litellm_params: Any, *, stream: bool) -> ScriptedReply:
        metadata = (litellm_params or {}).get("metadata") or {}
        purpose = str(metadata.get("codeact_purpose") or "code")
        protocol = str(metadata.get("codeact_protocol") or "chat")
        entry = script_for(model).take(purpose, messages=messages, protocol=protocol, stream=stream)
        if entry.error is not None:
            raise entry.to_error(model=SCRIPTED_PREFIX + model)
        return entry

    def respond(model: str, messages: list[dict[str, object]], model_response: Any, litellm_params: Any) -> Any:
        entry = take(model, messages, litellm_params, stream=False)
        tool_calls = [
            {
                "id": c.id or f"call_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for i, c in enumerate(entry.tool_calls)
        ]
        model_response.choices[0].message = Message(content=entry.text or None, tool_calls=tool_calls or None)
        model_response.choices[0].finish_reason = reply_finish(entry)
        usage = reply_usage(entry, messages)
        model_response.usage = Usage(
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            total_tokens=usage["total_tokens"],
        )
        model_response.model = SCRIPTED_PREFIX + model
        return model_response

    def chunks(model: str, messages: list[dict[str, object]], litellm_params: Any) -> Iterator[dict[str, object]]:
        entry = take(model, messages, litellm_params, stream=True)
        for piece in entry.pieces():
            yield {"text": piece, "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                   "tool_use": None}  # fmt: skip
        for i, call in enumerate(entry.tool_calls):
            tool_use = {"id": call.id or f"call_{i}", "type": "function", "index": i,
                        "function": {"name": call.name, "arguments": call.arguments_json()}}  # fmt: skip
            yield {"text": "", "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                   "tool_use": tool_use}  # fmt: skip
        yield {"text": "", "is_finished": True, "finish_reason": reply_finish(entry),
               "usage": reply_usage(entry, messages), "index": 0, "tool_use": None}  # fmt: skip

    class _ScriptedLLM(litellm.CustomLLM):  # type: ignore[misc]
        """Replays :class:`ScriptedReplies` through litellm (model ``scripted/<file>`` or ``scripted/@N``)."""

        def completion(self, model: str, messages: list[dict[str, object]], api_base: str,
                       custom_prompt_dict: dict[str, object], model_response: Any, *args: object,
                       **kwargs: Any) -> Any:  # fmt: skip
            return respond(model, messages, model_response, kwargs.get("litellm_params"))

        async def acompletion(self, model: str, messages: list[dict[str, object]], api_base: str,
                              custom_prompt_dict: dict[str, object], model_response: Any, *args: object,
                              **kwargs: Any) -> Any:  # fmt: skip
            return respond(model, messages, model_response, kwargs.get("litellm_params"))

        def streaming(self, model: str, messages: list[dict[str, object]], api_base: str,
                      custom_prompt_dict: dict[str, object], model_response: Any, *args: object,
                      **kwargs: Any) -> Iterator[dict[str, object]]:  # fmt: skip
            yield from chunks(model, messages, kwargs.get("litellm_params"))

        async def astreaming(self, model: str, messages: list[dict[str, object]], api_base: str,
                             custom_prompt_dict: dict[str, object], model_response: Any, *args: object,
                             **kwargs: Any) -> AsyncIterator[dict[str, object]]:  # fmt: skip
            for chunk in chunks(model, messages, kwargs.get("litellm_params")):
                yield chunk

    return _ScriptedLLM
