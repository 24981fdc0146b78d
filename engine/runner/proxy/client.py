"""codeact under a host: the run-scoped API it reaches the host's models, tools and storage through.

:class:`RunAPIProxy` sends actions over a :class:`HostTransport` (the LangBot plugin runtime's
connection, or anything speaking the same actions). Every call carries ``run_id``, is checked
against the run's frozen authorization *before* it leaves (a refused call never reaches the
host), and its timeout is capped by the time left before ``runtime.deadline_at``
(``deadline_exceeded`` without calling the host once it has passed).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from codeact.engine.runner.entities import AgentAPIError, RunnerAPIError, RunnerContext
from codeact.engine.runner.proxy.authorization import RunAuthorization
from codeact.sandbox.aio import wait_for

__all__ = ["HostTransport", "RunAPIProxy"]


class HostTransport(Protocol):
    """The connection to the host: one request/response action, or a stream of responses."""

    async def call(self, action: str, payload: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        """Send ``action`` with ``payload``; the host's response data.

        Raises:
            RunnerAPIError: the host refused or failed the call.
        """
        ...

    def stream(self, action: str, payload: dict[str, Any], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """Send ``action``; the host's responses as they come."""
        ...


def _host_error(action: str, exc: BaseException) -> RunnerAPIError:
    if isinstance(exc, RunnerAPIError):
        return exc
    if isinstance(exc, TimeoutError):
        return RunnerAPIError.make("deadline_exceeded", f"{action}: the host did not answer in time", retryable=True)
    error = getattr(exc, "error", None)  # the SDK's AgentAPIException carries an AgentAPIError
    if error is not None and hasattr(error, "model_dump"):
        return RunnerAPIError(AgentAPIError.model_validate(error.model_dump()))
    return RunnerAPIError.make("runtime_error", f"{action} failed on the host: {exc}", retryable=True, action=action)


class RunAPIProxy:
    """The host APIs of one run, checked locally first.

    Args:
        context: The run's context (its ``run_id``, ``resources`` and deadline are snapshotted now).
        transport: The connection to the host.
    """

    def __init__(self, context: RunnerContext, transport: HostTransport) -> None:
        self.auth = RunAuthorization.from_context(context)
        self.transport = transport

    @property
    def run_id(self) -> str:
        """The run every call is made for."""
        return self.auth.run_id

    async def _call(self, action: str, payload: dict[str, Any], *, default_timeout: float) -> dict[str, Any]:
        timeout = self.auth.timeout(default_timeout, payload.get("timeout"))
        body = {"run_id": self.run_id, **payload, "timeout": timeout}
        self.auth.check_payload(body)
        try:
            return await wait_for(self.transport.call(action, body, timeout=timeout), timeout)
        except Exception as exc:
            raise _host_error(action, exc) from exc

    @staticmethod
    def _expect(response: Mapping[str, Any], key: str, action: str) -> Any:
        if key not in response:
            raise RunnerAPIError.make(
                "runtime_error", f"{action} response is missing {key!r}", action=action, missing_key=key
            )
        return response[key]

    # -- models ----------------------------------------------------------------------------------
    async def invoke_llm(
        self,
        model_id: str,
        messages: list[dict[str, Any]],
        *,
        funcs: list[dict[str, Any]] | None = None,
        extra_args: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One model reply: ``{"message": {...}, "usage": {...} | None}``."""
        self.auth.check_resource("model", model_id, "invoke")
        payload = {
            "llm_model_uuid": model_id,
            "messages": messages,
            "funcs": funcs or [],
            "extra_args": extra_args or {},
            "timeout": timeout,
        }
        response = await self._call("invoke_llm", payload, default_timeout=120.0)
        return {"message": self._expect(response, "message", "invoke_llm"), "usage": response.get("usage")}

    async def stream_llm(
        self,
        model_id: str,
        messages: list[dict[str, Any]],
        *,
        funcs: list[dict[str, Any]] | None = None,
        extra_args: dict[str, Any] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The model's reply as stream events (``{"chunk": {...}}`` and maybe a last ``{"usage": {...}}``)."""
        self.auth.check_resource("model", model_id, "stream")
        timeout = self.auth.timeout(120.0)
        body = {
            "run_id": self.run_id,
            "llm_model_uuid": model_id,
            "messages": messages,
            "funcs": funcs or [],
            "extra_args": extra_args or {},
            "timeout": timeout,
        }
        self.auth.check_payload(body)
        try:
            async with asyncio.timeout(timeout):
                async for item in self.transport.stream("invoke_llm_stream", body, timeout=timeout):
                    yield item
        except Exception as exc:
            raise _host_error("invoke_llm_stream", exc) from exc

    # -- tools -----------------------------------------------------------------------------------
    async def get_tool_detail(self, tool_name: str) -> dict[str, Any]:
        """The tool's name, description and JSON schema of parameters."""
        self.auth.check_resource("tool", tool_name, "detail")
        response = await self._call("get_tool_detail", {"tool_name": tool_name}, default_timeout=30.0)
        detail = self._expect(response, "tool", "get_tool_detail")
        return dict(detail) if isinstance(detail, Mapping) else {"value": detail}

    async def call_tool(self, tool_name: str, parameters: dict[str, Any]) -> Any:
        """Call a host tool; its result."""
        self.auth.check_resource("tool", tool_name, "call")
        response = await self._call(
            "call_tool", {"tool_name": tool_name, "parameters": parameters}, default_timeout=180.0
        )
        return self._expect(response, "result", "call_tool")

    # -- knowledge -------------------------------------------------------------------------------
    async def retrieve_knowledge(
        self, kb_id: str, query_text: str, *, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[Any]:
        """Search a knowledge base; its results."""
        self.auth.check_resource("knowledge_base", kb_id, "retrieve")
        payload = {"kb_id": kb_id, "query_text": query_text, "top_k": top_k, "filters": filters or {}}
        response = await self._call("retrieve_knowledge_base", payload, default_timeout=30.0)
        results = self._expect(response, "results", "retrieve_knowledge_base")
        return list(results) if isinstance(results, list) else [results]

    # -- storage ---------------------------------------------------------------------------------
    async def storage_get(self, area: str, key: str) -> bytes:
        """A value of ``plugin`` or ``workspace`` storage."""
        self.auth.check_storage(area)
        response = await self._call(f"get_{area}_storage", {"key": key}, default_timeout=15.0)
        return base64.b64decode(str(self._expect(response, "value_base64", f"get_{area}_storage")))

    async def storage_set(self, area: str, key: str, value: bytes) -> None:
        """Store a value in ``plugin`` or ``workspace`` storage."""
        self.auth.check_storage(area)
        payload = {"key": key, "value_base64": base64.b64encode(value).decode()}
        await self._call(f"set_{area}_storage", payload, default_timeout=15.0)

    async def storage_delete(self, area: str, key: str) -> None:
        """Delete a value of ``plugin`` or ``workspace`` storage."""
        self.auth.check_storage(area)
        await self._call(f"delete_{area}_storage", {"key": key}, default_timeout=15.0)
