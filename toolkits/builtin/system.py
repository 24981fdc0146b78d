"""The built-in ``system`` toolkit: the agent's control over itself (the seed's "system tools")."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import re
import time
import zoneinfo
from typing import Any

from codeact import prompts
from codeact.toolkits.context import Control, MemoryAccess, ModelAccess, ToolkitContext
from codeact.toolkits.decorators import operation, toolkit
from codeact.toolkits.errors import ToolkitError
from codeact.toolkits.tasks import KEPT_TASKS, TaskState

__all__ = ["SystemToolkit"]

_SLEEP_MARGIN_S = 0.05
"""``sleep`` returns this long before the call's deadline so the answer still arrives in time."""
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


_MODEL_CALL_TIMEOUT_S = 900.0
"""The bridge's bound on ``think`` and ``parse``: the model client bounds each attempt itself (a hosted
model's ``timeout_s``, retries), and a local model on a busy CPU needs minutes, not the 30 s default of
other operations (issue 29: ``system.parse`` on the 1.5B model ran past 30 s under load)."""


def _model(context: ToolkitContext, operation_name: str) -> ModelAccess:
    if context.model is None:
        raise ToolkitError(
            f"system.{operation_name}() needs the agent's model, but this host gave the toolkits no model "
            "access (ToolkitContext.model is None)"
        )
    return context.model


def _memory(context: ToolkitContext, operation_name: str) -> MemoryAccess:
    if context.memory is None:
        raise ToolkitError(
            f"system.{operation_name}() needs memory, but this agent has none: set session.memory.enabled: true "
            "in the blueprint (docs/memory.md)"
        )
    return context.memory


@toolkit(
    name="system",
    description="The agent's own controls: talk to the user, finish, think, parse, time, skills, memory",
)
class SystemToolkit:
    """The agent's own controls.

    Args:
        timezone: The IANA time zone ``get_current_time()`` answers in when the code names none (a runner
            passes its run context's ``runtime.timezone``); None: UTC.

    Raises:
        ValueError: ``timezone`` is not an IANA time zone.
    """

    def __init__(self, *, timezone: str | None = None) -> None:
        self.timezone = timezone
        self._zone: _dt.tzinfo = _dt.UTC if timezone is None else _zone(timezone)

    @operation
    async def send_message(self, text: str, context: ToolkitContext) -> None:
        """Send a message to the user now, without ending the run.

        Args:
            text: What to tell the user.
            context: Supplied by the bridge (not shown to the model).
        """
        context.event("express", {"text": text, "session_id": context.session_id})

    @operation
    async def finish(self, answer: Any) -> Control:
        """End the run with the final answer; nothing after this call runs.

        Args:
            answer: The final answer for the user (text or any JSON-able value).
        """
        return Control("finish", {"answer": answer})

    @operation
    async def ask_user(self, question: str) -> Control:
        """Ask the user a question and pause the run until they answer; nothing after this call runs.

        Args:
            question: What you need to know.
        """
        return Control("ask_user", {"question": question})

    @operation
    async def sleep(self, seconds: float, context: ToolkitContext) -> float:
        """Wait before continuing (never past the call's timeout).

        Args:
            seconds: How long to wait; must not be negative.
            context: Supplied by the bridge.

        Returns:
            The seconds actually waited.
        """
        if seconds < 0:
            raise ValueError(f"sleep() needs seconds >= 0, got {seconds}")
        if context.deadline is not None:
            seconds = min(seconds, max(0.0, context.deadline - time.monotonic() - _SLEEP_MARGIN_S))
        started = time.monotonic()
        await asyncio.sleep(seconds)
        return round(time.monotonic() - started, 3)

    @operation(timeout=_MODEL_CALL_TIMEOUT_S)
    async def think(self, question: str, context: ToolkitContext) -> str:
        """Think deeply about a hard question with a stronger model, and get its reasoned answer.

        Args:
            question: The question, with every fact the thinking needs.
            context: Supplied by the bridge.

        Returns:
            The reasoned answer as text.
        """
        prompt = prompts.render("system_think.j2", question=question)
        return await _model(context, "think").complete(prompt, purpose="thought")

    @operation(timeout=_MODEL_CALL_TIMEOUT_S)
    async def parse(self, data: Any, instruction: str, context: ToolkitContext) -> Any:
        """Extract structured information from text or data with a language model.

        Args:
            data: The text (or JSON-able data) to read.
            instruction: What to extract and in which shape, for example "a list of {name, email}".
            context: Supplied by the bridge.

        Returns:
            The parsed JSON value when the model answers with JSON, else its text.
        """
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str, indent=1)
        prompt = prompts.render("system_parse.j2", data=text, instruction=instruction)
        reply = await _model(context, "parse").complete(prompt, purpose="utility")
        return _maybe_json(reply)

    @operation
    def get_current_time(self, tz: str | None = None) -> str:
        """The current date and time as an ISO 8601 string.

        Args:
            tz: An IANA time zone such as "Europe/Paris"; default UTC.
        """
        zone = self._zone if tz is None else _zone(tz)
        return _dt.datetime.now(zone).isoformat(timespec="seconds")

    @operation
    async def list_skills(self, context: ToolkitContext) -> dict[str, Any]:
        """The toolkits and operations this session may call, with one-line descriptions.

        Returns:
            {toolkit: {"description": str, "operations": {operation: summary}}}.
        """
        return {
            name: {"description": skill["description"], "operations": dict(skill["operations"])}
            for name, skill in context.skills.items()
        }

    @operation
    async def tasks(
        self, state: TaskState | None = None, limit: int = 20, *, context: ToolkitContext
    ) -> list[dict[str, Any]]:
        """The tasks this session launched (sub-agent runs), oldest first, each with its state now.

        Args:
            state: Only the tasks in this state.
            limit: At most this many, the latest (1-100).
            context: Supplied by the bridge.

        Returns:
            [{"id", "kind", "name", "input", "state", "answer", "error", "started", "ended"}]; long texts are cut.
        """
        if not 1 <= limit <= KEPT_TASKS:
            raise ValueError(f"tasks() takes a limit from 1 to {KEPT_TASKS}, got {limit}")
        if context.tasks is None:
            raise ToolkitError("system.tasks() needs the host's record of launched tasks, and this host keeps none")
        return await context.tasks.listing(state=state, limit=limit)

    @operation
    async def remember(self, title: str, data: Any, context: ToolkitContext) -> None:
        """Remember a named fact or object for the rest of the session (it survives resumes).

        Args:
            title: A short name, for example "deploy target" (remembering it again replaces it).
            data: Any JSON-able value (dict, list, str, number, bool, None).
            context: Supplied by the bridge.
        """
        await _memory(context, "remember").remember(title, data)

    @operation
    async def recall(self, title: str, context: ToolkitContext) -> Any:
        """The data remembered under a title in this session.

        Args:
            title: The title given to ``remember``.
            context: Supplied by the bridge.

        Returns:
            The remembered data (an error lists the known titles when nothing has that title).
        """
        return await _memory(context, "recall").recall(title)

    @operation
    async def entities(self, context: ToolkitContext) -> list[dict[str, Any]]:
        """Everything remembered in this session, most recently written first.

        Returns:
            [{"title": str, "data": Any, "updated": ISO time}].
        """
        return await _memory(context, "entities").entities()


def _zone(name: str) -> _dt.tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC', 'Europe/Paris' or 'Asia/Shanghai'"
        ) from None


def _maybe_json(reply: str) -> Any:
    text = reply.strip()
    match = _FENCE.match(text)
    if match:
        text = match.group("body").strip()
    try:
        return json.loads(text)
    except ValueError:
        return reply.strip()
