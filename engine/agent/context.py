"""One run in three parts, and the two that act for it: what every step of a run reads and updates.

A :class:`RunContext` is made when ``Agent.run`` is called (``_run.start_run``) and passed down: the run's
pipeline (``_run.py``) opens the session into it, the loops (``codeact.py``, ``react.py``) drive rounds over
it. It is made of

* :class:`RunDeps` (``run.deps``, ``_parts.py``), frozen: the wiring (spec, model, store, hooks, interceptors) and the
  caller's input; the trace, memory and toolkit bridge the run opens are bound into it once, when opened;
* :class:`RunState` (``run.state``, ``_parts.py``), mutable: the round, the history and variables, the hooks' edits;
* :class:`~codeact.engine.agent.recovery.Recorder` (``run.recorder``, ``recovery.py``): the round records
  and the call journal (the run's store writes);
* :class:`Emitter` (``run.emitter``): the run's events, stamped in order and queued for ``Agent.run``;
* :class:`ModelCaller` (``run.caller``): the one model call, with hooks, interceptors and streaming.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.agent._parts import RunDeps, RunState
from codeact.engine.agent.hooks import HookContext, HookResult, Jump, ModelCall, chain, hook_name
from codeact.engine.agent.recovery import Recorder
from codeact.engine.errors import CodeactError, ErrorInfo, HookError
from codeact.engine.events import Emitter, MessageCompleted, MessageDelta, SegmentCreated
from codeact.engine.model import ModelReply
from codeact.prompts.jsontypes import JsonObject
from codeact.segments import Prompt, Segment, exec_chain

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec

__all__ = ["Emitter", "EndRun", "ModelCaller", "Outcome", "Recorder", "RunContext", "RunDeps", "RunState", "usage_of"]

_MAX_MODEL_RETRIES_BY_HOOK = 3


class EndRun(Exception):  # noqa: N818 - a control-flow signal inside the engine, never surfaced
    """A hook ended the run (``Jump(to="end")``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a loop ended.

    Attributes:
        status: ``completed`` (an answer), ``paused`` (waiting for the user) or ``failed``.
        reason: ``finished``, ``self_check``, ``ask_user``, ``max_turns``, ``stuck``, ``hook``, ``answered``.
        answer: The final answer (JSON-able), if any.
        error: Why, when failed (``run.failed``'s ``{"code", "message"}``).
    """

    status: Literal["completed", "paused", "failed"]
    reason: str
    answer: object = None
    error: ErrorInfo | None = None


class ModelCaller:
    """The run's model call with its hooks, interceptors and ``message.delta`` streaming, and the hooks' points.

    Hooks see the run through :meth:`hook_context`; their variable edits and injected toolkits are applied
    to the run's state here (and recorded with the next round).
    """

    def __init__(self, run: RunContext) -> None:
        self._run = run
        deps = run.deps  # the run's config, session and user never change after the run starts
        self._hook_config = dataclasses.replace(deps.config, thread_id=deps.session_id, user=deps.user)

    def hook_context(self, *, purpose: str | None = None, reply: str | None = None) -> HookContext:
        """The view hooks get of this run (its variables as plain JSON, the round, the last outcome)."""
        from codeact.sandbox.runtime.codec import plain

        deps, state = self._run.deps, self._run.state
        variables = {name: plain(value) for name, value in state.variables.items()}
        last = dict(state.last_outcome) if state.last_outcome is not None else None
        return HookContext(
            run_id=deps.run_id,
            session_id=deps.session_id,
            agent_id=deps.spec.id,
            round=state.round,
            input=deps.input,
            purpose=purpose,
            reply=reply,
            state={"variables": variables, "round": state.round, "last_outcome": last},
            variables=variables,
            last_outcome=last,
            config=self._hook_config,
        )

    async def before_agent(self) -> None:
        """Run the before-agent hooks (``end`` stops the run before its first round)."""
        jump = await self._run_hooks("before_agent", self.hook_context())
        if jump is not None and jump.to == "end":
            raise EndRun(jump.reason or "ended by a before_agent hook")

    async def after_agent(self) -> None:
        """Run the after-agent hooks, in reverse order."""
        await self._run_hooks("after_agent", self.hook_context(), reverse=True)

    async def call_model(
        self,
        purpose: str,
        *,
        prompt: Prompt | Callable[[], Prompt] | None = None,
        messages: Sequence[dict[str, Any]] = (),
        tools: list[dict[str, object]] | Callable[[], list[dict[str, object]] | None] | None = None,
    ) -> ModelReply:
        """Call the model for ``purpose`` with hooks, interceptors and ``message.delta`` streaming.

        ``prompt`` and ``tools`` may be functions: they are called after the ``before_model`` hooks, so
        the prompt shows what the hooks changed (variables they set, toolkits they injected).

        Raises:
            EndRun: a hook jumped to ``end``.
            ModelError: the model call failed after retries.
        """
        for _ in range(_MAX_MODEL_RETRIES_BY_HOOK):
            jump = await self._run_hooks("before_model", self.hook_context(purpose=purpose))
            if jump is not None and jump.to == "end":
                raise EndRun(jump.reason or "ended by a before_model hook")
            request = _request(purpose, prompt() if callable(prompt) else prompt, messages)
            reply = await self._intercepted(request, tools() if callable(tools) else tools)
            self._run.emit(
                MessageCompleted,
                text=reply.text,
                purpose=purpose,
                round=self._run.state.round,
                model=reply.model,
                usage=dict(reply.usage),
            )
            jump = await self._run_hooks(
                "after_model", self.hook_context(purpose=purpose, reply=reply.text), reverse=True
            )
            if jump is None or jump.to == "tools":
                return reply
            if jump.to == "end":
                raise EndRun(jump.reason or "ended by an after_model hook")
            # jump.to == "model": ask again
        return reply

    def apply_tools(self) -> bool:
        """Put the injected toolkits in force (the loop calls it before it builds a prompt); True when they changed."""
        state = self._run.state
        if state.tools_in_force == state.injected:
            return False
        state.tools_in_force = dict(state.injected)
        return True

    async def _run_hooks(self, method: str, ctx: HookContext, *, reverse: bool = False) -> Jump | None:
        hooks = self._run.deps.hooks
        for hook in list(reversed(hooks)) if reverse else list(hooks):
            returned = await getattr(hook, method)(ctx)
            if isinstance(returned, HookResult):
                self._apply_hook_edit(hook_name(hook), method, returned)
                self._inject_tools(hook_name(hook), method, returned.inject_tools)
                returned = returned.jump
            if returned is not None:
                return returned  # type: ignore[no-any-return]
        return None

    def _apply_hook_edit(self, name: str, method: str, result: HookResult) -> None:
        """Set/remove the variables a hook returned; kept for the next round's record (``edits``)."""
        from codeact.sandbox.runtime.codec import Unencodable, encode

        if not result.update and not result.remove:
            return
        state = self._run.state
        encoded: JsonObject = {}
        for key, value in result.update.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise HookError(
                    f"hook {name!r} ({method}): variable name {key!r} is not an identifier",
                    code="hook.update",
                    name=name,
                    point=method,
                )
            try:
                encoded[key] = encode(value)
            except Unencodable as exc:
                raise HookError(
                    f"hook {name!r} ({method}): variable {key!r} cannot be kept: {exc}",
                    code="hook.update",
                    name=name,
                    point=method,
                ) from exc
        removed = [k for k in result.remove if k in state.variables and k not in encoded]
        variables = {k: v for k, v in state.variables.items() if k not in removed}
        variables.update(encoded)
        state.variables = variables
        edits = self._edits_by(name, method)
        edits["set"] = {k: v for k, v in edits["set"].items() if k not in removed}
        edits["set"].update(encoded)
        edits["removed"] = sorted({*edits["removed"], *removed} - set(encoded))

    def _edits_by(self, name: str, method: str) -> dict[str, Any]:
        """The pending edits, now also by ``name.method``."""
        state = self._run.state
        edits = state.pending_edits or {"set": {}, "removed": [], "by": []}
        edits["by"] = [*edits["by"], f"{name}.{method}"]
        state.pending_edits = edits
        return edits

    def _inject_tools(self, name: str, method: str, tools: Sequence[object]) -> None:
        """Add the toolkits a hook injected to the run's bridge (in force from the loop's next model call).

        Raises:
            HookError: ``hook.inject``: an item is not a toolkit, or its name is taken in this run.
        """
        from codeact.toolkits import ToolkitDefinitionError
        from codeact.toolkits.errors import DuplicateToolkitError

        bridge = self._run.deps.bridge
        if not tools or bridge is None:
            return
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            tools = [tools]
        injected = self._run.state.injected
        for item in tools:
            try:
                bound = bridge.add_toolkit(item)
            except ToolkitDefinitionError as exc:
                message = _not_a_tool(name, method, item, exc.message)
                raise HookError(message, code="hook.inject", name=name, point=method) from exc
            except DuplicateToolkitError as exc:
                raise HookError(
                    f"hook {name!r} ({method}) injected a toolkit: {exc.message}",
                    code="hook.inject",
                    name=name,
                    point=method,
                ) from exc
            if bound.name not in injected:
                injected[bound.name] = bridge.manifest()["toolkits"][bound.name]
                self._edits_by(name, method)

    async def _intercepted(self, request: ModelCall, tools: list[dict[str, Any]] | None) -> ModelReply:
        """The model call through the interceptors, in one span naming them (and the one that failed, if any)."""
        failed: list[str] = []

        def named(name: str, exc: Exception) -> BaseException:
            failed.append(name)
            if isinstance(exc, CodeactError):
                return exc  # an engine error it raised on purpose (a ModelError, ...) keeps its code
            return HookError(
                f"model interceptor {name!r} raised {type(exc).__name__}: {exc}; fix it, or leave it out of the "
                "agent's interceptors",
                code="interceptor.failed",
                name=name,
                point="intercept_model",
            )

        deps = self._run.deps
        protocol = "completion" if request.prompt is not None else "chat"
        names = tuple(hook_name(i) for i in deps.interceptors if hasattr(i, "intercept_model"))
        model = _model_name(deps.spec, request.purpose)
        with deps.trace.model_call(request.purpose, model, protocol, interceptors=names) as span:
            try:
                reply: ModelReply = await chain(
                    deps.interceptors, "intercept_model", self._final(tools), on_error=named
                )(request)
            except Exception:
                if span is not None and failed:
                    span.interceptor_failed(failed[0])
                raise
            if span is not None:
                span.finish(reply)
            return reply

    def _final(self, tools: list[dict[str, object]] | None) -> Callable[[ModelCall], Awaitable[ModelReply]]:
        run = self._run

        async def _complete(request: ModelCall) -> ModelReply:
            # Every call streams when the run does, tool-calling ones too: the client assembles the
            # tool calls from their streamed fragments (the same ToolCall objects as unstreamed).
            on_delta = None
            if run.deps.stream:

                def on_delta(text: str) -> None:
                    run.emit(MessageDelta, text=text, purpose=request.purpose, round=run.state.round)

            reply: ModelReply = await run.deps.model.complete(
                purpose=request.purpose,
                messages=list(request.messages) if request.messages else None,
                prompt=request.prompt,
                stop=list(request.stop) or None,
                on_delta=on_delta,
                tools=tools,
            )
            return reply

        return _complete


class RunContext:
    """One run: its dependencies (frozen), its state, the recorder, the emitter and the model caller.

    The run's pipeline (``_run.py``) makes it and opens the session into it; the loops (``codeact.py``,
    ``react.py``) drive rounds over it.
    """

    def __init__(self, deps: RunDeps, state: RunState | None = None) -> None:
        self.deps = deps
        self.state = state if state is not None else RunState()
        self.emitter = Emitter(deps.run_id)
        self.emit = self.emitter.emit  # stamp the run's next event and queue it for the stream
        self.recorder = Recorder(self.state, lambda: self.deps)
        self.caller = ModelCaller(self)

    @property
    def session_id(self) -> str:
        """The run's session."""
        return self.deps.session_id

    def add_segment(self, kind: str, content: str, *, tags: tuple[str, ...] = ()) -> Segment:
        """Add a segment to the history at the current round, keep it for the round's record, emit it."""
        state = self.state
        segment = state.history.add(
            kind,
            content,
            round_index=state.round,
            tags=tags,
            **exec_chain(self.session_id, state.round, state.recorded),
        )
        self.recorder.pending_segments.append(segment)
        self.emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=state.round)
        return segment

    def check_stopping(self) -> None:
        """Raise :class:`asyncio.CancelledError` if the run was cancelled (even if the cancel was swallowed)."""
        if self.state.stopping:
            raise asyncio.CancelledError


def _request(purpose: str, prompt: Prompt | None, messages: Sequence[dict[str, Any]]) -> ModelCall:
    if prompt is None:
        return ModelCall(purpose=purpose, messages=tuple(dict(m) for m in messages))
    if prompt.protocol == "completion" and prompt.text is not None:
        return ModelCall(purpose=purpose, prompt=prompt.text, stop=prompt.stop)
    return ModelCall(purpose=purpose, messages=tuple(dict(m) for m in prompt.messages), stop=prompt.stop)


def _model_name(spec: AgentSpec, purpose: str) -> str:
    route = spec.routes.get(purpose, spec.model)  # type: ignore[call-overload]
    return str(getattr(route, "model", "") or "")


def _not_a_tool(name: str, method: str, item: object, reason: str) -> str:
    """Why a hook's injected ``item`` is not a tool, and how to make it one."""
    import inspect

    where = f"hook {name!r} ({method})"
    if inspect.isroutine(item) or (callable(item) and not isinstance(item, type)):
        what = getattr(item, "__qualname__", None) or type(item).__qualname__
        return (
            f"{where} injected the function {what!r}, which is not a tool: tools are injected as toolkits, as the "
            "agent takes them; make it an @operation method of a @toolkit(name=...) class and inject the class "
            "(or an instance)"
        )
    return f"{where} injected something that is not a tool: {reason}"


def usage_of(reply: ModelReply) -> dict[str, Any]:
    """A model reply's usage as a round record keeps it: the token counts, and ``cost_usd`` when priced."""
    usage: dict[str, object] = dict(reply.usage)
    if reply.cost_usd is not None:
        usage["cost_usd"] = reply.cost_usd
    return usage


def prompt_hash(prompt: Prompt) -> str:
    """sha256 of what was sent (the raw text, or the messages)."""
    body = prompt.text if prompt.text is not None else "\x1e".join(m["content"] for m in prompt.messages)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
