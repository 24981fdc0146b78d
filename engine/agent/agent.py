"""``Agent``: the facade over build -> run (ARCHITECTURE.md section 7).

An agent is built once (``__init__``: its parts, assembled in ``_wiring.py``; ``from_blueprint``: the
model routes, toolkits and store first, in ``_assemble.py``); each :meth:`Agent.run` hands a snapshot of
those parts and the input to ``_run.py``, which runs it top to bottom and streams its events back here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.agent._input import AgentInput, RunConfig, conversation
from codeact.engine.agent._lifecycle import Lifecycle
from codeact.engine.agent._results import RunResult, _result
from codeact.engine.agent._run import stream
from codeact.engine.agent._wiring import (
    SandboxFactory,
    Wiring,
    grants_for,
    knowledge_for,
    prompt_config_for,
    registry_for,
)
from codeact.engine.agent.hooks import Hook, ModelInterceptor, ToolInterceptor
from codeact.engine.agent.output import output_schema_for
from codeact.engine.agent.sandboxes import default_sandbox_factory
from codeact.engine.agent.support import Approver
from codeact.engine.errors import CodeactError
from codeact.engine.events import Event, RunStarted
from codeact.engine.model.client import stop_background_tasks
from codeact.sandbox.runtime.codec import plain
from codeact.toolkits import ToolkitRegistry

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec, Blueprint, SubagentSpec
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store

__all__ = ["KEEP", "Agent", "RunResult", "SandboxFactory", "default_sandbox_factory", "grants_for"]


class _Keep:
    """The type of :data:`KEEP`: "this agent's own" in :meth:`Agent.derive` (where None is a value)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()
"""Keep this agent's value (:meth:`Agent.derive`)."""


class Agent(Lifecycle):
    """A CodeAct (or ReAct) agent: the Python API of codeact.

    Build one from a blueprint file with :meth:`from_blueprint` (the usual way), or from an
    ``AgentSpec`` and the host's parts with the constructor. Then::

        async with Agent.from_blueprint("agent.yaml", toolkits=[DevOps()]) as agent:
            async for event in agent.run("Deploy the API"):   # events, as they happen
                ...
            result = await agent.invoke("And the web app?")   # or just the end

        with Agent.from_blueprint("agent.yaml", toolkits=[DevOps]) as agent:
            result = agent.run_sync("Deploy the API")          # as often as you like

    Args:
        spec: What the factory resolved from the blueprint.
        model: The model client (routes ``code``/``thought``/``utility``).
        store: Where sessions are recorded (SQLite or Redis).
        registry: The toolkits the blueprint's grants resolve against (``system`` is added when
            it is missing; the registry passed in is not changed).
        sandbox_factory: Builds the sandbox of a run from the bridge handler and the spec.
        approver: Asked when a call needs approval; None denies such calls with a reason.
        hooks: Before/after agent and model hooks.
        interceptors: Model and tool interceptors (first registered is outermost).
        stream: Stream model replies as ``message.delta`` events.
        user: Who the agent acts for (passed to toolkits in their context).
        output_type: What the final answer must be: a JSON Schema dict or a pydantic model class (the
            answer is then that model's instance); default the blueprint's ``outputSchema``, if any. An
            answer that does not match is sent back to the model once, then the run fails with
            ``output.invalid`` (docs/python-api.md, "Structured output").

    Raises:
        CodeactError: ``output.schema.invalid`` when ``output_type`` (or ``outputSchema``) is not a schema.
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        model: ModelClient,
        store: Store,
        registry: ToolkitRegistry | None = None,
        sandbox_factory: SandboxFactory | None = None,
        approver: Approver | None = None,
        hooks: Sequence[Hook] = (),
        interceptors: Sequence[ModelInterceptor | ToolInterceptor] = (),
        stream: bool = True,
        user: str | None = None,
        output_type: object = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.store = store
        # Resources the agent opened itself (from_blueprint), closed by aclose(), and the one loop
        # run_sync() runs every call on: connections a store or model client opened on it
        # (redis.asyncio binds them to their loop) stay usable from one call to the next.
        self._init_lifecycle()
        self.sandbox_factory = sandbox_factory or default_sandbox_factory()
        self.approver = approver
        self.hooks = tuple(hooks)
        self.interceptors = tuple(interceptors)
        self.stream = stream
        self.user = user
        # The parts every run is wired from (engine/agent/_wiring.py), assembled once.
        self.grants, self.policies = grants_for(spec)
        registry = registry if registry is not None else ToolkitRegistry.from_entry_points()
        self.registry = registry_for(registry, spec, self.grants, self._subagent)
        self.prompt_config = prompt_config_for(spec)
        self.knowledge = knowledge_for(spec)
        self.output_type = output_type
        self.output = output_schema_for(output_type, spec.blueprint.output_schema if spec.blueprint else None)

    # -- public API ----------------------------------------------------------------------------
    @classmethod
    def from_blueprint(
        cls,
        blueprint: str | os.PathLike[str] | Blueprint,
        *,
        toolkits: Iterable[object] | ToolkitRegistry | None = (),
        model: str | None = None,
        provider: str | None = None,
        base_url: str | None = None,
        profile: str | None = None,
        protocol: Literal["chat", "completion"] | None = None,
        store: str | Store | None = None,
        sandbox: Literal["subprocess", "docker"] | None = None,
        isolation: Literal["bwrap", "process"] = "bwrap",
        allow_sandbox_declaration: bool = False,
        max_round_seconds: float | None = None,
        approver: Approver | None = None,
        hooks: Sequence[Hook] = (),
        interceptors: Sequence[ModelInterceptor | ToolInterceptor] = (),
        stream: bool = True,
        user: str | None = None,
        strict: bool = False,
        output_type: object = None,
    ) -> Agent:
        """Build an agent from a blueprint file, the way ``codeact run`` does.

        The model, store and toolkits are each given once; the agent owns the model client and
        the store it opens and closes them in :meth:`aclose` (``async with``) or :meth:`close`
        (``with``). A :class:`~codeact.engine.store.Store` object passed as ``store`` stays open.

        Args:
            blueprint: Path of the blueprint YAML (``codeact.agent/v1``, ``ai4j.agent/v1`` or a
                kimi-cli agent file), or a loaded ``Blueprint``.
            toolkits: Your toolkits: ``@toolkit`` classes (instantiated with no arguments) or
                instances, ``DynamicToolkit`` objects, or ``MODULE:OBJECT`` strings. The installed
                ones (``system``, entry points) are always there; a ``ToolkitRegistry`` is used as is.
            model: A litellm model (``openai/gpt-4.1-mini``); default: the blueprint's, a profile
                or ``$CODEACT_MODEL``.
            provider: The model provider (``openai-compatible``, ...).
            base_url: Base URL of an OpenAI-compatible model server.
            profile: A profile of ``profiles.yaml`` (see docs/profiles.md).
            protocol: ``chat`` or ``completion`` (raw FIM to ``/v1/completions``).
            store: ``sqlite:///PATH``, ``redis://HOST:PORT/DB`` or a ``Store``; default
                ``$CODEACT_STORE`` or ``~/.codeact/sessions.db``.
            sandbox: ``subprocess`` or ``docker``; default: the blueprint's ``sandbox.backend``.
            isolation: ``bwrap`` (default) or ``process`` (weaker) for the subprocess sandbox.
            allow_sandbox_declaration: Accept the blueprint's ``sandbox`` block.
            max_round_seconds: The most seconds of code per round the blueprint may ask for
                (default 600); a blueprint asking more is refused.
            approver: Asked when a call needs approval; None denies such calls with a reason.
            hooks: Before/after agent and model hooks.
            interceptors: Model and tool interceptors.
            stream: Stream model replies as ``message.delta`` events.
            user: Who the agent acts for (passed to toolkits in their context).
            strict: Refuse a blueprint the validator warns about (``blueprint.validation.strict``);
                without it the warnings are printed on stderr, one line each.
            output_type: What the final answer must be (a JSON Schema dict or a pydantic model class);
                default the blueprint's ``outputSchema``.

        Raises:
            BlueprintLoadError: The file cannot be read or parsed.
            BlueprintFactoryError: The blueprint is invalid for this host (its report is attached).
            ModelError: No model could be chosen, or a profile is missing.
            ToolkitError: A toolkit is not a toolkit or cannot be loaded.
            StoreError: The store URL is invalid.
        """
        from codeact.engine.agent._assemble import BuildOptions, assemble

        options = BuildOptions(
            model=model,
            provider=provider,
            base_url=base_url,
            profile=profile,
            protocol=protocol,
            store=store,
            sandbox=sandbox,
            isolation=isolation,
            allow_sandbox_declaration=allow_sandbox_declaration,
            max_round_seconds=max_round_seconds,
            strict=strict,
            approver=approver,
            hooks=hooks,
            interceptors=interceptors,
            stream=stream,
            user=user,
            output_type=output_type,
        )
        return assemble(cls, blueprint, toolkits=toolkits, options=options)

    async def run(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Run the agent on ``input``; yields events, the last being ``run.completed`` or ``run.failed``.

        To stop early, iterate inside ``contextlib.aclosing(agent.run(...))``: closing the iterator
        cancels the run: the round in progress is recorded as ``interrupted`` with the toolkit calls it
        completed, and the session's status becomes ``interrupted``. An iterator that is merely dropped
        is only closed when the garbage collector finalizes it, and the run goes on until then.

        Args:
            input: The task: a string, a message ``{"role": "user", "content": ...}`` or a list of
                messages (the last user message is the task, the others history the model sees).
            session_id: Continue this session (history and variables restored), or start it
                (default: a new session for every call).
            user: Who this run is for (memory scope, toolkit context); default the agent's ``user``.
            config: The run's thread id (the session), tags, metadata and user
                (:class:`~codeact.engine.agent.RunConfig`); tags and metadata go into ``run.started``,
                the session record and the run's span.
            context: Where the user is (page, URL, environment...): JSON values by name, shown to
                the model as the run's Context segment (one ``key: value`` line each, cut at 4,000
                characters with a note saying so) and recorded with the session.

        Raises:
            CodeactError: ``input.invalid``, ``input.file_name``, ``input.image_url``, ``input.too_large``,
                ``input.files_unsupported``, ``config.invalid`` or ``context.invalid`` (before any event).
        """
        wiring = self._wiring()
        run = stream(wiring, input, session_id=session_id, user=user, config=config, context=context)
        async with contextlib.aclosing(run) as events:
            async for event in events:
                yield event

    def _wiring(self) -> Wiring:
        """The parts a run is wired from: this agent's, as they are now."""
        return Wiring(
            spec=self.spec,
            model=self.model,
            store=self.store,
            registry=self.registry,
            grants=self.grants,
            policies=self.policies,
            sandbox_factory=self.sandbox_factory,
            approver=self.approver,
            hooks=self.hooks,
            interceptors=self.interceptors,
            stream=self.streams_deltas,
            user=self.user,
            prompt_config=self.prompt_config,
            knowledge=self.knowledge,
            output=self.output,
        )

    @property
    def streams_deltas(self) -> bool:
        """Whether this agent's runs emit ``message.delta`` events (a runner manifest's ``streaming``).

        It is the switch a run's model calls obey (``RunContext.stream``): both loops make every model
        call through ``RunContext.call_model``, which streams it (react's tool-calling turns too, their
        tool calls assembled from the stream), so it is the ``stream`` option. A sub-agent does not stream.
        """
        return self.stream

    def _subagent(self, sub: SubagentSpec) -> Agent:
        """A sub-agent of this agent: its own spec, this agent's model, store, toolkits and approver (no streaming)."""
        return self.derive(spec=sub.spec, stream=False, output_type=None)

    def derive(
        self,
        *,
        spec: AgentSpec | None = None,
        model: ModelClient | None = None,
        registry: ToolkitRegistry | None = None,
        approver: Approver | None | _Keep = KEEP,
        stream: bool | None = None,
        user: str | None | _Keep = KEEP,
        output_type: object | _Keep = KEEP,
        grants: Iterable[str] = (),
    ) -> Agent:
        """An agent of this one's parts with some replaced (a sub-agent, a run with its own toolkits or model).

        What is not given is this agent's (``KEEP``); ``grants`` names toolkits of ``registry`` the new agent
        is granted whole (a run's ``attachments``). It owns nothing: this agent's resources stay this agent's.
        """
        derived = Agent(
            spec if spec is not None else self.spec,
            model=model if model is not None else self.model,
            store=self.store,
            registry=registry if registry is not None else self.registry,
            sandbox_factory=self.sandbox_factory,
            approver=self.approver if isinstance(approver, _Keep) else approver,
            hooks=self.hooks,
            interceptors=self.interceptors,
            stream=self.stream if stream is None else stream,
            user=self.user if isinstance(user, _Keep) else user,
            output_type=self.output_type if isinstance(output_type, _Keep) else output_type,
        )
        for name in grants:
            derived.grants[name] = "*"
        return derived

    async def invoke(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end and return the result (``on_event`` sees every event).

        Without ``session_id`` every call starts a new session; pass the ``session_id`` of a result
        to continue it (its history and variables).
        """
        last: Event | None = None
        session = session_id or ""
        metadata: dict[str, Any] = {}
        async for event in self.run(input, session_id=session_id, user=user, config=config, context=context):
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunStarted):
                session, metadata = event.session_id, dict(event.metadata)
            last = event
        result = _result(last, session, metadata=metadata)
        with contextlib.suppress(CodeactError):  # the store went away: the result without the state
            variables = await self.state(session) if session else {}
            segments = await self.store.segments(session) if session else []
            answer = result.answer if result.status != "failed" else None
            result = dataclasses.replace(result, variables=variables, messages=conversation(segments, answer))
        if self.output is not None and result.status == "completed" and result.reason != "hook":
            result = dataclasses.replace(result, answer=self.output.instance(result.answer))
        return result

    async def state(self, session_id: str) -> dict[str, Any]:
        """The session's variables, decoded to plain JSON (an unknown session has none)."""
        return {name: plain(value) for name, value in (await self.store.variables(session_id)).items()}

    async def update_state(
        self, session_id: str, *, variables: Mapping[str, Any] | None = None, remove: Iterable[str] = ()
    ) -> dict[str, Any]:
        """Set (and remove) variables of a session between runs; the next run's code sees them.

        The change is recorded as a round of its own (status ``host_edit``, no code), so the
        session's record says who changed what and replay starts the next round from the same
        variables. Returns the session's variables after the change (plain JSON).

        Raises:
            CodeactError: ``state.unknown_session``, ``state.value`` (a value the codec cannot keep),
                or the store's busy error while a run holds the session.
        """
        import time

        from codeact.engine.store import RoundRecord
        from codeact.sandbox.runtime.codec import Unencodable, encode

        meta = await self.store.get_session(session_id)
        if meta is None:
            raise CodeactError(
                f"no session {session_id!r} in the store: run the agent first", code="state.unknown_session"
            )
        changes: dict[str, Any] = {}
        for name, value in (variables or {}).items():
            if not str(name).isidentifier():
                raise CodeactError(f"variable name {name!r} is not a Python identifier", code="state.value")
            try:
                changes[str(name)] = encode(value)
            except Unencodable as exc:
                raise CodeactError(f"variable {name!r} cannot be kept: {exc}", code="state.value") from exc
        removed = [str(n) for n in remove]
        async with self.store.lock(session_id) as lock:
            current = await self.store.variables(session_id)
            after = {k: v for k, v in current.items() if k not in removed}
            after.update(changes)
            done = (await self.store.get_session(session_id) or meta).rounds
            edit = {"set": sorted(changes), "removed": sorted(n for n in removed if n in current)}
            record = RoundRecord(
                session_id=session_id,
                index=done + 1,
                started_at=time.time(),
                duration_s=0.0,
                prompt_hash="",
                reply="",
                status="host_edit",
                control={"kind": "host_edit", **edit},
                variables=after,
            )
            await self.store.append_round(record, segments=(), variables=after, fence=lock.token)
        return {name: plain(value) for name, value in after.items()}

    def run_sync(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end from synchronous code and return the result; call it as often as you like.

        Every call runs on the agent's own event loop (kept until :meth:`close`), so a store or
        model client that holds connections bound to a loop (Redis) works from one call to the
        next. Use :meth:`invoke` from async code.

        Raises:
            CodeactError: Called while an event loop is running (use ``await agent.invoke(...)``).
        """
        runner = self._sync_runner(
            "Agent.run_sync() was called inside a running event loop: use `await agent.invoke(...)` "
            "(or iterate `agent.run(...)`) in async code"
        )
        return runner.run(
            self._invoke_on_own_loop(
                input, session_id=session_id, on_event=on_event, user=user, config=config, context=context
            )
        )

    async def _invoke_on_own_loop(
        self,
        input: AgentInput,
        *,
        session_id: str | None,
        on_event: Callable[[Event], None] | None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        try:
            return await self.invoke(
                input, session_id=session_id, on_event=on_event, user=user, config=config, context=context
            )
        finally:
            # Nothing of the model client's stays pending on the loop between calls (or when it is dropped).
            await stop_background_tasks()
