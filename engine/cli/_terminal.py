"""The terminal side of ``codeact run``: the spinner, slow-step lines, and asking the user to approve a call."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.status import Status

    from codeact.engine.agent.support import Approver
    from codeact.toolkits import ApprovalDecision, ApprovalRequest

__all__ = ["Spinner", "approver", "show_slow_steps"]


class Spinner:
    """The terminal spinner of a run (None off a terminal); paused while the user answers a question."""

    def __init__(self) -> None:
        self.status: Status | None = None


_slow_steps_shown = False


def show_slow_steps() -> None:
    """Print the model client's slow steps (litellm's import, a local model's load) on stderr after a second."""
    global _slow_steps_shown
    if _slow_steps_shown:  # once per process (the CLI tests run many commands in one)
        return
    from codeact.engine.model import on_slow_step

    def show(line: str) -> None:
        sys.stderr.write(f"[codeact] {line}\n")  # sys.stderr of the moment: a test's capture, the terminal
        sys.stderr.flush()

    on_slow_step(show)
    _slow_steps_shown = True


def approver(approve_all: bool, deny_all: bool, spinner: Spinner) -> Approver:
    from codeact.toolkits import ApprovalDecision

    # Calls gathered in one round may ask at the same time: one question on the terminal at a time.
    asking = asyncio.Lock()

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        if approve_all:
            return ApprovalDecision(allow=True, reason="--approve-all")
        if deny_all:
            return ApprovalDecision(allow=False, reason="--deny-all")
        if not sys.stdin.isatty():
            return ApprovalDecision(allow=False, reason="no terminal to ask on (pass --approve-all to allow)")
        question = f"Allow {request.toolkit}.{request.operation}({json.dumps(request.arguments)[:200]})?"
        async with asking:
            for _ in range(3):  # let the renderer print the events queued so far (the tool call) first
                await asyncio.sleep(0)
            status = spinner.status
            if status is not None:
                status.stop()  # a live spinner would overwrite the question
            try:
                allowed = await asyncio.to_thread(_ask, question)
            finally:
                if status is not None:
                    status.start()
        return ApprovalDecision(allow=allowed, reason="the user answered yes" if allowed else "the user answered no")

    return approve


def _ask(question: str) -> bool:
    """Ask a yes/no question on stderr, read the answer from stdin (no, unless ``y``/``yes``).

    Not ``typer.confirm``: click reads with ``input(" ")``, which writes that space to stdout, and
    stdout carries only the final answer.
    """
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
