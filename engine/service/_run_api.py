"""The run-scoped API of protocol v1 (seed 003 section 7), answered by ``codeact serve`` for its own runs.

``POST /v1/runs/{run_id}/api/{action}`` with the action's JSON payload (the SDK's action names and
payloads: ``history_page``, ``event_get``, ``artifact_read``, ``state_set``, ``get_binding_storage_keys``,
...). The caller names itself with ``X-Runner-Id`` (the runner the run belongs to) and presents a
bearer token that may use that runner. Every call is checked by the run manager's
``AuthorizationRegistry`` in the seed's order (run, caller, resource, scope, size, rate, deadline)
before it is served, and written to the audit log (one JSON line: never a token, key value or payload).

Errors are the seed's ``AgentAPIError``: ``{"error": {"code", "message", "retryable", "details"}}``
with ``not_found`` 404, ``unauthorized`` 403, ``invalid_argument`` 422, ``payload_too_large`` 413,
``rate_limited`` 429 (``Retry-After``), ``deadline_exceeded`` 504, ``runtime_error`` 500.

What the host serves from what it has:

- ``history_page`` / ``history_search``: the run's session as transcript items (its segments: the
  user's messages, the model's code and answers, the evaluations), the run's conversation only; each
  item's ``metadata`` names its segment's kind, round and execution chain (``exec_id``, ``parent_exec_ids``);
- ``event_get`` / ``event_page``: the run's result stream (each envelope an event record, its
  ``data`` summarized, never inlined);
- ``artifact_metadata`` / ``artifact_read`` / ``artifact_open_stream``: the files the session's rounds wrote
  (``ROUND/NAME`` ids, or the ``codeact://`` URI of their ``artifact.created``), read in ranges of at most
  1 MiB or streamed whole as JSON lines; the host's size limit, MIME check, expiry and scope are
  engine/service/_run_artifacts.py's;
- ``state_get`` / ``state_set`` / ``state_delete`` / ``state_list``: host-owned state by scope (a JSON
  value per key, at most 64 KiB each);
- ``{get,set,delete}_{area}_storage`` and ``get_{area}_storage_keys``: storage of the areas
  ``plugin`` (the runner's), ``workspace`` (shared) and ``binding`` (the runner in this
  conversation).

State and storage are kept in the session store, so they outlive the run and the server; which values a
scope or area reaches (and why a scope the run cannot name is refused) is engine/service/_host_state.py's.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from codeact.engine.errors import StoreError
from codeact.engine.service._host_state import (
    MAX_STATE_BYTES,
    checked_key,
    decode_state,
    encode_state,
    state_namespace,
    storage_namespace,
)
from codeact.engine.service._http import authenticate, read_json, service_state
from codeact.engine.service._run_artifacts import StoredArtifact, find_artifact, stream_lines

if TYPE_CHECKING:
    from starlette.requests import Request

    from codeact.engine.runner import RunnerAPIError
    from codeact.engine.service._runs import RunManager, _Run
    from codeact.engine.service._state import ServiceState

__all__ = ["MAX_READ_BYTES", "MAX_STATE_BYTES", "run_api_routes"]

MAX_READ_BYTES = 1 << 20
"""The largest ``artifact_read`` range."""
_MAX_LIMIT = 200
_SUMMARY = 200
_STATUS = {
    "not_found": 404,
    "unauthorized": 403,
    "invalid_argument": 422,
    "payload_too_large": 413,
    "rate_limited": 429,
    "deadline_exceeded": 504,
    "runtime_error": 500,
}


def run_api_routes() -> list[Route]:
    """The ``/v1/runs/{run_id}/api/{action}`` route."""
    return [Route("/v1/runs/{run_id}/api/{action}", run_api, methods=["POST"])]


def _error(code: str, message: str, **details: Any) -> RunnerAPIError:
    from codeact.engine.runner import RunnerAPIError

    return RunnerAPIError.make(code, message, **details)


def _int(payload: Mapping[str, Any], key: str, default: int, *, low: int = 1, high: int = _MAX_LIMIT) -> int:
    value = payload.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _error("invalid_argument", f"{key} must be a whole number from {low} to {high}, got {value!r}", key=key)
    return value


def _cursor(payload: Mapping[str, Any], key: str) -> int | None:
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise _error("invalid_argument", f"{key} must be a cursor from an earlier page, got {value!r}", key=key)


def _key(payload: Mapping[str, Any]) -> str:
    return checked_key(payload.get("key"))


def _summary(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SUMMARY else text[: _SUMMARY - 1] + "…"


class _Call:
    """One checked call: the run, the state it reads and writes, and what it touches (for the audit line)."""

    def __init__(self, state: ServiceState, manager: RunManager, run: _Run, payload: dict[str, Any]) -> None:
        self.state = state
        self.manager = manager
        self.run = run
        self.payload = payload
        self.resource: str | None = None
        self.scope: str | None = None

    @property
    def conversation_id(self) -> str | None:
        context = self.run.context
        return context.conversation.conversation_id if context is not None and context.conversation else None

    # -- history ---------------------------------------------------------------------------------
    async def _transcript(self) -> list[dict[str, Any]]:
        segments = await self.state.store.segments(self.run.session_id)
        items = []
        for seq, segment in enumerate(segments, start=1):
            kind = str(segment.get("kind", "")).lower()
            role, item_type = {
                "user": ("user", "message"),
                "answer": ("assistant", "message"),
                "code": ("assistant", "tool_call"),
                "evaluation": ("tool", "tool_result"),
                "observation": ("tool", "tool_result"),
            }.get(kind, ("system", "system") if kind in ("context", "summary", "system") else ("assistant", "message"))
            content = str(segment.get("content", ""))
            items.append(
                {
                    "transcript_id": f"{self.run.session_id}:{seq}",
                    "event_id": str(segment.get("id") or seq),
                    "conversation_id": self.conversation_id,
                    "role": role,
                    "item_type": item_type,
                    "content": content if len(content) <= 4000 else content[:3999] + "…",
                    "seq": seq,
                    "cursor": str(seq),
                    "created_at": int(segment.get("timestamp") or 0) or None,
                    "metadata": {
                        "kind": segment.get("kind"),
                        "round": segment.get("round_index"),
                        "exec_id": segment.get("exec_id") or None,  # the round that produced it (segments)
                        "parent_exec_ids": list(segment.get("parent_exec_ids") or ()),
                    },
                }
            )
        return items

    async def history_page(self) -> dict[str, Any]:
        self.scope = "conversation"
        items = await self._transcript()
        limit = _int(self.payload, "limit", 50)
        direction = self.payload.get("direction", "backward")
        if direction not in ("backward", "forward"):
            raise _error("invalid_argument", f"direction must be backward or forward, got {direction!r}")
        before, after = _cursor(self.payload, "before_cursor"), _cursor(self.payload, "after_cursor")
        chosen = [i for i in items if (before is None or i["seq"] < before) and (after is None or i["seq"] > after)]
        page = chosen[-limit:] if direction == "backward" else chosen[:limit]
        has_more = len(chosen) > len(page)
        return {
            "items": page,
            "next_cursor": str(page[-1]["seq"]) if page else None,
            "prev_cursor": str(page[0]["seq"]) if page else None,
            "has_more": has_more,
            "total_count": len(items),
        }

    async def history_search(self) -> dict[str, Any]:
        self.scope = "conversation"
        query = self.payload.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _error("invalid_argument", "query must be a non-empty string")
        top_k = _int(self.payload, "top_k", 10)
        needle = query.lower()
        found = [i for i in reversed(await self._transcript()) if needle in (i["content"] or "").lower()]
        return {"items": found[:top_k], "total_count": len(found), "query": query}

    # -- events ----------------------------------------------------------------------------------
    def _event(self, envelope: Any) -> dict[str, Any]:
        seq = int(envelope.sequence or 0)
        data = envelope.data if isinstance(envelope.data, dict) else {}
        return {
            "event_id": f"{self.run.run_id}:{seq}",
            "event_type": envelope.type,
            "event_time": int(envelope.timestamp) if envelope.timestamp is not None else None,
            "source": "runner",
            "conversation_id": self.conversation_id,
            "actor_type": "runner",
            "actor_id": self.run.runner_id,
            "input_summary": _summary(data) if data else None,
            "seq": seq,
            "cursor": str(seq),
            "created_at": int(envelope.timestamp) if envelope.timestamp is not None else None,
            "metadata": {"run_id": self.run.run_id},
        }

    async def event_get(self) -> dict[str, Any]:
        event_id = self.payload.get("event_id")
        self.resource = str(event_id)
        run_part, _, seq = str(event_id).rpartition(":")
        for envelope in self.run.buffer if run_part == self.run.run_id else ():
            if str(envelope.sequence) == seq:
                return self._event(envelope)
        raise _error("not_found", f"no event {event_id!r} in run {self.run.run_id!r}", event_id=event_id)

    async def event_page(self) -> dict[str, Any]:
        limit = _int(self.payload, "limit", 50)
        before = _cursor(self.payload, "before_cursor")
        types = self.payload.get("event_types")
        records = [
            self._event(e)
            for e in list(self.run.buffer)
            if (before is None or int(e.sequence or 0) < before) and (not types or e.type in types)
        ]
        page = records[-limit:]
        return {
            "items": page,
            "next_cursor": None,
            "prev_cursor": str(page[0]["seq"]) if page else None,
            "has_more": len(records) > len(page),
            "total_count": len(records),
        }

    # -- artifacts (engine/service/_run_artifacts.py: scope, expiry, size, MIME) -----------------------
    async def _artifact(self) -> StoredArtifact:
        artifact_id = self.payload.get("artifact_id")
        self.resource = str(artifact_id)
        found = await find_artifact(self.state.store, self.run.session_id, artifact_id)
        self.state.artifacts.check_alive(found)
        return found

    async def _readable(self) -> tuple[StoredArtifact, bytes]:
        found = await self._artifact()
        refusal = self.state.artifacts.refusal(found)
        if refusal is not None:
            raise refusal
        if found.data is None:  # pragma: no cover - refusal() answers an artifact without content
            raise _error("not_found", f"artifact {self.resource!r} has no content")
        return found, found.data

    async def artifact_metadata(self) -> dict[str, Any]:
        return self.state.artifacts.describe(await self._artifact())

    async def artifact_read(self) -> dict[str, Any]:
        found, content = await self._readable()
        offset = _int(self.payload, "offset", 0, low=0, high=1 << 40)
        length = _int(self.payload, "length", 65536, low=1, high=MAX_READ_BYTES)
        chunk = content[offset : offset + length]
        return {
            **self.state.artifacts.describe(found),
            "offset": offset,
            "length": len(chunk),
            "data_base64": base64.b64encode(chunk).decode(),
            "eof": offset + len(chunk) >= len(content),
        }

    async def artifact_open_stream(self) -> Response:
        found, content = await self._readable()
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        return StreamingResponse(stream_lines(found, content), media_type="application/x-ndjson", headers=headers)

    # -- state (kept in the session store: engine/service/_host_state.py) --------------------------
    async def state_get(self) -> dict[str, Any]:
        namespace = self._namespace_of_scope()
        key = self.resource = _key(self.payload)
        with _store_errors():
            data = await self.state.store.kv_get(namespace, key)
        return {"value": decode_state(key, data)}

    async def state_set(self) -> dict[str, Any]:
        namespace = self._namespace_of_scope()
        key = self.resource = _key(self.payload)
        data = encode_state(self.payload.get("value"))
        with _store_errors():
            await self.state.store.kv_set(namespace, key, data)
        return {"success": True}

    async def state_delete(self) -> dict[str, Any]:
        namespace = self._namespace_of_scope()
        key = self.resource = _key(self.payload)
        with _store_errors():
            return {"success": await self.state.store.kv_delete(namespace, key)}

    async def state_list(self) -> dict[str, Any]:
        namespace = self._namespace_of_scope()
        prefix = self.payload.get("prefix") or ""
        if prefix:
            prefix = checked_key(prefix, field="prefix")
        limit = _int(self.payload, "limit", 100, high=100)
        with _store_errors():
            page = await self.state.store.kv_list(namespace, prefix=prefix, limit=limit)
        return {"keys": list(page.keys), "has_more": page.has_more}

    def _namespace_of_scope(self) -> str:
        self.scope = str(self.payload.get("scope"))
        return state_namespace(self.scope, runner_id=self.run.runner_id, context=self.run.context)

    # -- storage (kept in the session store: engine/service/_host_state.py) ------------------------
    async def storage(self, verb: str, area: str) -> dict[str, Any]:
        self.scope = area
        namespace = storage_namespace(area, runner_id=self.run.runner_id, context=self.run.context)
        store = self.state.store
        if verb == "keys":
            with _store_errors():
                page = await store.kv_list(namespace)
            return {"keys": list(page.keys)}
        key = self.resource = _key(self.payload)
        if verb == "get":
            with _store_errors():
                data = await store.kv_get(namespace, key)
            if data is None:
                raise _error("not_found", f"no {area} storage key {key!r}", area=area, key=key)
            return {"value_base64": base64.b64encode(data).decode()}
        if verb == "set":
            try:
                data = base64.b64decode(str(self.payload.get("value_base64", "")), validate=True)
            except (binascii.Error, ValueError):
                raise _error("invalid_argument", "value_base64 must be base64") from None
            with _store_errors():
                await store.kv_set(namespace, key, data)
            return {}
        with _store_errors():
            await store.kv_delete(namespace, key)
        return {}


@contextmanager
def _store_errors() -> Iterator[None]:
    """The store's refusals as the protocol's errors: a bad key 422, a value too large 413, an outage 500."""
    try:
        yield
    except StoreError as exc:
        if exc.code == "store.invalid_key":
            raise _error("invalid_argument", exc.message) from None
        if exc.code == "store.too_large":
            raise _error("payload_too_large", exc.message) from None
        retryable = exc.code in ("store.unavailable", "store.busy")
        raise _error("runtime_error", f"the host's store failed: {exc.message}", retryable=retryable) from None


def _handler(call: _Call, action: str) -> Callable[[], Awaitable[dict[str, Any] | Response]] | None:
    for area in ("plugin", "workspace", "binding"):
        for verb, name in (("get", f"get_{area}_storage"), ("set", f"set_{area}_storage"),
                           ("delete", f"delete_{area}_storage"), ("keys", f"get_{area}_storage_keys")):  # fmt: skip
            if action == name:
                return lambda verb=verb, area=area: call.storage(verb, area)  # type: ignore[misc]
    served = {
        "history_page", "history_search", "event_get", "event_page", "artifact_metadata", "artifact_read",
        "artifact_open_stream", "state_get", "state_set", "state_delete", "state_list",
    }  # fmt: skip
    return getattr(call, action) if action in served else None


def _refusal(exc: RunnerAPIError) -> Response:
    error = exc.error.model_dump(mode="json")
    headers = {}
    if error["code"] == "rate_limited":
        headers["Retry-After"] = str(max(1, round(float(error["details"].get("retry_after_s", 1)) + 0.5)))
    return JSONResponse({"error": error}, status_code=_STATUS.get(error["code"], 500), headers=headers)


async def run_api(request: Request) -> Response:
    """``POST /v1/runs/{run_id}/api/{action}``: one run-scoped call, checked, served and audited."""
    from codeact.engine.runner import RunnerAPIError
    from codeact.engine.service._runs import RunManager

    started = time.perf_counter()
    scope = authenticate(request)
    state = service_state(request)
    run_id: str = request.path_params["run_id"]
    action: str = request.path_params["action"]
    caller = request.headers.get("x-runner-id", "")
    audit = state.audit
    outcome: dict[str, Any] = {"result": "error"}
    call: _Call | None = None
    try:
        if not caller or not scope.allows(caller):
            raise _error(
                "unauthorized",
                "name the calling runner in X-Runner-Id, with a token that may use it"
                if not caller
                else f"this token may not act as runner {caller!r}",
                caller=caller or None,
            )
        body = await read_json(request) if request.headers.get("content-length", "0") != "0" else {}
        if not isinstance(body, dict):
            raise _error("invalid_argument", "the payload must be a JSON object")
        payload = {**body, "run_id": run_id}
        manager = state.runs
        if not isinstance(manager, RunManager):
            raise _error("not_found", f"run {run_id!r} is not run by this server (queued runs: ask their worker)")
        manager.authorizations.check(action, payload, caller=caller)
        run = manager.run_state(run_id)
        if run is None:  # pragma: no cover - registered runs are active
            raise _error("not_found", f"no active run {run_id!r}")
        call = _Call(state, manager, run, payload)
        handler = _handler(call, action)
        if handler is None:
            raise _error(
                "invalid_argument",
                f"this host does not serve {action!r} (it serves history, events, artifacts, state and storage)",
                action=action,
            )
        result = await handler()
        outcome = {"result": "ok", "status": 200}
        return result if isinstance(result, Response) else JSONResponse(result)
    except RunnerAPIError as exc:
        outcome = {"result": exc.error.code, "status": _STATUS.get(exc.error.code, 500)}
        return _refusal(exc)
    finally:
        run_info = None if call is None else call.run
        audit.write(
            event="api.call",
            run_id=run_id,
            runner_id=run_info.runner_id if run_info is not None else None,
            caller=caller or None,
            token=scope.fingerprint,
            action=action,
            resource=call.resource if call is not None else None,
            scope=call.scope if call is not None else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
            **outcome,
        )
