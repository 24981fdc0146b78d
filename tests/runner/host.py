"""A LangBot-like host for tests: serves run-scoped actions, its LLM replies scripted (the only fake)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from codeact.engine.runner import RunnerAPIError
from codeact.engine.runner.proxy import AuthorizationRegistry


class ScriptedHost:
    """Answers ``invoke_llm`` / ``invoke_llm_stream`` from a list of replies, ``call_tool`` from a table.

    With a ``registry`` it checks every call the way ``codeact serve`` does (as ``caller``).
    """

    def __init__(
        self,
        replies: list[str],
        *,
        tools: dict[str, Any] | None = None,
        registry: AuthorizationRegistry | None = None,
        caller: str = "",
    ) -> None:
        self.replies = list(replies)
        self.tools = tools or {}
        self.calls: list[tuple[str, dict[str, Any], float]] = []
        self.registry = registry
        self.caller = caller

    def _seen(self, action: str, payload: dict[str, Any], timeout: float) -> None:
        self.calls.append((action, payload, timeout))
        if self.registry is not None:
            self.registry.check(action, payload, caller=self.caller)

    async def call(self, action: str, payload: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        self._seen(action, payload, timeout)
        await asyncio.sleep(0)
        if action == "invoke_llm":
            return {"message": {"role": "assistant", "content": self.replies.pop(0)}, "usage": {"prompt_tokens": 9}}
        if action == "call_tool":
            name = payload["tool_name"]
            value = self.tools[name]
            return {"result": value(**payload["parameters"]) if callable(value) else value}
        if action == "retrieve_knowledge_base":
            passages = [{"content": f"{payload['kb_id']}: returns within 30 days", "score": 0.9}]
            return {"results": passages[: payload["top_k"]]}
        if action == "invoke_rerank":  # scores by shared words with the query, as a rerank model ranks
            words = set(payload["query"].lower().split())
            scored = [
                {"index": i, "relevance_score": len(words & set(doc.lower().split())) / max(len(words), 1)}
                for i, doc in enumerate(payload["documents"])
            ]
            scored.sort(key=lambda r: -r["relevance_score"])
            return {"results": scored[: payload["top_k"]] if payload.get("top_k") else scored}
        if action == "call_platform_api":
            return {"result": {"accepted": True, "action": payload["action"], "target": payload["target"]}}
        raise RunnerAPIError.make("invalid_argument", f"the test host does not serve {action!r}")

    async def stream(self, action: str, payload: dict[str, Any], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        self._seen(action, payload, timeout)
        reply = self.replies.pop(0)
        for i in range(0, len(reply), 7):
            await asyncio.sleep(0)
            yield {"chunk": {"role": "assistant", "content": reply[i : i + 7]}}
        yield {"usage": {"prompt_tokens": 11, "completion_tokens": 5}}
