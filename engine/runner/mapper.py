"""Engine events -> protocol results: :class:`ResultMapper` (pure; reused by the queue).

=======================  ======================================================================
engine event             result(s)
=======================  ======================================================================
``run.started``          ``state.updated`` (conversation ``codeact.session_id`` = the session)
``message.delta``        ``message.delta`` (the model's working replies only with ``show_work``)
``message.completed``    ``message.completed`` for a message to the user (``system.send_message``);
                         the model's working replies only with ``show_work``
``segment.created``      a Thought: ``message.completed`` of purpose ``thought`` (only with
                         ``show_work``), the thought alone, ``parent_id`` the reply it was in
``code.started``         ``tool.call.started`` of the ``python`` tool (``parameters.code``)
``code.completed``       ``tool.call.completed`` of the ``python`` tool (``result``: ``status``,
                         ``stdout``, ``variables_changed``, ``duration_s``; ``error`` the error)
``tool.call.started``    ``tool.call.started`` (``tool_name`` = ``toolkit.operation``)
``tool.call.completed``  ``tool.call.completed`` (result as plain JSON; a non-dict one is
                         ``{"value": result}``, as the payload's ``result`` is an object); for
                         ``platform_api.request_action``, then ``action.requested`` with the
                         request's ``{action, target, payload}`` (``platform_actions.py``), unless
                         it was answered from an interrupted round's record (``from_record``)
``state.updated``        ``state.updated`` (conversation ``codeact.variables``: the names changed)
``artifact.created``     ``artifact.created``
``action.requested``     ``action.requested`` (``interaction.requested``, a confirmation); with
                         nobody to answer (``interactive=False``) a ``processor.log`` warning
``run.completed``        ``message.completed`` (the answer) + ``run.completed``; for ``ask_user``:
                         ``action.requested`` (a form) + ``message.completed`` (the question) +
                         ``run.completed`` with ``finish_reason`` ``ask_user``
``run.failed``           ``run.failed`` (the engine's code mapped to a ``runner.*`` code)
others                   nothing (rounds and segments are in the session record)
=======================  ======================================================================

Every message (and message chunk) says what it is for in ``provider_specific_fields.purpose``:
``answer`` (the run's answer, or its question, for the user), ``message`` (an intermediate message
to the user: ``system.send_message``), ``work`` (the model's working reply, its code, and other
engine messages; only with ``show_work``) or ``thought`` (the Thought of a working reply, on its own;
only with ``show_work``).

Ids: every message has a ``resp_message_id`` (``<run id>-m1``, ``-m2``, ... in the order the messages
start; the chunks of a streamed message carry its id). A tool call's envelope names in ``parent_id``
the working reply whose code made it (the round's ``code`` reply; only when that reply was streamed,
that is with ``show_work``), and a thought part names the reply it was taken from.

Values crossing from the sandbox are plain JSON (the codec's ``$type`` tags decoded by
``codeact.sandbox.runtime.codec.plain``); text outputs of the python tool are capped.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from pydantic import JsonValue

from codeact.engine.events import (
    ActionRequested,
    ArtifactCreated,
    CodeCompleted,
    CodeStarted,
    Event,
    MessageCompleted,
    MessageDelta,
    RunCompleted,
    RunFailed,
    RunStarted,
    SegmentCreated,
    StateUpdated,
    ToolCallCompleted,
    ToolCallStarted,
)
from codeact.engine.runner.entities import (
    ActionRequestedPayload,
    ArtifactCreatedPayload,
    Message,
    MessageChunk,
    MessageCompletedPayload,
    MessageDeltaPayload,
    ProcessorLogPayload,
    RunCompletedPayload,
    RunFailedPayload,
    RunnerResult,
    StateUpdatedPayload,
    TokenUsage,
    ToolCallCompletedPayload,
    ToolCallStartedPayload,
)
from codeact.engine.runner.entities.interaction import INTERACTION_REQUESTED_ACTION, InteractionRequest
from codeact.engine.runner.interactions import approval_request, question_request
from codeact.engine.runner.platform_actions import requested_action
from codeact.sandbox.runtime.codec import plain

__all__ = [
    "OUTPUT_CAP",
    "PYTHON_TOOL",
    "SESSION_STATE_KEY",
    "VARIABLES_STATE_KEY",
    "ResultMapper",
    "runner_code",
    "streams_results",
]

SESSION_STATE_KEY = "codeact.session_id"
"""The conversation state key under which a run reports its session."""

VARIABLES_STATE_KEY = "codeact.variables"
"""The conversation state key under which a run reports which variables a round changed."""

_USER_FACING = frozenset({"express", "answer"})
PYTHON_TOOL = "python"
"""The tool name of a round's code execution (``tool.call.started``/``completed``)."""
OUTPUT_CAP = 4000
"""Characters of the python tool's stdout (and error text) streamed; the session record has all."""
_RETRYABLE_CODES = frozenset({"runner.timeout", "runner.session_busy"})


def runner_code(engine_code: str) -> str:
    """The protocol code (``runner.*``) for an engine error code (``model.rate_limited`` -> ``runner.model_error``)."""
    if engine_code.startswith("runner.") or engine_code == "cancelled":
        return engine_code
    if engine_code == "store.session_busy":
        return "runner.session_busy"
    if engine_code in ("deadline_exceeded", "queue.deadline"):  # a call's deadline, a queued run's time limit
        return "runner.timeout"
    family = engine_code.split(".", 1)[0]
    return {
        "model": "runner.model_error",
        "store": "runner.store_error",
        "sandbox": "runner.sandbox_error",
        "toolkit": "runner.toolkit_error",
    }.get(family, "runner.error")


def _ask(request: InteractionRequest) -> ActionRequestedPayload:
    return ActionRequestedPayload(action=INTERACTION_REQUESTED_ACTION, payload=request.model_dump(mode="json"))


def _question_id(run_id: str) -> str:
    """``ask-<run_id>`` (a hash of a run id too long for an interaction id)."""
    if len(run_id) <= 200:
        return f"ask-{run_id}"
    return "ask-" + hashlib.sha256(run_id.encode()).hexdigest()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False, default=str)


def streams_results(agent: object, *, show_work: bool) -> bool:
    """Whether the runs of ``agent`` (an ``Agent`` or a flow) return ``message.delta`` results.

    Derived from what a run does, so a manifest's ``streaming`` cannot claim more: the agent's model
    calls stream (``Agent.streams_deltas``: codeact and react alike; a flow streams when any of its
    steps' agents does), and the mapper passes those deltas on. The model's streamed replies are
    working replies (``code``, ``thought``, ``utility``), passed only with ``show_work``; messages
    to the user (``system.send_message``, the answer) arrive whole, as ``message.completed``.
    """
    return show_work and _streams_deltas(agent)


def _streams_deltas(agent: object) -> bool:
    steps = getattr(agent, "steps", None)
    if steps is not None:  # a flow: its steps' agents (or flows) stream, or not
        return any(_streams_deltas(step.agent) for step in steps)
    return bool(getattr(agent, "streams_deltas", False))


def _purpose(engine_purpose: str) -> str:
    """``answer``, ``message`` (to the user, mid-run) or ``work`` (the model's working reply)."""
    if engine_purpose == "answer":
        return "answer"
    return "message" if engine_purpose == "express" else "work"


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    return text[:OUTPUT_CAP] + f"\n... [{len(text) - OUTPUT_CAP} more characters in the session record]"


def _code_error(error: dict[str, Any]) -> str:
    """``ZeroDivisionError: division by zero (line 2: x = 1 / 0)``."""
    text = f"{error.get('type') or 'Error'}: {error.get('message') or ''}".rstrip(": ")
    if error.get("line"):
        source = f": {error['source']}" if error.get("source") else ""
        text += f" (line {error['line']}{source})"
    return _cap(text)


class ResultMapper:
    """Maps the engine events of one run onto protocol results, numbering them 1, 2, ...

    Args:
        run_id: The protocol run id every result carries (not the engine's own run id).
        show_work: Also stream the model's working replies (its code) as messages; a chat host
            wants only the messages to the user, a console wants the work too.
        expires_at: Unix time after which interaction requests expire (the run's deadline).
        interactive: Whether someone can answer an approval; when not, an approval request becomes
            a ``processor.log`` warning (the call is denied) instead of a request nobody answers.
        streaming: Whether the host takes ``message.delta`` chunks (the context's
            ``delivery.supports_streaming``); when not, every message arrives whole.
        max_message_size: The longest message the host's surface takes (``delivery.max_message_size``,
            characters); a longer one is sent as several messages, split at a line or word break.
    """

    def __init__(
        self,
        run_id: str,
        *,
        show_work: bool = False,
        expires_at: float | None = None,
        interactive: bool = True,
        streaming: bool = True,
        max_message_size: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.show_work = show_work
        self.expires_at = expires_at
        self.interactive = interactive
        self.streaming = streaming
        self.max_message_size = max_message_size if max_message_size and max_message_size > 0 else None
        self.sequence = 0
        self.usage: dict[str, int] = {}
        self.session_id: str | None = None
        self._chunks = 0
        self._code_round: int | None = None
        self._messages = 0
        self._streaming: str | None = None  # the id of the message whose chunks are arriving
        self._last_reply: dict[int | None, str] = {}  # round -> the last working reply streamed in it
        self._code_reply: dict[int | None, str] = {}  # round -> its code reply (the parent of its tool calls)

    # -- building ----------------------------------------------------------------------------
    def result(
        self,
        type: str,
        data: Any,
        *,
        usage: bool = False,
        timestamp: float | None = None,
        parent_id: str | None = None,
    ) -> RunnerResult:
        """The next result (sequence + 1); ``usage`` attaches the run's token totals so far."""
        self.sequence += 1
        return RunnerResult.make(
            self.run_id,
            type,
            data,
            sequence=self.sequence,
            usage=self.total_usage() if usage else None,
            timestamp=timestamp if timestamp is not None else time.time(),
            parent_id=parent_id,
        )

    def _next_message_id(self) -> str:
        self._messages += 1
        return f"{self.run_id}-m{self._messages}"

    def failed(self, message: str, *, code: str = "runner.error", retryable: bool | None = None) -> RunnerResult:
        """A ``run.failed`` result (retryable by default for ``runner.timeout`` and ``runner.session_busy``).

        ``code`` may be an engine code (``model.rate_limited``): it is mapped with :func:`runner_code`.
        """
        code = runner_code(code)
        flag = code in _RETRYABLE_CODES if retryable is None else retryable
        return self.result("run.failed", RunFailedPayload(error=message, code=code, retryable=flag), usage=True)

    def total_usage(self) -> TokenUsage | None:
        """The tokens counted so far, or None when no call reported any."""
        if not self.usage:
            return None
        prompt, completion = self.usage.get("prompt_tokens"), self.usage.get("completion_tokens")
        total = (prompt or 0) + (completion or 0)
        return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)

    # -- mapping -----------------------------------------------------------------------------
    def map(self, event: Event) -> list[RunnerResult]:
        """The results for one engine event (often none, sometimes several)."""
        ts = event.timestamp
        if isinstance(event, RunStarted):
            self.session_id = event.session_id
            state = StateUpdatedPayload(scope="conversation", key=SESSION_STATE_KEY, value=event.session_id)
            return [self.result("state.updated", state, timestamp=ts)]
        if isinstance(event, MessageDelta):
            if not self.streaming or not (self.show_work or event.purpose in _USER_FACING):
                return []
            if self._streaming is None:
                self._streaming = self._next_message_id()
            chunk = MessageChunk(
                role="assistant",
                content=event.text,
                resp_message_id=self._streaming,
                msg_sequence=self._chunks,
                provider_specific_fields={"purpose": _purpose(event.purpose)},
            )
            self._chunks += 1
            return [self.result("message.delta", MessageDeltaPayload(chunk=chunk), timestamp=ts)]
        if isinstance(event, MessageCompleted):
            self._count(event.usage)
            self._chunks = 0
            streamed, self._streaming = self._streaming, None
            if not (self.show_work or event.purpose in _USER_FACING):
                return []
            completed = self._messages_of(event.text, ts, purpose=_purpose(event.purpose), message_id=streamed)
            if event.purpose not in _USER_FACING:
                reply_id = str(completed[0].data["message"]["resp_message_id"])
                self._last_reply[event.round] = reply_id
                if event.purpose == "code":
                    self._code_reply[event.round] = reply_id
            return completed
        if isinstance(event, SegmentCreated):
            if not self.show_work or event.segment.get("kind") != "Thought":
                return []
            parent = self._last_reply.get(event.round)
            return self._messages_of(str(event.segment.get("content", "")), ts, purpose="thought", parent_id=parent)
        if isinstance(event, CodeStarted):
            self._code_round = event.round
            started = ToolCallStartedPayload(
                tool_call_id=self._code_call_id(event.round), tool_name=PYTHON_TOOL, parameters={"code": event.code}
            )
            return [
                self.result("tool.call.started", started, timestamp=ts, parent_id=self._code_reply.get(event.round))
            ]
        if isinstance(event, CodeCompleted):
            if self._code_round != event.round:
                return []  # no code ran in this round (nothing was started)
            self._code_round = None
            parent = self._code_reply.get(event.round)
            return [self.result("tool.call.completed", self._code_completed(event), timestamp=ts, parent_id=parent)]
        if isinstance(event, ToolCallStarted):
            started = ToolCallStartedPayload(
                tool_call_id=event.call_id,
                tool_name=f"{event.toolkit}.{event.operation}",
                parameters=plain(dict(event.arguments)),
            )
            return [
                self.result("tool.call.started", started, timestamp=ts, parent_id=self._code_reply.get(event.round))
            ]
        if isinstance(event, ToolCallCompleted):
            parent = self._code_reply.get(event.round)
            done = self._tool_completed(event)
            out = [self.result("tool.call.completed", done, timestamp=ts, parent_id=parent)]
            # the code asked the host for a platform action (checked by the toolkit); one answered from an
            # interrupted round's record was asked for when that round made it
            new = done.error is None and not event.from_record
            asked = requested_action(event.toolkit, event.operation, done.result) if new else None
            if asked is not None:
                out.append(self.result("action.requested", asked, timestamp=ts, parent_id=parent))
            return out
        if isinstance(event, StateUpdated):
            if not (event.changed or event.removed or event.uncaptured):
                return []
            value: dict[str, JsonValue] = {
                "round": event.round,
                "changed": list[JsonValue](sorted(event.changed)),
                "removed": list[JsonValue](sorted(event.removed)),
                "uncaptured": list[JsonValue](sorted(str(item.get("name")) for item in event.uncaptured)),
            }
            state = StateUpdatedPayload(scope="conversation", key=VARIABLES_STATE_KEY, value=value)
            return [self.result("state.updated", state, timestamp=ts)]
        if isinstance(event, ArtifactCreated):
            artifact = ArtifactCreatedPayload(
                artifact_id=event.uri or f"{event.session_id}/{event.round}/{event.name}",
                name=event.name,
                mime_type=event.mime,
                size=event.size,
                uri=event.uri,
                refused=event.refused,
            )
            return [self.result("artifact.created", artifact, timestamp=ts)]
        if isinstance(event, ActionRequested):
            if not self.interactive:
                note = f"{event.toolkit}.{event.operation} needs an approval this run cannot wait for: denied"
                return [self.result("processor.log", ProcessorLogPayload(text=note, level="warning"), timestamp=ts)]
            request = approval_request(
                event.request_id,
                toolkit=event.toolkit,
                operation=event.operation,
                arguments=event.arguments,
                expires_at=self.expires_at,
            )
            action = ActionRequestedPayload(
                action=INTERACTION_REQUESTED_ACTION, payload=request.model_dump(mode="json")
            )
            return [self.result("action.requested", action, timestamp=ts)]
        if isinstance(event, RunCompleted):
            return self._completed(event)
        if isinstance(event, RunFailed):
            code = runner_code(str(event.error.get("code", "runner.error")))
            message = str(event.error.get("message", "the run failed"))
            engine_code = str(event.error.get("code", ""))
            if engine_code and engine_code != code:
                message = f"[{engine_code}] {message}"
            retryable = event.retryable or code in _RETRYABLE_CODES
            return [self.failed(message, code=code, retryable=retryable)]
        return []

    def _message(
        self, text: str, ts: float, *, purpose: str, message_id: str | None = None, parent_id: str | None = None
    ) -> RunnerResult:
        message = Message(
            role="assistant",
            content=text,
            resp_message_id=message_id or self._next_message_id(),
            provider_specific_fields={"purpose": purpose},
        )
        payload = MessageCompletedPayload(message=message)
        return self.result("message.completed", payload, timestamp=ts, parent_id=parent_id)

    def _messages_of(
        self, text: str, ts: float, *, purpose: str, message_id: str | None = None, parent_id: str | None = None
    ) -> list[RunnerResult]:
        """``text`` as one message, or as several of at most ``max_message_size`` characters.

        The first part keeps ``message_id`` (the streamed chunks built it); the others get new ids.
        """
        parts = split_message(text, self.max_message_size)
        return [
            self._message(part, ts, purpose=purpose, message_id=message_id if i == 0 else None, parent_id=parent_id)
            for i, part in enumerate(parts)
        ]

    def _code_call_id(self, round_index: int) -> str:
        return f"{self.run_id}-code-{round_index}"

    def _code_completed(self, event: CodeCompleted) -> ToolCallCompletedPayload:
        result: dict[str, Any] = {
            "status": event.status,
            "stdout": _cap(event.stdout),
            "variables_changed": sorted(event.variables_changed),
            "duration_s": round(event.duration_s, 3),
        }
        if event.stderr:
            result["stderr"] = _cap(event.stderr)
        return ToolCallCompletedPayload(
            tool_call_id=self._code_call_id(event.round),
            tool_name=PYTHON_TOOL,
            result=result,
            error=_code_error(event.error) if event.error is not None else None,
        )

    def _tool_completed(self, event: ToolCallCompleted) -> ToolCallCompletedPayload:
        error = None
        if event.error is not None:
            error = str(event.error.get("message") or event.error.get("name") or event.error)
        result = None
        if error is None:
            value = plain(event.result)
            result = value if isinstance(value, dict) else {"value": value}
        return ToolCallCompletedPayload(
            tool_call_id=event.call_id, tool_name=f"{event.toolkit}.{event.operation}", result=result, error=error
        )

    def _completed(self, event: RunCompleted) -> list[RunnerResult]:
        out: list[RunnerResult] = []
        ts = event.timestamp
        if event.reason == "ask_user":
            question = _text(event.answer) if event.answer is not None else ""
            request = question_request(_question_id(self.run_id), question)
            action = ActionRequestedPayload(
                action=INTERACTION_REQUESTED_ACTION, payload=request.model_dump(mode="json")
            )
            out.append(self.result("action.requested", action, timestamp=ts))
            out.extend(self._messages_of(request.fallback_text, ts, purpose="answer"))
        elif event.answer is not None:
            out.extend(self._messages_of(_text(event.answer), ts, purpose="answer"))
        done = RunCompletedPayload(finish_reason=event.reason or "stop")
        out.append(self.result("run.completed", done, usage=True, timestamp=ts))
        return out

    def _count(self, usage: dict[str, Any]) -> None:
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value


def split_message(text: str, limit: int | None) -> list[str]:
    """``text`` in parts of at most ``limit`` characters (``[text]`` when it fits, or with no limit).

    Each part is cut at the last line break of its window, else the last space; a word longer than
    ``limit`` is cut where it must.
    """
    if limit is None or len(text) <= limit:
        return [text]
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = window.rfind("\n")
        if cut <= 0:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = limit
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n ")
    if rest:
        parts.append(rest)
    return [p for p in parts if p] or [text[:limit]]
