"""What a flow is made of, shared by the flow, its run, its kinds and its builder: steps, results, loop modes.

A leaf of ``codeact.engine.flow`` (it imports nothing of the package but its errors): ``_base.py``
(``FlowAgent``), ``_run.py`` (one run), ``kinds.py`` and ``_build.py`` all build on it. A step's
agent is an :class:`~codeact.engine.agent.Agent` or a flow; a flow is recognised by :func:`is_flow` (its
``is_flow`` class attribute) and typed by the :class:`Flow` protocol, so this module never imports
``FlowAgent``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from codeact.engine.flow.errors import FlowError
from codeact.sandbox.runtime.codec import has_tags, python_repr

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from codeact.engine.agent import Agent, RunConfig
    from codeact.engine.events import Event
    from codeact.engine.store import Store

__all__ = [
    "LOOP_CAP",
    "Flow",
    "LoopMode",
    "Step",
    "StepResult",
    "as_step",
    "as_text",
    "child_session_id",
    "fill_placeholders",
    "is_flow",
]

LOOP_CAP = 1000
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SESSION_ID_MAX = 128


class Flow(Protocol):
    """What a step and a run need of a flow (``codeact.engine.flow.FlowAgent``)."""

    name: str
    description: str
    store: Store

    def leaves(self) -> list[Agent]:
        """Every codeact/react agent in the flow's tree."""
        ...

    def _stream(
        self,
        input: str,
        *,
        session_id: str,
        state: dict[str, object] | None,
        previous: object,
        link: dict[str, object] | None,
        export: dict[str, object] | None,
        config: RunConfig | None = None,
    ) -> AsyncGenerator[Event, None]: ...


def is_flow(agent: object) -> TypeIs[Flow]:
    """Whether a step's agent is a flow (``FlowAgent`` and its kinds set ``is_flow = True``)."""
    return getattr(type(agent), "is_flow", False) is True


@dataclass(frozen=True, kw_only=True)
class Step:
    """A sub-agent in a flow and how its result is kept (the seed's ``BaseAgent`` options).

    Attributes:
        agent: An :class:`~codeact.engine.agent.Agent` (codeact or react) or another flow.
        name: The step's name (default: the flow's name, or the agent blueprint's id).
        description: What the agent is good at (a routing flow picks agents by it).
        output_key: The flow state key its result is written under (default: its name); later
            agents' instructions refer to it as ``{key}``.
        include_contents: Pass the flow's earlier results on to this agent (default true);
            false gives it the flow's input only.
        return_reasoning_contents: Add all of this agent's messages to the flow's results
            (default false: only its final answer).
        when: In a conditional flow, when this step is the branch taken: a function of the flow's
            state (``{"input": ..., key: result, ...}``) returning a bool, or a condition in the
            blueprints' expression language (``codeact.engine.blueprint.conditions``). None: always
            (the default branch, last).
    """

    agent: Agent | Flow
    name: str | None = None
    description: str | None = None
    output_key: str | None = None
    include_contents: bool = True
    return_reasoning_contents: bool = False
    when: Callable[[Mapping[str, object]], bool] | str | None = None

    @property
    def label(self) -> str:
        """The step's name."""
        if self.name:
            return self.name
        if is_flow(self.agent):
            return self.agent.name
        return self.agent.spec.id

    @property
    def key(self) -> str:
        """The state key of its result."""
        return self.output_key or self.label

    @property
    def about(self) -> str:
        """Its description (the step's, else the agent's)."""
        if self.description:
            return self.description
        if is_flow(self.agent):
            return self.agent.description
        return self.agent.spec.name or ""


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """How one step (a sub-agent run) ended.

    Attributes:
        agent: The step's name.
        position: Where in the flow (``1``, ``branch 2``, ``iteration 3``, ``route 1``).
        session_id: The step's session.
        run_id: The step's run.
        status: ``completed``, ``paused`` or ``failed``.
        answer: The sub-agent's answer.
        messages: Its messages (model replies and the answer), oldest first.
        error: ``{"code", "message"}`` when failed.
        started_at: Unix time the step started.
        ended_at: Unix time it ended.
    """

    agent: str
    position: str
    session_id: str
    run_id: str
    status: str
    answer: object = None
    messages: tuple[str, ...] = ()
    error: dict[str, object] | None = None
    started_at: float = 0.0
    ended_at: float = 0.0


class _EndFlow(Exception):  # noqa: N818 - a control-flow signal, never surfaced
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _PauseFlow(Exception):  # noqa: N818 - a control-flow signal: the flow pauses before a step (interruptBefore)
    def __init__(self, index: int, agent: str) -> None:
        super().__init__(agent)
        self.index = index
        self.agent = agent


def as_text(value: object) -> str:
    """A result as text: a string as it is, plain data as JSON, a value JSON cannot hold as Python shows it.

    A step's answer is codec data: a tuple is ``('A', 4)`` for the next step's model, never the codec's tag.
    """
    if isinstance(value, str):
        return value
    return python_repr(value) if has_tags(value) else json.dumps(value, ensure_ascii=False, default=str)


def child_session_id(parent: str, number: int, name: str) -> str:
    """``<parent>.<n>.<name>``, or a hashed form when that exceeds the store's 128 characters."""
    ident = re.sub(r"[^A-Za-z0-9_-]", "_", name) or "agent"
    candidate = f"{parent}.{number}.{ident}"
    if len(candidate) <= _SESSION_ID_MAX:
        return candidate
    digest = hashlib.sha256(candidate.encode()).hexdigest()[:16]
    return f"{parent[: _SESSION_ID_MAX - len(ident) - 40]}.{digest}.{number}.{ident}"[:_SESSION_ID_MAX]


def fill_placeholders(text: str | None, state: Mapping[str, object]) -> str | None:
    """``{key}`` in ``text`` replaced by ``state[key]`` (as text); unknown keys are left as written."""
    if not text:
        return text
    return _PLACEHOLDER.sub(lambda m: as_text(state[m.group(1)]) if m.group(1) in state else m.group(0), text)


def _with_state(agent: Agent, state: Mapping[str, object]) -> Agent:
    """``agent``, or a copy whose instructions have the flow's ``{key}`` placeholders filled in."""
    from codeact.engine.agent import Agent as _Agent
    from codeact.engine.blueprint import RenderedInstructions

    ins = agent.spec.instructions
    system, developer = fill_placeholders(ins.system, state), fill_placeholders(ins.developer, state)
    if (system, developer) == (ins.system, ins.developer):
        return agent
    spec = replace(agent.spec, instructions=RenderedInstructions(system=system, developer=developer))
    return _Agent(
        spec,
        model=agent.model,
        store=agent.store,
        registry=agent.registry,
        sandbox_factory=agent.sandbox_factory,
        approver=agent.approver,
        hooks=agent.hooks,
        interceptors=agent.interceptors,
        stream=agent.stream,
        user=agent.user,
        output_type=agent.output_type,
    )


def as_step(item: object, flow: str) -> Step:
    """A flow's ``agents[]`` item as a :class:`Step` (an Agent or a flow is wrapped with the defaults)."""
    from codeact.engine.agent import Agent

    if isinstance(item, Step):
        if not (isinstance(item.agent, Agent) or is_flow(item.agent)):
            raise FlowError(
                f"flow {flow!r}: Step.agent must be an Agent or a flow agent, got {type(item.agent).__name__}",
                code="flow.agent.invalid",
            )
        return item
    if isinstance(item, Agent) or is_flow(item):
        return Step(agent=item)
    raise FlowError(
        f"flow {flow!r}: agents[] items must be Agent, flow agents (SequentialAgent, ...) or Step(...), "
        f"got {type(item).__name__}",
        code="flow.agent.invalid",
    )


@dataclass(frozen=True, kw_only=True)
class LoopMode:
    """How a :class:`LoopAgent` iterates: build one with :meth:`count`, :meth:`condition` or :meth:`array`.

    Attributes:
        kind: ``count``, ``condition`` or ``array``.
        times: ``count``'s number of iterations (capped at 1000).
        predicate: ``condition``'s test of an iteration's result; the loop stops when it is true.
        max_iterations: At most this many iterations (at most 1000).
    """

    kind: Literal["count", "condition", "array"]
    times: int = 0
    predicate: Callable[[object], bool] | None = None
    max_iterations: int = LOOP_CAP

    @classmethod
    def count(cls, n: int) -> LoopMode:
        """Run the agent ``n`` times (``n`` is capped at 1000)."""
        if not isinstance(n, int) or n < 1:
            raise FlowError(f"LoopMode.count(n) needs n >= 1, got {n!r}", code="flow.loop.count.invalid")
        return cls(kind="count", times=min(n, LOOP_CAP))

    @classmethod
    def condition(cls, predicate: Callable[[object], bool], *, max_iterations: int = LOOP_CAP) -> LoopMode:
        """Run the agent until ``predicate(result)`` is true, at most ``max_iterations`` (<= 1000) times."""
        if not callable(predicate):
            raise FlowError("LoopMode.condition(predicate) needs a function of the result", code="flow.loop.invalid")
        return cls(kind="condition", predicate=predicate, max_iterations=_capped(max_iterations))

    @classmethod
    def array(cls, *, max_iterations: int = LOOP_CAP) -> LoopMode:
        """Run the agent once per element of the previous result, parsed as a JSON array."""
        return cls(kind="array", max_iterations=_capped(max_iterations))


def _capped(value: int) -> int:
    if not isinstance(value, int) or not 1 <= value <= LOOP_CAP:
        raise FlowError(f"max_iterations must be between 1 and {LOOP_CAP}, got {value!r}", code="flow.loop.invalid")
    return value
