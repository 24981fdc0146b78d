"""Hooks and interceptors around the agent loop (seed ``002``: AgentHook, ModelInterceptor, ToolInterceptor).

* Hooks run at fixed points: ``before_agent`` / ``after_agent`` once per run, ``before_model`` /
  ``after_model`` around every model call. Before-hooks run in registration order, after-hooks in
  reverse order. A hook may return a :class:`Jump` to send the loop to ``model`` (ask the model
  again), ``tools`` (run the code it already has) or ``end`` (finish the run with a reason).
* Interceptors wrap a call: ``await interceptor.intercept(request, call_next)``. The first
  registered interceptor is the outermost, so it sees the request first and the response last.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "Hook",
    "HookContext",
    "Jump",
    "ModelCall",
    "ModelInterceptor",
    "ToolCall",
    "ToolInterceptor",
    "chain",
]

JumpTarget = Literal["model", "tools", "end"]


@dataclass(frozen=True, kw_only=True)
class Jump:
    """Returned by a hook to change where the loop goes next.

    Attributes:
        to: ``model`` (call the model again), ``tools`` (run the current code), ``end`` (stop the run).
        reason: Why; ``end`` puts it in ``run.completed``.
    """

    to: JumpTarget
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class HookContext:
    """What a hook sees: the run, the round, and (for model hooks) the purpose and reply."""

    run_id: str
    session_id: str
    agent_id: str
    round: int
    input: str
    purpose: str | None = None
    reply: str | None = None
    state: dict[str, Any] = field(default_factory=dict)


class Hook:
    """Base class: override the points you need; each may return a :class:`Jump` or None."""

    name: str = "hook"

    async def before_agent(self, ctx: HookContext) -> Jump | None:
        """Before the first round of a run."""
        return None

    async def after_agent(self, ctx: HookContext) -> Jump | None:
        """After the run ended (a jump here is ignored but for ``end``'s reason)."""
        return None

    async def before_model(self, ctx: HookContext) -> Jump | None:
        """Before each model call."""
        return None

    async def after_model(self, ctx: HookContext) -> Jump | None:
        """After each model call (``ctx.reply`` holds the reply)."""
        return None


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """A model request as interceptors see it (they may return a changed copy)."""

    purpose: str
    messages: tuple[dict[str, str], ...] = ()
    prompt: str | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A toolkit call as interceptors see it: codec-encoded arguments."""

    toolkit: str
    operation: str
    arguments: dict[str, Any]


@runtime_checkable
class ModelInterceptor(Protocol):
    """Wraps model calls; call ``call_next(request)`` to go on (or return a reply without calling)."""

    async def intercept_model(self, request: ModelCall, call_next: Callable[[ModelCall], Awaitable[Any]]) -> Any:
        """Handle one model call."""
        ...


@runtime_checkable
class ToolInterceptor(Protocol):
    """Wraps toolkit calls from sandbox code; raise to refuse, or return a result without calling."""

    async def intercept_tool(self, request: ToolCall, call_next: Callable[[ToolCall], Awaitable[Any]]) -> Any:
        """Handle one tool call."""
        ...


def chain(
    interceptors: Sequence[Any],
    method: str,
    final: Callable[[Any], Awaitable[Any]],
) -> Callable[[Any], Awaitable[Any]]:
    """Compose ``interceptors`` around ``final``; the first one is the outermost."""
    call: Callable[[Any], Awaitable[Any]] = final
    for interceptor in reversed([i for i in interceptors if hasattr(i, method)]):
        bound = getattr(interceptor, method)

        def _make(bound: Any, inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
            async def _call(request: Any) -> Any:
                return await bound(request, inner)

            return _call

        call = _make(bound, call)
    return call
