"""Hooks and interceptors around the agent loop (seed ``002``: AgentHook, ModelInterceptor, ToolInterceptor).

* Hooks run at fixed points: ``before_agent`` / ``after_agent`` once per run, ``before_model`` /
  ``after_model`` around every model call. Before-hooks run in registration order, after-hooks in
  reverse order. A hook may return a :class:`Jump` to send the loop to ``model`` (ask the model
  again), ``tools`` (run the code it already has) or ``end`` (finish the run with a reason).
* Hooks see the run's state (``ctx.variables`` as plain JSON, ``ctx.round``, ``ctx.last_outcome``)
  and may change it: a :class:`HookResult` with ``update={...}`` (and ``remove=[...]``) sets
  variables before the next model call; the change is recorded with the next round (``edits``),
  so replay runs that round from the same variables.
* A hook may also add tools for the rest of the run: ``HookResult(inject_tools=[...])`` with toolkits
  as the agent takes them (a ``@toolkit`` class or instance, a ``DynamicToolkit``). From the next model
  call they are in the prompt (codeact's stubs, react's tool schemas) and callable from the model's code;
  the injection is recorded with the next round (``edits["tools"]``), so replay gives that round's code
  the same toolkits.
* Interceptors wrap a call: ``await interceptor.intercept_model(request, call_next)`` (or
  ``intercept_tool``). The first registered interceptor is the outermost, so it sees the request first
  and the response last.
* Hooks and interceptors have a name (their ``name`` attribute, else their class name: :func:`hook_name`)
  that errors and trace spans use: the model and tool call spans list the interceptors they went
  through (``codeact.interceptors``), and an exception an interceptor raises itself (not one that came
  from ``call_next``) names it (``codeact.interceptor.failed`` on the span; see :func:`chain`, the one guard
  ``engine/interceptors.py`` keeps for model and tool interceptors alike).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from codeact.engine.agent._input import RunConfig
from codeact.engine.calls import ToolCall
from codeact.engine.interceptors import chain
from codeact.engine.interceptors import interceptor_name as hook_name

__all__ = [
    "Hook",
    "HookContext",
    "HookResult",
    "Jump",
    "ModelCall",
    "ModelInterceptor",
    "ToolCall",
    "ToolInterceptor",
    "chain",
    "hook_name",
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
class HookResult:
    """Returned by a hook to change the run's variables (and, optionally, where the loop goes next).

    Attributes:
        jump: As a returned :class:`Jump`, or None.
        update: Variables to set (JSON values, or anything the codec keeps), applied before the next
            model call; the round's code sees them.
        remove: Variables to delete.
        inject_tools: Toolkits to add for the rest of the run (``@toolkit`` classes or instances,
            ``DynamicToolkit`` objects), all their operations granted; in the prompt from the next
            model call on. A plain function is refused: make it an ``@operation`` of a ``@toolkit`` class.
    """

    jump: Jump | None = None
    update: Mapping[str, Any] = field(default_factory=dict)
    remove: Sequence[str] = ()
    inject_tools: Sequence[object] = ()


@dataclass(frozen=True, kw_only=True)
class HookContext:
    """What a hook sees: the run, the round, its state, and (for model hooks) the purpose and reply.

    ``variables`` are the run's variables as plain JSON; ``last_outcome`` is the last round's
    ``{"round", "status", "error", "stdout"}`` (None before the first round); ``state`` holds the same
    three (``variables``, ``round``, ``last_outcome``) as one dict. ``config`` is the run's
    :class:`~codeact.engine.agent.RunConfig` as the run uses it (seed 002's ``RunnableConfig``): its
    ``thread_id`` is the run's session, ``user`` who it runs for, ``tags`` and ``metadata`` as the caller
    gave them.
    """

    run_id: str
    session_id: str
    agent_id: str
    round: int
    input: str
    purpose: str | None = None
    reply: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    last_outcome: dict[str, Any] | None = None
    config: RunConfig = field(default_factory=RunConfig)


HookReturn = Jump | HookResult | None


class Hook:
    """Base class: override the points you need; each may return a :class:`Jump`, a :class:`HookResult` or None.

    ``name`` labels the hook in traces and errors (default: the class name).
    """

    name: str = "hook"

    async def before_agent(self, ctx: HookContext) -> HookReturn:
        """Before the first round of a run."""
        return None

    async def after_agent(self, ctx: HookContext) -> HookReturn:
        """After the run ended (a jump here is ignored but for ``end``'s reason)."""
        return None

    async def before_model(self, ctx: HookContext) -> HookReturn:
        """Before each model call."""
        return None

    async def after_model(self, ctx: HookContext) -> HookReturn:
        """After each model call (``ctx.reply`` holds the reply)."""
        return None


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """A model request as interceptors see it (they may return a changed copy)."""

    purpose: str
    messages: tuple[dict[str, str], ...] = ()
    prompt: str | None = None
    stop: tuple[str, ...] = ()


@runtime_checkable
class ModelInterceptor(Protocol):
    """Wraps model calls; call ``call_next(request)`` to go on (or return a reply without calling).

    An optional ``name`` attribute labels it in trace spans and errors (default: the class name).
    """

    async def intercept_model(self, request: ModelCall, call_next: Callable[[ModelCall], Awaitable[Any]]) -> Any:
        """Handle one model call."""
        ...


@runtime_checkable
class ToolInterceptor(Protocol):
    """Wraps toolkit calls from sandbox code; raise to refuse, or return a result without calling.

    An optional ``name`` attribute labels it in trace spans and errors (default: the class name).
    """

    async def intercept_tool(self, request: ToolCall, call_next: Callable[[ToolCall], Awaitable[Any]]) -> Any:
        """Handle one tool call."""
        ...
