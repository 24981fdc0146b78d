"""Driving one ``codeact run`` to its end: events rendered (or printed as JSON lines), the answer, the exit code."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from codeact.engine.agent import Agent
    from codeact.engine.cli._terminal import Spinner
    from codeact.engine.events import Event
    from codeact.engine.flow import FlowAgent
    from codeact.engine.store import Store

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "drive"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_CONFIGURATION_CODES = frozenset({"model.auth"})


async def drive(
    agent: Agent | FlowAgent,
    input: str,
    session: str | None,
    *,
    json_output: bool,
    console: Console,
    spinner: Spinner,
    again: Callable[..., str],
    artifacts: Path | None = None,
    run_options: Mapping[str, Any] | None = None,
) -> int:
    """Run ``agent`` on ``input``, show its events, close it, and return the command's exit code.

    ``again(session_id, input_text)`` is the command that resumes the session (printed on a pause or Ctrl-C).
    """
    from codeact.engine.events import ArtifactCreated, RunStarted

    last: Event | None = None
    session_id = session
    produced: set[tuple[int, str]] = set()
    display = _Display(console, spinner, json_output=json_output)
    interrupted = False
    try:
        display.start()
        async for event in agent.run(input, session_id=session, **(run_options or {})):
            last = event
            if isinstance(event, RunStarted):
                session_id = event.session_id
            if isinstance(event, ArtifactCreated) and event.refused is None:
                produced.add((event.round, event.name))
            display.show(event)
    except asyncio.CancelledError:
        # Ctrl-C (asyncio.run cancels this task): the agent recorded the round in progress as
        # interrupted; say how to go on. Returning normally makes asyncio.run end without a traceback.
        interrupted = True
    finally:
        display.stop()
        if artifacts is not None and produced and session_id is not None:
            await _write_run_artifacts(agent.store, session_id, produced, artifacts, console)
        await agent.aclose()  # what the build opened: model clients, MCP servers, the store
    if interrupted:
        return _interrupted(session_id, console, again)
    return _ended(last, session_id, json_output=json_output, console=console, again=again)


class _Display:
    """Where the events go: JSON lines on stdout, or rendered on the console under a live spinner."""

    def __init__(self, console: Console, spinner: Spinner, *, json_output: bool) -> None:
        self.console = console
        self.json_output = json_output
        self.status = None if json_output or not console.is_terminal else console.status("working...", spinner="dots")
        spinner.status = self.status
        self.written = 0  # characters of the model's reply streamed so far this round (shown on the spinner)

    def start(self) -> None:
        if self.status is not None:
            self.status.start()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()

    def show(self, event: Event) -> None:
        from codeact.engine.events import render_event

        if self.json_output:
            sys.stdout.write(event.to_json_line() + "\n")
            sys.stdout.flush()
            return
        status = self.status
        if status is not None:
            self.written = 0 if event.type == "round.started" else self.written
            if event.type == "message.delta":
                self.written += len(getattr(event, "text", ""))
                status.update(f"the model is writing... {self.written:,} characters")
            else:
                status.update(_status_text(event))
        render_event(event, self.console)


def _interrupted(session_id: str | None, console: Console, again: Callable[..., str]) -> int:
    if session_id is not None:
        command = again(session_id, "continue")
        console.print(
            f"interrupted: session {session_id} was saved with the round in progress marked interrupted "
            f"(the toolkit calls it completed are recorded); resume with:\n  {command}",
            markup=False,
            highlight=False,
        )
    else:
        console.print("interrupted before the session was opened: nothing was recorded", markup=False)
    return EXIT_INTERRUPTED


def _ended(
    last: Event | None, session_id: str | None, *, json_output: bool, console: Console, again: Callable[..., str]
) -> int:
    """The exit code of a run that ended with ``last``; the answer on stdout, and how to go on after a pause."""
    from codeact.engine.events import RunCompleted, RunFailed

    if isinstance(last, RunCompleted):
        if not json_output and last.answer is not None:
            sys.stdout.write(f"{_answer_text(last.answer)}\n")
        if not json_output and last.reason == "ask_user":
            console.print(
                f"paused: the agent asks the question above; answer with {again(session_id or '')}",
                markup=False,
                highlight=False,
            )
        if not json_output and last.reason == "interrupt_before":
            command = again(session_id or "", "continue")
            console.print(
                f"paused before the flow's next step (interruptBefore); go on with {command}",
                markup=False,
                highlight=False,
            )
        return EXIT_OK
    if isinstance(last, RunFailed):
        # Missing or refused credentials are the caller's configuration, like a bad option: exit 2.
        return EXIT_USAGE if last.error.get("code") in _CONFIGURATION_CODES else EXIT_FAILED
    return EXIT_FAILED


async def _write_run_artifacts(
    store: Store, session_id: str, produced: set[tuple[int, str]], directory: Path, console: Console
) -> None:
    """Write the artifacts this run produced (read back from the session's round records) to ``directory``."""
    from codeact.engine.cli._artifacts import write_artifacts

    rounds = await store.rounds(session_id)
    chosen = [a for r in rounds for a in r.artifacts if (r.index, a.get("name")) in produced]
    try:
        written = write_artifacts(directory, chosen)
    except OSError as exc:
        console.print(f"cannot write the artifacts to {directory}: {exc}", markup=False, highlight=False)
        return
    console.print(f"{len(written)} artifact(s) written to {directory}", markup=False, highlight=False)


def _answer_text(answer: object) -> str:
    """A string answer as it is; anything else as plain JSON (never a Python repr, never a codec tag).

    Stdout is for programs too (``| jq``): a tuple answer prints as ``["A", 4]``, a date as its ISO text.
    """
    if isinstance(answer, str):
        return answer
    from codeact.sandbox.runtime.codec import plain

    return json.dumps(plain(answer), ensure_ascii=False, default=str)


def _status_text(event: Event) -> str:
    kind = event.type
    if kind in ("round.started", "segment.created", "message.delta"):
        return "the model is thinking..."
    if kind in ("code.started", "tool.call.started", "tool.call.completed"):
        return "running code in the sandbox..."
    return "working..."
