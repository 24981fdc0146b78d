"""A compact, human view of events on a rich console (``codeact run`` without ``--json``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from codeact.engine.events._model import (
    ActionRequested,
    ArtifactCreated,
    CodeCompleted,
    CodeStarted,
    Event,
    FlowStepCompleted,
    FlowStepStarted,
    MessageCompleted,
    RoundStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    SegmentCreated,
    StateUpdated,
    ToolCallCompleted,
    ToolCallStarted,
)
from codeact.sandbox.runtime.codec import display_text

if TYPE_CHECKING:
    from rich.console import Console

_SHOWN_SEGMENTS = {"Thought": "magenta", "Plan": "magenta", "NextGoal": "magenta", "Express": "bold"}


def reply_excerpt(reply: str, limit: int = 300) -> str:
    """What the model said, trimmed, blank lines squeezed (shown for a round in which no code ran)."""
    text = re.sub(r"\n\s*\n+", "\n", reply.strip())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def without_frame_error(stdout: str, error: Mapping[str, object]) -> str:
    """``stdout`` without the frame handler's ``Error: Type(...)`` line, which the error line already says."""
    from codeact.segments.evaluation import without_frame_error as strip

    return strip(stdout, error)


def error_summary(error: Mapping[str, object]) -> str:
    """One line for a round's error, at the model's line: ``Type: message (line 2: `x = (1, 2`; program line 9)``.

    ``line`` is the model's line (events); a record's error keeps the program's ``line`` and adds
    ``model_line``, so both shapes are read. A round in which no code ran ends with "nothing ran".
    """
    if error.get("type") == "NoCode":
        return f"nothing ran: {error.get('message')}"
    if "model_line" in error:  # a record
        model_line, program_line = error.get("model_line"), error.get("line")
    elif "program_line" in error or "reason" in error:  # an event
        model_line, program_line = error.get("line"), error.get("program_line")
    else:  # an older record, or no frame: only the program's line is known
        model_line, program_line = None, error.get("line")
    where: list[str] = []
    if model_line is not None:
        source = error.get("source")
        where.append(f"line {model_line}" + (f": {source}" if source else ""))
    if program_line is not None and program_line != model_line:
        where.append(f"program line {program_line}")
    text = f"{error.get('type')}: {error.get('message')}"
    if where:
        text += " (" + "; ".join(where) + ")"
    if error.get("reason") in ("syntax", "truncated"):
        text += "; nothing ran"
    return text


def render_event(event: Event, console: Console) -> None:
    """Print a compact, human view of ``event`` on a rich ``console`` (streaming deltas print nothing).

    Code is syntax-highlighted on a terminal and printed plain otherwise; tool calls, output,
    errors and the end of the run get one line each. A full-screen renderer (spinner, live
    streaming) is the CLI's business; this is the plain building block.
    """
    from rich.text import Text

    def short(value: object, limit: int = 120) -> str:
        # codec data: JSON text, or Python's repr for a value JSON cannot hold (never the codec's tag)
        text = display_text(value)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def call_args(arguments: Mapping[str, object]) -> str:
        return ", ".join(
            f"{name}={short(value if not isinstance(value, str) else json.dumps(value, ensure_ascii=False), 40)}"
            for name, value in arguments.items()
        )

    if isinstance(event, RunStarted):
        layout = f" · layout {event.layout} ({event.layout_reason})" if event.layout else ""
        console.print(Text(f"run {event.run_id[:8]} · session {event.session_id} · {event.model}{layout}", style="dim"))
    elif isinstance(event, RoundStarted):
        console.rule(f"round {event.round}", style="dim")
    elif isinstance(event, SegmentCreated):
        kind = str(event.segment.get("kind", ""))
        style = _SHOWN_SEGMENTS.get(kind)
        if style is not None:
            console.print(Text.assemble((f"{kind}: ", "bold"), (str(event.segment.get("content", "")), style)))
    elif isinstance(event, CodeStarted):
        if console.is_terminal:
            from rich.syntax import Syntax

            console.print(Syntax(event.code, "python", theme="ansi_dark", background_color="default", word_wrap=True))
        else:
            console.print(Text(event.code.rstrip("\n")))
        for note in event.notes:
            console.print(Text(f"note: {note}", style="yellow"))
    elif isinstance(event, ToolCallStarted):
        args = call_args(event.arguments)
        console.print(Text(f"→ {event.toolkit}.{event.operation}({args})", style="cyan"))
    elif isinstance(event, ToolCallCompleted):
        if event.error is not None:
            message = short(event.error.get("message", event.error))
            console.print(Text(f"← {event.toolkit}.{event.operation}: {message}", style="red"))
        else:
            console.print(Text(f"← {event.toolkit}.{event.operation} -> {short(event.result)}", style="cyan"))
    elif isinstance(event, CodeCompleted):
        if event.status in ("parse_error", "no_code"):
            said = event.reply or "(an empty reply)"
            console.print(Text.assemble(("model said: ", "bold"), (said, "dim")))
        stdout = without_frame_error(event.stdout, event.error) if event.error else event.stdout
        if stdout.strip():
            console.print(Text(stdout.rstrip("\n"), style="dim"))
        if event.error:
            console.print(Text(error_summary(event.error), style="red"))
        if event.variables_changed:
            console.print(Text("variables: " + ", ".join(event.variables_changed), style="green"))
    elif isinstance(event, ArtifactCreated):
        if event.refused is None:
            console.print(Text(f"artifact: {event.name} ({event.mime}, {event.size} bytes)", style="green"))
        else:
            console.print(Text(f"artifact refused: {event.name} ({event.refused})", style="yellow"))
    elif isinstance(event, StateUpdated):
        # A variable the store will not keep (too large, not encodable) must be visible now, not only
        # in `sessions show`: the next round will not find it.
        for item in event.uncaptured:
            kind = f" ({item['type']})" if item.get("type") else ""
            reason = f": {item['reason']}" if item.get("reason") else ""
            kept = (
                "is kept in this run's sandbox only, not saved"
                if item.get("live")
                else "is not kept for the next round"
            )
            console.print(Text(f"! variable {item.get('name')}{kind} {kept}{reason}", "yellow"))
    elif isinstance(event, ActionRequested):
        args = call_args(event.arguments)
        console.print(Text(f"? {event.kind} needed: {event.toolkit}.{event.operation}({args})", style="yellow"))
    elif isinstance(event, RunCompleted):
        done = event.rounds if event.run_rounds is None else event.run_rounds
        plural = "s" if done != 1 else ""
        session = f" ({event.rounds} in the session)" if event.rounds != done else ""
        console.print(Text(f"✔ {event.reason} after {done} round{plural}{session}", style="green"))
    elif isinstance(event, RunFailed):
        console.print(Text(f"✖ [{event.error.get('code')}] {event.error.get('message')}", style="bold red"))
    elif isinstance(event, MessageCompleted) and event.purpose == "note":  # a flow's note (engine.flow)
        console.print(Text(f"note: {event.text}", style="yellow"))
    elif isinstance(event, FlowStepStarted):
        console.rule(f"{event.agent} ({event.position}) · session {event.session_id}", style="blue")
    elif isinstance(event, FlowStepCompleted):
        style = "blue" if event.status != "failed" else "red"
        console.print(Text(f"◆ {event.agent}: {event.status} -> {short(event.answer)}", style=style))
    # message.delta / other message.completed: shown through the events above.
