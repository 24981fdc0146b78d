"""``workflow.mode: react``: a function-calling loop over the same toolkits (their JSON schemas).

Each turn the model either calls toolkit operations (run on the host through the same bridge the
sandbox uses, so grants, validation, approvals and the call log are identical) or answers in text,
which ends the run. ``system__finish`` also ends it; ``system__ask_user`` pauses it, as in CodeAct.

Text beside tool calls is said to the user (an Express segment and a ``message.completed`` of purpose
``express``, as CodeAct's ``system.send_message``); a text answer is the run's answer (``run.completed``).
The blueprint's knowledge chosen for the task ends the system message (``_run.py``).

Replies stream as in CodeAct (``message.delta`` events for the text; the model client assembles the
tool calls from their streamed fragments). Nothing of a reply whose tool calls did not arrive whole
runs: arguments that are not a JSON object, or a reply cut off at the token limit, make the turn a
``parse_error`` round whose error the model reads in the next turn (as CodeAct's unparsable code).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.agent.context import Outcome, RunContext, usage_of
from codeact.engine.agent.output import review
from codeact.engine.errors import ErrorInfo
from codeact.engine.events import MessageCompleted, RoundStarted
from codeact.engine.model import ToolCall
from codeact.sandbox.runtime import protocol as _p
from codeact.sandbox.runtime.codec import has_tags, python_repr
from codeact.segments import SegmentKind

if TYPE_CHECKING:
    from codeact.engine.model import ModelReply
    from codeact.sandbox import RpcHandler

__all__ = ["ReactLoop"]


class ReactLoop:
    """Runs one react run over a :class:`RunContext` whose ``bridge`` serves the tool calls."""

    def __init__(self, ctx: RunContext, handler: RpcHandler, *, knowledge: str = "") -> None:
        self.ctx = ctx
        self.handler = (
            handler  # the run's bridge, its call pipeline composed (events, approvals, interceptors: engine.calls)
        )
        self.knowledge = knowledge  # the blueprint's knowledge chosen for the task (the system message's end)
        self._schemas: list[dict[str, object]] | None = None

    def _messages(self) -> list[dict[str, object]]:
        ctx = self.ctx
        instructions = (ctx.deps.spec.instructions.system, ctx.deps.spec.instructions.developer, self.knowledge)
        system = "\n\n".join(p for p in instructions if p)
        messages: list[dict[str, object]] = [{"role": "system", "content": system}] if system else []
        # Knowledge segments are in the system message (this run's); an earlier run's are not the model's words.
        messages.extend(
            {"role": "user", "content": s.content}
            if s.kind == SegmentKind.USER
            else {"role": "user", "content": s.render()}
            if s.kind == SegmentKind.CONTEXT
            else {"role": "assistant", "content": s.render()}
            for s in ctx.state.history.segments
            if s.kind != SegmentKind.KNOWLEDGE
        )
        return messages

    async def run(self) -> Outcome:
        """Turns until a text answer, ``finish`` or ``max_turns``."""
        ctx = self.ctx
        assert ctx.deps.bridge is not None  # noqa: S101 - the agent always builds one
        messages = self._messages()
        turns, done = ctx.deps.spec.max_turns, 0
        while done < turns:
            done += 1
            ctx.check_stopping()
            ctx.state.round += 1
            with ctx.deps.trace.round(ctx.state.round):
                outcome = await self._turn(messages)
            if outcome is None:
                continue
            checked = review(ctx, outcome)
            if isinstance(checked, Outcome):
                return checked
            # The answer does not match the output schema: the model is told once, in one more turn.
            ctx.add_segment(SegmentKind.CONTEXT, checked, tags=("output",))
            if outcome.reason == "answered":  # its text answer, not yet among the messages
                messages.append({"role": "assistant", "content": str(outcome.answer)})
            messages.append({"role": "user", "content": checked})
            turns = max(turns, done + 1)
        return Outcome(
            status="failed",
            reason="max_turns",
            error=ErrorInfo(
                code="run.maxTurns",
                message=f"no answer after {ctx.deps.spec.max_turns} turns (workflow.maxTurns); "
                "raise it in the blueprint",
            ),
        )

    def _tools(self) -> list[dict[str, object]] | None:
        """The granted operations as function schemas (called after the before_model hooks: injected ones too)."""
        ctx = self.ctx
        assert ctx.deps.bridge is not None  # noqa: S101 - the agent always builds one
        if ctx.caller.apply_tools() or self._schemas is None:
            self._schemas = ctx.deps.bridge.openai_tools()
        return self._schemas or None

    async def _turn(self, messages: list[dict[str, object]]) -> Outcome | None:
        """One turn, in named steps: ask, then answer, or say and call the tools; record; decide."""
        ctx = self.ctx
        started, t0 = time.time(), time.perf_counter()
        ctx.emit(RoundStarted, round=ctx.state.round)
        reply = await self._ask(messages)
        if reply.tool_calls and (broken := _broken(reply)):
            await self._unparsable(messages, reply, broken, started, t0)
            return None
        if not reply.tool_calls:
            ctx.add_segment(SegmentKind.EXPRESS, reply.text)
            await self._record(started, t0, reply.text, reply)
            return Outcome(status="completed", reason="answered", answer=reply.text)
        self._say(reply)
        messages.append(_assistant_message(reply))
        calls = await self._call_tools(messages, reply.tool_calls)
        await self._record(started, t0, reply.text, reply)
        return _decide(calls.control)

    async def _ask(self, messages: list[dict[str, object]]) -> ModelReply:
        """The model's reply to the conversation; tool calls it wrote as text read as tool calls."""
        ctx = self.ctx
        reply = await ctx.caller.call_model("code", messages=messages, tools=self._tools)
        if not reply.tool_calls and (written := _calls_in_text(reply.text, self._schemas or (), ctx.state.round)):
            reply = dataclasses.replace(reply, text="", tool_calls=written)
        return reply

    def _say(self, reply: ModelReply) -> None:
        """The text beside tool calls is said to the user ("Let me look that up."), as codeact's send_message.

        An Express segment and a ``message.completed`` of purpose ``express``.
        """
        text = reply.text.strip()
        if text:
            self.ctx.add_segment(SegmentKind.EXPRESS, text)
            self.ctx.emit(MessageCompleted, text=text, purpose="express", round=self.ctx.state.round)

    async def _call_tools(self, messages: list[dict[str, object]], tool_calls: Sequence[ToolCall]) -> ToolResults:
        """Run the reply's tool calls through the run's bridge, one by one; each result a tool message."""
        control: dict[str, object] | None = None
        for call in tool_calls:
            content, called = await self._call_tool(call)
            if control is None and called is not None:
                control = called
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            self.ctx.add_segment(SegmentKind.EVALUATION, f"{call.name}: {content[:2000]}")
        return ToolResults(control=control)

    async def _call_tool(self, call: ToolCall) -> tuple[str, dict[str, object] | None]:
        """One tool call: its result as the tool message's content, and its control (finish, ask_user), if any."""
        toolkit, _, operation = call.name.partition("__")
        try:
            result = await self.handler.handle(
                "call", {"toolkit": toolkit, "operation": operation, "arguments": call.arguments}
            )
        except _p.RpcError as exc:
            refused: dict[str, object] = {"error": exc.name, "message": exc.message}
            # A call the argument check refused: its signature and one correct call, as CodeAct's
            # Evaluation shows them (small models resend the same wrong arguments on the error alone).
            # (In a sandbox the RPC error is raised as a ToolError; call_help reads it that way.)
            bridge = self.ctx.deps.bridge
            hint = bridge.call_help({"type": "ToolError", "message": exc.message}) if bridge else None
            if hint:
                refused["how_to_call"] = hint
            return json.dumps(refused, ensure_ascii=False), None
        # JSON, as function calling goes; a value JSON cannot hold as Python shows it, ('A', 4), never
        # the codec's {"$type": "tuple", ...}
        content = python_repr(result) if has_tags(result) else json.dumps(result, ensure_ascii=False)
        control = result.get("$control") if isinstance(result, dict) else None
        return content, control if isinstance(control, dict) else None

    async def _unparsable(
        self, messages: list[dict[str, object]], reply: ModelReply, broken: str, started: float, t0: float
    ) -> None:
        """A reply whose tool calls did not arrive whole: nothing runs; the model reads why next turn.

        The broken calls are not echoed back as ``tool_calls`` (servers that parse the arguments of
        earlier calls would refuse the conversation): the reply's text, then the error as a user message.
        """
        message = prompts.render("tool_calls_not_run.j2", broken=broken).rstrip("\n")
        if reply.text:
            messages.append({"role": "assistant", "content": reply.text})
        messages.append({"role": "user", "content": message})
        self.ctx.add_segment(SegmentKind.EVALUATION, message)
        usage = {"code": usage_of(reply)}
        await self.ctx.recorder.record_round(
            started=started, t0=t0, reply=reply.text, status="parse_error", parse_error=broken, usage=usage
        )

    async def _record(self, started: float, t0: float, reply: str, model_reply: Any = None) -> None:
        usage = {"code": usage_of(model_reply)} if model_reply is not None else {}
        await self.ctx.recorder.record_round(started=started, t0=t0, reply=reply, status="ok", usage=usage)


@dataclass(frozen=True, kw_only=True)
class ToolResults:
    """What a turn's tool calls left for the turn's end: the first control a call returned (finish, ask_user)."""

    control: dict[str, object] | None


def _assistant_message(reply: ModelReply) -> dict[str, object]:
    """The reply as the conversation keeps it: its text and its tool calls."""
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
            for c in reply.tool_calls
        ],
    }


def _decide(control: dict[str, object] | None) -> Outcome | None:
    """How the turn ends the run: ``system__finish`` completes it, ``system__ask_user`` pauses it; else None."""
    if control is not None and control.get("kind") == "finish":
        return Outcome(status="completed", reason="finished", answer=control.get("answer"))
    if control is not None and control.get("kind") == "ask_user":
        return Outcome(status="paused", reason="ask_user", answer=control.get("question"))
    return None


def _broken(reply: ModelReply) -> str:
    """Why the reply's tool calls cannot run (empty when they can): cut off, or arguments that are not an object."""
    if reply.finish_reason == "length":
        names = ", ".join(repr(c.name or "?") for c in reply.tool_calls)
        return prompts.render("tool_calls_broken.j2", names=names, bad=(), ended=False).rstrip("\n")
    bad = [
        (repr(c.name or "(no name)"), _clip(c.raw_arguments))
        for c in reply.tool_calls
        if not c.name or not c.arguments_valid
    ]
    if not bad:
        return ""
    return prompts.render("tool_calls_broken.j2", names="", bad=bad, ended=not reply.finish_reason).rstrip("\n")


def _clip(raw: str, limit: int = 200) -> str:
    return repr(raw if len(raw) <= limit else raw[:limit] + "...")


# A reply that is nothing but tool calls written as text: ```json fences or <tool_call> tags around
# {"name": ..., "arguments": {...}} objects (Qwen2.5-Coder-1.5B on llama.cpp wrote every call so).
_WRAPPER = re.compile(r"```(?:json)?|</?tool_call>", re.IGNORECASE)


def _calls_in_text(text: str, schemas: Sequence[dict[str, Any]], round_index: int) -> tuple[ToolCall, ...]:
    """The tool calls a reply wrote as text instead of as function calls; none unless that is all it is.

    Each object must name a granted function and give its arguments as an object; anything else in the
    reply (prose, another shape) leaves it an answer, as before.
    """
    names = {s.get("function", {}).get("name") for s in schemas}
    body = _WRAPPER.sub("\n", text).strip()
    if not body.startswith("{"):
        return ()
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    position = 0
    while position < len(body):
        try:
            item, end = decoder.raw_decode(body, position)
        except ValueError:
            return ()
        arguments = item.get("arguments", item.get("parameters")) if isinstance(item, dict) else None
        if not (isinstance(item, dict) and item.get("name") in names and isinstance(arguments, dict)):
            return ()
        raw = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCall(id=f"text-call-{round_index}-{len(calls)}", name=item["name"], arguments=arguments,
                              raw_arguments=raw))  # fmt: skip
        position = end
        while position < len(body) and body[position] in " \t\r\n,":
            position += 1
    return tuple(calls)
