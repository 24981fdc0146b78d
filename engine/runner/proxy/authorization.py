"""A run's authorization: a frozen snapshot of what the host granted, and the checks on every call.

Both directions of the run-scoped API use it. Under a host, :class:`RunAPIProxy` checks a call
here before it leaves (the seed: "SDK local checks only improve the developer experience");
as the host (``codeact serve``), :class:`AuthorizationRegistry` holds one snapshot per active run
and checks every run-scoped call in the seed's order (section 7):

1. an active run with that ``run_id`` exists (``not_found``);
2. the caller is the runner the run belongs to (``unauthorized``);
3. the runner's manifest declares the permission (``unauthorized``: "runner 'r' does not declare the
   permission history: search in its manifest ...": the manifest is the most a runner may use, section 3.4);
4. the resource is in the run's ``resources`` (``unauthorized``: "Model 'm' is not authorized.");
5. the operation / scope is granted for it (``unauthorized``: "... is not authorized for operation 'stream'");
6. the payload size (``payload_too_large``);
7. the run's rate limit (``rate_limited``, retryable, ``details.retry_after_s``);
8. the deadline (``deadline_exceeded``).

A run that ended at its deadline stays known for a while (the last 1000 ended runs): a late call
for it is refused with ``deadline_exceeded`` (what happened), any other ended run's with ``not_found``.

The snapshot is a deep copy frozen at registration: changing the context afterwards changes nothing.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from codeact.engine.runner.entities import AgentResources, RunnerAPIError, RunnerContext, RunnerPermissions

__all__ = [
    "DEFAULT_OPERATIONS",
    "MAX_PAYLOAD_BYTES",
    "STATE_SCOPES",
    "STORAGE_AREAS",
    "AuthorizationRegistry",
    "RateLimit",
    "RunAuthorization",
    "permission_of",
]

STORAGE_AREAS = ("plugin", "workspace", "binding")
"""The storage areas of protocol v1 (``storage.get/set/delete/list(area, ...)``)."""

STATE_SCOPES = ("conversation", "actor", "subject", "runner", "binding")
"""The scopes of the run's host-owned state (``AgentRunState``)."""

DEFAULT_OPERATIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "model": frozenset({"invoke", "stream", "rerank", "count_tokens"}),
        "tool": frozenset({"detail", "call"}),
        "knowledge_base": frozenset({"list", "retrieve"}),
    }
)
"""Operations a resource listed without ``operations`` allows (as the SDK reads an empty list)."""

MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
"""The largest request payload (compact JSON) a run-scoped call may carry."""

_LABEL = {"model": "Model", "tool": "Tool", "knowledge_base": "Knowledge base"}
_PLURAL = {"model": "models", "tool": "tools", "knowledge_base": "knowledge bases"}


def _unauthorized(message: str, **details: Any) -> RunnerAPIError:
    return RunnerAPIError.make("unauthorized", message, **details)


@dataclass(frozen=True, kw_only=True)
class RunAuthorization:
    """What one run may do (frozen; build it with :meth:`from_context`).

    Attributes:
        run_id: The run.
        runner_id: The runner the run belongs to (the caller identity checked by the host).
        deadline_at: Unix time after which every call fails with ``deadline_exceeded``.
        operations: ``kind -> resource id -> allowed operations`` (kinds ``model``, ``tool``,
            ``knowledge_base``).
        plugin_storage: Whether plugin storage is granted.
        workspace_storage: Whether workspace storage is granted.
        binding_storage: Whether the binding's storage is granted.
        conversation_id: The run's conversation (history and events of other conversations are refused).
        platform_actions: The platform actions the run may request (``platform_capabilities.actions``).
        context_apis: The context APIs the host offered (``history_page``, ``state``, ...).
        resources: The deep-copied resources (for listing them).
        permissions: The runner's manifest permissions, the most any of its runs may use; None holds the run
            to its context's grants only (a caller with no manifest at hand).
    """

    run_id: str
    runner_id: str = ""
    deadline_at: float | None = None
    operations: Mapping[str, Mapping[str, frozenset[str]]]
    plugin_storage: bool = False
    workspace_storage: bool = False
    binding_storage: bool = False
    conversation_id: str | None = None
    platform_actions: frozenset[str] = frozenset()
    context_apis: frozenset[str] = frozenset()
    resources: AgentResources
    permissions: RunnerPermissions | None = None

    @classmethod
    def from_context(
        cls, context: RunnerContext, *, runner_id: str = "", permissions: RunnerPermissions | None = None
    ) -> RunAuthorization:
        """Snapshot ``context``'s grants (a deep copy: later changes to ``context`` do not count).

        ``permissions`` (the runner's manifest's, copied too) bounds every call on top of the grants.
        """
        resources = copy.deepcopy(context.resources)

        def ops(kind: str, declared: list[str]) -> frozenset[str]:
            return frozenset(declared) if declared else DEFAULT_OPERATIONS[kind]

        operations = {
            "model": MappingProxyType({m.model_id: ops("model", list(m.operations)) for m in resources.models}),
            "tool": MappingProxyType({t.tool_name: ops("tool", list(t.operations)) for t in resources.tools}),
            "knowledge_base": MappingProxyType(
                {k.kb_id: ops("knowledge_base", list(k.operations)) for k in resources.knowledge_bases}
            ),
        }
        apis = context.context.available_apis.model_dump()
        actions = resources.platform_capabilities.get("actions")
        return cls(
            run_id=context.run_id,
            runner_id=runner_id,
            deadline_at=context.runtime.deadline_at,
            operations=MappingProxyType(operations),
            plugin_storage=resources.storage.plugin_storage,
            workspace_storage=resources.storage.workspace_storage,
            binding_storage=bool(getattr(resources.storage, "binding_storage", False)),
            conversation_id=context.conversation.conversation_id if context.conversation is not None else None,
            platform_actions=frozenset(a for a in actions if isinstance(a, str))
            if isinstance(actions, list)
            else frozenset(),
            context_apis=frozenset(name for name, on in apis.items() if on is True),
            resources=resources,
            permissions=permissions.model_copy(deep=True) if permissions is not None else None,
        )

    # -- the checks (each raises RunnerAPIError) --------------------------------------------------
    def remaining(self, now: float | None = None) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.deadline_at is None:
            return None
        return self.deadline_at - (time.time() if now is None else now)

    def timeout(self, default: float, requested: float | None = None) -> float:
        """A call's timeout: ``requested`` (else ``default``) capped by the remaining deadline.

        Raises:
            RunnerAPIError: ``deadline_exceeded`` once the deadline has passed (nothing is sent).
        """
        base = requested if isinstance(requested, int | float) and requested > 0 else default
        left = self.remaining()
        if left is None:
            return float(base)
        if left <= 0:
            raise RunnerAPIError.make(
                "deadline_exceeded", "Agent run deadline has expired", retryable=True, run_id=self.run_id
            )
        return max(min(float(base), left), 0.001)

    def check_declared(self, action: str, payload: Mapping[str, object]) -> None:
        """The runner's manifest declares the permission ``action`` needs (nothing to check without a manifest).

        Raises:
            RunnerAPIError: ``unauthorized``, naming the permission and what the manifest declares of its kind.
        """
        needed = permission_of(action, payload)
        if self.permissions is None or needed is None:
            return
        kind, operation = needed
        if not self.permissions.declares(kind, operation):
            declared = list(getattr(self.permissions, kind))
            raise _unauthorized(
                f"runner {self.runner_id or '(this runner)'!r} does not declare the permission {kind}: {operation} "
                f"in its manifest (permissions.{kind}: {declared}); a host serves a runner no more than its manifest "
                f"declares: add {operation!r} to permissions.{kind}",
                permission=kind,
                operation=operation,
            )

    def check_resource(self, kind: str, resource_id: str, operation: str) -> None:
        """The resource is granted to the run, for ``operation``."""
        granted = self.operations.get(kind, {})
        if resource_id not in granted:
            raise _unauthorized(
                f"{_LABEL[kind]} '{resource_id}' is not authorized. Allowed {_PLURAL[kind]}: {sorted(granted)}",
                kind=kind,
                resource=resource_id,
            )
        allowed = granted[resource_id]
        if operation not in allowed:
            raise _unauthorized(
                f"{kind} '{resource_id}' is not authorized for operation '{operation}'. "
                f"Allowed operations: {sorted(allowed)}",
                kind=kind,
                resource=resource_id,
                operation=operation,
            )

    def check_storage(self, area: str) -> None:
        """The storage area (``plugin``, ``workspace`` or ``binding``) is granted."""
        if area not in STORAGE_AREAS:
            raise RunnerAPIError.make(
                "invalid_argument", f"unknown storage area {area!r}; use plugin, workspace or binding", area=area
            )
        if not getattr(self, f"{area}_storage"):
            raise _unauthorized(f"{area.capitalize()} storage is not authorized.", area=area)

    def check_state_scope(self, scope: str) -> None:
        """``scope`` is a state scope (``conversation``, ``actor``, ``subject``, ``runner``, ``binding``)."""
        if scope not in STATE_SCOPES:
            raise RunnerAPIError.make(
                "invalid_argument", f"unknown state scope {scope!r}; use one of {', '.join(STATE_SCOPES)}", scope=scope
            )

    def check_conversation(self, conversation_id: object) -> None:
        """History and events of the run's own conversation only (None: the run's)."""
        if conversation_id is not None and conversation_id != self.conversation_id:
            raise _unauthorized(
                f"conversation {conversation_id!r} is not this run's; a run reads its own conversation only",
                conversation_id=conversation_id,
            )

    def check_platform_action(self, action: str) -> None:
        """The platform action is granted (``resources.platform_capabilities.actions``); none is by default."""
        if action not in self.platform_actions:
            raise _unauthorized(
                f"platform action {action!r} is not authorized. Allowed actions: {sorted(self.platform_actions)}",
                action=action,
            )

    def check_context_api(self, name: str) -> None:
        """The host offered the context API ``name`` (``history_page``, ``state``, ...) for this run."""
        if name not in self.context_apis:
            raise _unauthorized(f"{name} is not available for this run", api=name)

    def check_payload(self, payload: object, *, limit: int = MAX_PAYLOAD_BYTES) -> None:
        """The request payload fits ``limit`` bytes of compact JSON."""
        size = len(json.dumps(payload, separators=(",", ":"), default=str).encode())
        if size > limit:
            raise RunnerAPIError.make(
                "payload_too_large", f"the request is {size} bytes; at most {limit} are accepted", size=size
            )


# action name -> (kind, operation) of the resource it touches; its id is read from the payload
_RESOURCE_ACTIONS: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {
        "invoke_llm": ("model", "invoke", "llm_model_uuid"),
        "invoke_llm_stream": ("model", "stream", "llm_model_uuid"),
        "count_tokens": ("model", "count_tokens", "llm_model_uuid"),
        "invoke_rerank": ("model", "rerank", "rerank_model_uuid"),
        "get_tool_detail": ("tool", "detail", "tool_name"),
        "call_tool": ("tool", "call", "tool_name"),
        "retrieve_knowledge_base": ("knowledge_base", "retrieve", "kb_id"),
    }
)
_STORAGE_ACTIONS: Mapping[str, str] = MappingProxyType(
    {
        f"{verb}_{area}_storage{suffix}": area
        for area in STORAGE_AREAS
        for verb, suffix in (("get", ""), ("set", ""), ("delete", ""), ("get", "_keys"))
    }
)
_CONTEXT_ACTIONS: Mapping[str, str] = MappingProxyType(
    {
        "history_page": "history_page",
        "history_search": "history_search",
        "event_get": "event_get",
        "event_page": "event_page",
        "state_get": "state",
        "state_set": "state",
        "state_delete": "state",
        "state_list": "state",
        "artifact_metadata": "artifact_metadata",
        "artifact_read": "artifact_read",
        "artifact_open_stream": "artifact_read",
    }
)
# action name -> the manifest permission it needs (kind, operation); storage and platform actions below
_PERMISSIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "invoke_llm": ("models", "invoke"),
        "invoke_llm_stream": ("models", "stream"),
        "count_tokens": ("models", "count_tokens"),
        "invoke_rerank": ("models", "rerank"),
        "get_tool_detail": ("tools", "detail"),
        "call_tool": ("tools", "call"),
        "list_knowledge_bases": ("knowledge_bases", "list"),
        "retrieve_knowledge_base": ("knowledge_bases", "retrieve"),
        "history_page": ("history", "page"),
        "history_search": ("history", "search"),
        "event_get": ("events", "get"),
        "event_page": ("events", "page"),
        "artifact_metadata": ("artifacts", "metadata"),
        "artifact_read": ("artifacts", "read"),
        "artifact_open_stream": ("artifacts", "read"),
    }
)


def permission_of(action: str, payload: Mapping[str, object]) -> tuple[str, str] | None:
    """The manifest permission a run-scoped ``action`` needs: ``(kind, operation)``, or None (state: no kind).

    A storage action needs its area (``storage: plugin``), ``call_platform_api`` its action
    (``platform_api: message.edit``).
    """
    if action in _PERMISSIONS:
        return _PERMISSIONS[action]
    if action in _STORAGE_ACTIONS:
        return "storage", _STORAGE_ACTIONS[action]
    if action == "call_platform_api":
        return "platform_api", str(payload.get("action", ""))
    return None


_CONVERSATION_ACTIONS = frozenset({"history_page", "event_page"})
_STATE_ACTIONS = frozenset({"state_get", "state_set", "state_delete", "state_list"})
_OPEN_ACTIONS = frozenset({"list_knowledge_bases"})  # answers only what the run was granted


@dataclass(frozen=True)
class RateLimit:
    """At most ``calls`` run-scoped calls per ``per_s`` seconds per run (a token bucket: bursts up to ``calls``)."""

    calls: int
    per_s: float = 1.0

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"50"`` (per second) or ``"600/60"`` (calls / seconds).

        Raises:
            ValueError: not that shape, or not positive.
        """
        calls, _, per = text.partition("/")
        limit = cls(int(calls), float(per) if per else 1.0)
        if limit.calls < 1 or limit.per_s <= 0:
            raise ValueError(f"a rate limit is CALLS or CALLS/SECONDS with both positive, got {text!r}")
        return limit


class _Bucket:
    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.tokens = float(limit.calls)
        self.at = time.monotonic()

    def take(self) -> float:
        """0.0 when a call may go now (one token taken), else the seconds until it may."""
        now = time.monotonic()
        refill = self.limit.calls / self.limit.per_s
        self.tokens = min(float(self.limit.calls), self.tokens + (now - self.at) * refill)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / refill


class AuthorizationRegistry:
    """The authorization snapshots of the active runs (codeact as the host).

    The service registers a run when it starts and unregisters it when it ends; every run-scoped
    call is checked with :meth:`check` before it is served.
    """

    _ENDED_KEPT = 1000

    def __init__(self, *, rate: RateLimit | None = None) -> None:
        self.rate = rate
        self._runs: dict[str, RunAuthorization] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._ended: OrderedDict[str, RunAuthorization] = OrderedDict()
        self._lock = threading.Lock()

    def register(
        self, context: RunnerContext, *, runner_id: str, permissions: RunnerPermissions | None = None
    ) -> RunAuthorization:
        """Snapshot ``context``'s grants for its run (frozen deep copy) and make the run active.

        ``permissions`` are the runner's manifest's: a call they do not declare is refused whatever the
        context grants (``codeact serve`` passes every runner's; None checks the context's grants only).
        """
        auth = RunAuthorization.from_context(context, runner_id=runner_id, permissions=permissions)
        self._runs[context.run_id] = auth
        if self.rate is not None:
            self._buckets[context.run_id] = _Bucket(self.rate)
        return auth

    def unregister(self, run_id: str) -> None:
        """The run ended: later calls with its id fail with ``not_found`` (``deadline_exceeded`` past its deadline)."""
        auth = self._runs.pop(run_id, None)
        self._buckets.pop(run_id, None)
        if auth is not None and auth.deadline_at is not None:
            self._ended[run_id] = auth
            while len(self._ended) > self._ENDED_KEPT:
                self._ended.popitem(last=False)

    def get(self, run_id: str) -> RunAuthorization | None:
        """The active run's snapshot, or None."""
        return self._runs.get(run_id)

    def check(self, action: str, payload: Mapping[str, object], *, caller: str) -> RunAuthorization:
        """Check one run-scoped call in the seed's order; returns the run's snapshot.

        Args:
            action: The action name (``invoke_llm``, ``call_tool``, ``get_plugin_storage``, ...).
            payload: The request; it must carry ``run_id``.
            caller: The identity of the runner making the call.

        Raises:
            RunnerAPIError: ``not_found`` (no such active run), ``unauthorized`` (wrong caller, a
                permission the runner's manifest does not declare, resource, operation or scope),
                ``invalid_argument`` (an unknown action),
                ``payload_too_large``, ``deadline_exceeded``.
        """
        run_id = payload.get("run_id")
        auth = self._runs.get(run_id) if isinstance(run_id, str) else None
        if auth is None:
            ended = self._ended.get(run_id) if isinstance(run_id, str) else None
            if ended is not None and caller == ended.runner_id and (ended.remaining() or 0.0) <= 0:
                ended.timeout(1.0)  # deadline_exceeded: the run ended at its deadline
            raise RunnerAPIError.make(
                "not_found", f"no active run {run_id!r}: it ended or never started", run_id=run_id
            )
        if caller != auth.runner_id:
            raise _unauthorized(f"run {auth.run_id!r} does not belong to runner {caller!r}", caller=caller)
        auth.check_declared(action, payload)
        if action in _RESOURCE_ACTIONS:
            kind, operation, key = _RESOURCE_ACTIONS[action]
            auth.check_resource(kind, str(payload.get(key, "")), operation)
        elif action in _STORAGE_ACTIONS:
            auth.check_storage(_STORAGE_ACTIONS[action])
        elif action in _CONTEXT_ACTIONS:
            auth.check_context_api(_CONTEXT_ACTIONS[action])
            if action in _CONVERSATION_ACTIONS:
                auth.check_conversation(payload.get("conversation_id"))
            if action in _STATE_ACTIONS:
                auth.check_state_scope(str(payload.get("scope", "")))
        elif action == "call_platform_api":
            auth.check_platform_action(str(payload.get("action", "")))
        elif action not in _OPEN_ACTIONS:
            raise RunnerAPIError.make("invalid_argument", f"unknown run-scoped action {action!r}", action=action)
        auth.check_payload(dict(payload))
        bucket = self._buckets.get(auth.run_id)
        if bucket is not None:
            with self._lock:
                wait = bucket.take()
            if wait > 0:
                raise RunnerAPIError.make(
                    "rate_limited",
                    f"run {auth.run_id!r} made more than {bucket.limit.calls} calls in {bucket.limit.per_s:g} s; "
                    f"retry in {wait:.2f} s",
                    retryable=True,
                    retry_after_s=round(wait, 3),
                )
        auth.timeout(1.0)  # the deadline: deadline_exceeded once it has passed
        return auth
