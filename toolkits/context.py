"""What a toolkit operation may receive from the host: the call context, model access, control signals."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, runtime_checkable

from codeact.toolkits.errors import ToolkitError
from codeact.toolkits.tasks import TaskBoard

__all__ = ["CALL_ID", "Control", "EventSink", "MemoryAccess", "ModelAccess", "Skill", "ToolkitContext"]

CALL_ID: ContextVar[str | None] = ContextVar("codeact_call_id", default=None)
"""The id of the toolkit call being served, set by the host around it (the engine's span wrapper, ``engine.calls``);
the bridge copies it into ``ToolkitContext.call_id``. Unset: the bridge makes one of its own."""


class Skill(TypedDict):
    """One granted toolkit as ``ToolkitContext.skills`` lists it."""

    description: str
    operations: Mapping[str, str]
    """``{operation: one-line summary}`` of the granted operations."""


@runtime_checkable
class ModelAccess(Protocol):
    """The agent's language models, as a toolkit sees them (the engine implements it).

    ``purpose`` selects the model: ``"utility"`` (cheap extraction, translation), ``"thought"``
    (deep thinking), or any purpose the blueprint names.
    """

    async def complete(self, prompt: str, *, purpose: str = "utility") -> str:
        """Return the model's reply to ``prompt``."""
        ...


@runtime_checkable
class MemoryAccess(Protocol):
    """The session's entity memory, as the ``system`` toolkit sees it (the engine implements it)."""

    async def remember(self, title: str, data: object) -> None:
        """Remember ``data`` under ``title`` for the rest of the session."""
        ...

    async def recall(self, title: str) -> object:
        """The data remembered under ``title`` (an error names the known titles when there is none)."""
        ...

    async def entities(self) -> list[dict[str, object]]:
        """``[{"title", "data", "updated"}]`` of the session, most recently written first."""
        ...


EventSink = Callable[[str, dict[str, object]], None]
"""``emit(kind, data)``: hands an event to the engine (for example ``"express"`` for a user message)."""


@dataclass(frozen=True, kw_only=True)
class ToolkitContext:
    """The context of one toolkit call; an operation receives it by annotating a parameter with it.

    The bridge fills ``deadline`` (``time.monotonic()`` seconds by which the call is cut off) and
    ``skills`` (the toolkits and operations granted to this session) for each call.

    Attributes:
        session_id: The session the calling sandbox belongs to.
        trace_id: Correlates logs across the engine, sandbox and tools.
        run_id: The agent run the call belongs to.
        user: Who the agent acts for (opaque to the bridge).
        model: The agent's model access, or ``None`` when the host has none.
        emit: Sends an event to the engine, or ``None``.
        deadline: ``time.monotonic()`` value when this call times out, or ``None``.
        skills: ``{toolkit: {"description": str, "operations": {op: summary}}}`` granted to the session.
        memory: The session's entity memory, or ``None`` when the blueprint enables no memory.
        tasks: The tasks the session launched (sub-agent runs): a toolkit that starts one records it here
            (``codeact.toolkits.tasks``), ``system.tasks()`` lists them; ``None`` when the host keeps none.
        call_id: The call's stable id, ``"{session}:{round}:{sequence}"``: the session, the round and the
            call's 0-based sequence in that round. A resumed round (the first round after an interrupted
            one) numbers its calls under the interrupted round's index again, so running the same program
            again gives each call the id it had before the crash. It is THE idempotency key of an operation
            with side effects (a deploy, a payment, an e-mail): remember what a key did, and when the same
            key comes with the same arguments, return that instead of doing it twice (docs/toolkits.md,
            "Idempotent operations"). Filled per call by the bridge; ``None`` outside a call.
    """

    session_id: str
    trace_id: str | None = None
    run_id: str | None = None
    user: str | None = None
    model: ModelAccess | None = None
    emit: EventSink | None = None
    deadline: float | None = None
    skills: Mapping[str, Skill] = field(default_factory=dict)
    memory: MemoryAccess | None = None
    call_id: str | None = None
    tasks: TaskBoard | None = None

    def with_deadline(self, deadline: float, call_id: str | None = None) -> ToolkitContext:
        """A copy with ``deadline`` (and ``call_id``) set (cheaper than ``dataclasses.replace``: one per call)."""
        clone = object.__new__(ToolkitContext)
        clone.__dict__.update(self.__dict__)
        clone.__dict__["deadline"] = deadline
        if call_id is not None:
            clone.__dict__["call_id"] = call_id
        return clone

    def event(self, kind: str, data: dict[str, object]) -> None:
        """Emit an event when the host installed a sink; otherwise do nothing."""
        if self.emit is not None:
            self.emit(kind, data)


@dataclass(frozen=True)
class Control:
    """A control signal returned by an operation (``finish``, ``ask_user``, ...).

    The bridge sends it as ``{"$control": {"kind": kind, **payload}}``; the runtime raises a
    ``BaseException``-derived signal in the sandbox so the model's ``except Exception`` cannot
    swallow it.

    Attributes:
        kind: The signal, for example ``"finish"``.
        payload: JSON-able (codec-encodable) details; must not contain the key ``"kind"``.
    """

    kind: str
    payload: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "kind" in self.payload:
            raise ToolkitError(f"Control({self.kind!r}) payload may not use the reserved key 'kind'")
