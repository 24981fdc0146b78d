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

from codeact.engine.runner.entities import AgentAPIError, RunnerAPIError, RunnerContext, RunnerPermissions
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
        permissions: The runner's manifest permissions: a call they do not declare is refused before it
            leaves, as the host would refuse it (None: the context's grants only).
    """

    def __init__(
        self, context: RunnerContext, transport: HostTransport, *, permissions: RunnerPermissions | None = None
    ) -> None:
        self.auth = RunAuthorization.from_context(context, permissions=permissions)
        self.transport = transport

    @property
    def run_id(self) -> str:
        """The run every call is made for."""
        return self.auth.run_id

    async def _call(self, action: str, payload: dict[str, Any], *, default_timeout: float) -> dict[str, Any]:
        timeout = self.auth.timeout(default_timeout, payload.get("timeout"))
        body = {"run_id": self.run_id, **payload, "timeout": timeout}
        self.auth.check_declared(action, body)
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
        self.auth.check_declared("invoke_llm_stream", {})
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
        """A value of ``plugin``, ``workspace`` or ``binding`` storage."""
        self.auth.check_storage(area)
        response = await self._call(f"get_{area}_storage", {"key": key}, default_timeout=15.0)
        return base64.b64decode(str(self._expect(response, "value_base64", f"get_{area}_storage")))

    async def storage_set(self, area: str, key: str, value: bytes) -> None:
        """Store a value in ``plugin``, ``workspace`` or ``binding`` storage."""
        self.auth.check_storage(area)
        payload = {"key": key, "value_base64": base64.b64encode(value).decode()}
        await self._call(f"set_{area}_storage", payload, default_timeout=15.0)

    async def storage_delete(self, area: str, key: str) -> None:
        """Delete a value of ``plugin``, ``workspace`` or ``binding`` storage."""
        self.auth.check_storage(area)
        await self._call(f"delete_{area}_storage", {"key": key}, default_timeout=15.0)

    async def storage_list(self, area: str, prefix: str | None = None) -> list[str]:
        """The keys of ``plugin``, ``workspace`` or ``binding`` storage (those starting with ``prefix``)."""
        self.auth.check_storage(area)
        response = await self._call(f"get_{area}_storage_keys", {}, default_timeout=15.0)
        keys = self._expect(response, "keys", f"get_{area}_storage_keys")
        return [str(k) for k in keys if prefix is None or str(k).startswith(prefix)]

    # -- models: rerank --------------------------------------------------------------------------
    async def rerank(
        self, model_id: str, query: str, documents: list[str], *, top_k: int | None = None
    ) -> list[dict[str, Any]]:
        """Score ``documents`` against ``query`` with a host rerank model: ``[{"index", "relevance_score"}]``."""
        self.auth.check_resource("model", model_id, "rerank")
        payload = {"rerank_model_uuid": model_id, "query": query, "documents": documents, "top_k": top_k}
        response = await self._call("invoke_rerank", payload, default_timeout=60.0)
        results = self._expect(response, "results", "invoke_rerank")
        return list(results) if isinstance(results, list) else [results]

    # -- knowledge: list -------------------------------------------------------------------------
    def list_knowledge_bases(self) -> list[dict[str, Any]]:
        """The knowledge bases granted for ``list`` (answered from the run's grants, as the SDK does)."""
        granted = self.auth.operations.get("knowledge_base", {})
        return [
            {"uuid": kb.kb_id, "name": kb.kb_name, "type": kb.kb_type}
            for kb in self.auth.resources.knowledge_bases
            if "list" in granted.get(kb.kb_id, frozenset())
        ]

    # -- context: history, events, artifacts -----------------------------------------------------
    async def history_page(
        self,
        *,
        conversation_id: str | None = None,
        before_cursor: str | None = None,
        after_cursor: str | None = None,
        limit: int = 50,
        direction: str = "backward",
        include_attachments: bool = False,
    ) -> dict[str, Any]:
        """A page of the conversation's transcript (``HistoryPage``: ``items``, cursors, ``has_more``)."""
        self.auth.check_context_api("history_page")
        self.auth.check_conversation(conversation_id)
        payload = {
            "conversation_id": conversation_id,
            "before_cursor": before_cursor,
            "after_cursor": after_cursor,
            "limit": limit,
            "direction": direction,
            "include_attachments": include_attachments,
        }
        return await self._call("history_page", payload, default_timeout=30.0)

    async def history_search(
        self, query: str, *, filters: dict[str, Any] | None = None, top_k: int = 10
    ) -> dict[str, Any]:
        """Transcript items matching ``query`` (``HistorySearchResult``)."""
        self.auth.check_context_api("history_search")
        payload = {"query": query, "filters": filters or {}, "top_k": top_k}
        return await self._call("history_search", payload, default_timeout=30.0)

    async def event_get(self, event_id: str) -> dict[str, Any]:
        """One event record (``AgentEventRecord``)."""
        self.auth.check_context_api("event_get")
        return await self._call("event_get", {"event_id": event_id}, default_timeout=15.0)

    async def event_page(
        self,
        *,
        conversation_id: str | None = None,
        event_types: list[str] | None = None,
        before_cursor: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """A page of event records (``EventPage``)."""
        self.auth.check_context_api("event_page")
        self.auth.check_conversation(conversation_id)
        payload = {
            "conversation_id": conversation_id,
            "event_types": event_types,
            "before_cursor": before_cursor,
            "limit": limit,
        }
        return await self._call("event_page", payload, default_timeout=30.0)

    async def artifact_metadata(self, artifact_id: str) -> dict[str, Any]:
        """An artifact's name, MIME type and size."""
        self.auth.check_context_api("artifact_metadata")
        return await self._call("artifact_metadata", {"artifact_id": artifact_id}, default_timeout=15.0)

    async def artifact_read(self, artifact_id: str, *, offset: int = 0, length: int = 65536) -> bytes:
        """``length`` bytes of an artifact from ``offset`` (fewer at its end)."""
        self.auth.check_context_api("artifact_read")
        payload = {"artifact_id": artifact_id, "offset": offset, "length": length}
        response = await self._call("artifact_read", payload, default_timeout=30.0)
        return base64.b64decode(str(self._expect(response, "data_base64", "artifact_read")))

    async def artifact_open_stream(self, artifact_id: str) -> AsyncIterator[bytes]:
        """The whole artifact, in the chunks the host streams (checked as ``artifact_read``; bounded by the deadline).

        Raises:
            RunnerAPIError: the host refused it (``payload_too_large`` past its size limit, ``unauthorized`` for a
                type it does not serve, ``not_found`` once expired), or the stream broke off before its end.
        """
        self.auth.check_context_api("artifact_read")
        timeout = self.auth.timeout(60.0)
        body = {"run_id": self.run_id, "artifact_id": artifact_id, "timeout": timeout}
        self.auth.check_declared("artifact_open_stream", body)
        ended = False
        try:
            async with asyncio.timeout(timeout):
                async for item in self.transport.stream("artifact_open_stream", body, timeout=timeout):
                    if item.get("eof") is True:
                        ended = True  # the last line: the host's stream ends here
                    elif not ended:
                        yield base64.b64decode(str(self._expect(item, "data_base64", "artifact_open_stream")))
        except Exception as exc:
            raise _host_error("artifact_open_stream", exc) from exc
        if not ended:
            raise RunnerAPIError.make(
                "runtime_error", f"the stream of artifact {artifact_id!r} ended before its last line", retryable=True
            )

    # -- state -----------------------------------------------------------------------------------
    async def state_get(self, scope: str, key: str) -> Any:
        """A value of the run's host-owned state (None when unset)."""
        self._check_state(scope)
        response = await self._call("state_get", {"scope": scope, "key": key}, default_timeout=15.0)
        return response.get("value")

    async def state_set(self, scope: str, key: str, value: Any) -> None:
        """Set a JSON value of the run's host-owned state."""
        self._check_state(scope)
        await self._call("state_set", {"scope": scope, "key": key, "value": value}, default_timeout=15.0)

    async def state_delete(self, scope: str, key: str) -> bool:
        """Delete a state value; True when it existed."""
        self._check_state(scope)
        response = await self._call("state_delete", {"scope": scope, "key": key}, default_timeout=15.0)
        return bool(response.get("success"))

    async def state_list(self, scope: str, *, prefix: str | None = None, limit: int = 100) -> list[str]:
        """The keys of a state scope."""
        self._check_state(scope)
        payload = {"scope": scope, "prefix": prefix, "limit": limit}
        response = await self._call("state_list", payload, default_timeout=15.0)
        return [str(k) for k in self._expect(response, "keys", "state_list")]

    def _check_state(self, scope: str) -> None:
        self.auth.check_context_api("state")
        self.auth.check_state_scope(scope)

    # -- platform --------------------------------------------------------------------------------
    async def request_action(self, action: str, target: Any = None, payload: dict[str, Any] | None = None) -> Any:
        """Ask the platform to perform ``action`` (restricted: only actions the run was granted)."""
        self.auth.check_platform_action(action)
        body = {"action": action, "target": target, "params": payload or {}}
        response = await self._call("call_platform_api", body, default_timeout=180.0)
        return self._expect(response, "result", "call_platform_api")
