"""The run's two data parts: what it is built from (:class:`RunDeps`, frozen) and what it changes (:class:`RunState`).

A leaf of the run: ``context.py`` (the run and the parts that act for it) and ``recovery.py`` (its recorder)
both read these; it imports nothing that acts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codeact.engine.agent._files import InputFile
from codeact.engine.agent._input import RunConfig
from codeact.engine.telemetry import NULL_TRACE, RunTrace
from codeact.prompts.jsontypes import JsonObject
from codeact.segments import SegmentHistory

if TYPE_CHECKING:
    from codeact.engine.agent.hooks import Hook
    from codeact.engine.blueprint import AgentSpec
    from codeact.engine.memory import RunMemory
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitBridge

__all__ = ["RunDeps", "RunState"]


@dataclass(frozen=True, kw_only=True)
class RunDeps:
    """What one run is built from and never changes: the wiring and the caller's input.

    ``trace``, ``memory``, ``bridge`` and ``handler`` are opened by the run itself (``_run.py``): the run
    re-binds its deps once, with them, when it has opened them (``dataclasses.replace``).
    """

    spec: AgentSpec
    run_id: str
    session_id: str
    input: str
    model: ModelClient
    store: Store
    hooks: Sequence[Hook] = ()
    interceptors: Sequence[object] = ()
    stream: bool = True
    user: str | None = None  # who the run is for (Agent.run(user=...) or the agent's user)
    # What the caller gave besides the task: the input's history messages as (segment kind, text), the
    # run's labels (RunConfig.labels(): thread_id, tags, metadata), the caller's context as text.
    inputs: tuple[tuple[str, str], ...] = ()
    labels: dict[str, Any] = field(default_factory=dict)
    config: RunConfig = field(default_factory=RunConfig)  # as the caller gave it (hooks see it: hook_context)
    # What the final answer must match (engine/agent/output.py: an OutputSchema).
    output: Any = None  # an OutputSchema (typed loosely: output.py imports this module)
    caller_context: str | None = None
    input_files: tuple[InputFile, ...] = ()  # the input's files, for the sandbox's working directory (_files.py)
    # Opened by the run: its spans (engine.telemetry; a no-op object when tracing is off), its memory
    # (engine.memory.RunMemory when the blueprint enables memory), its toolkit bridge and the
    # handler the sandbox calls (the same bridge, its call pipeline composed: engine/calls).
    trace: RunTrace = NULL_TRACE
    memory: RunMemory | None = None
    bridge: ToolkitBridge | None = None
    handler: ToolkitBridge | None = None


@dataclass(kw_only=True)
class RunState:
    """What one run changes as it goes.

    ``round`` is the round in progress (or the last one); ``recorded`` the last round written to the store.
    """

    history: SegmentHistory = field(default_factory=SegmentHistory)
    variables: JsonObject = field(default_factory=dict)
    round: int = 0
    first_round: int = 1
    created_session: bool = False  # this run created the session (it was new)
    recorded: int = 0
    output_repaired: bool = False  # the model was already told once that its answer did not match
    # Recovery (engine/agent/recovery.py): the interrupted round this run resumes (its first round's calls
    # keep that round's ids) and its recorded calls (those it completed answer the same calls again:
    # engine.calls.FromRecord), the calls answered so not yet told to the model, and what the round in
    # progress is running, for an interrupted round's record.
    resumes_round: int = 0
    resumed_calls: tuple[JsonObject, ...] = ()
    from_record: list[dict[str, object]] = field(default_factory=list)
    round_started: float = 0.0
    current_code: str | None = None
    current_reply: str = ""
    started: bool = False  # run.started was emitted
    stopping: bool = False  # the run was cancelled: no round (and no round's code) may start
    cancelled: bool = False  # the run took the cancel and is recording what it did
    # Hooks: the last round's outcome they see, and their variable edits not yet recorded (the next
    # round's record carries them as ``edits``, so replay applies them before running that round).
    last_outcome: dict[str, object] | None = None
    pending_edits: dict[str, Any] = field(default_factory=dict)
    # Toolkits hooks injected (name -> manifest entry), and those the loop has put in force (the prompt's
    # tools, the sandbox's runtime): each round's record carries the latter (``edits["tools"]``).
    injected: dict[str, object] = field(default_factory=dict)
    tools_in_force: dict[str, object] = field(default_factory=dict)
