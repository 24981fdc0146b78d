"""The finishing protocol: an answer a model computed reaches the user (docs/finishing.md).

Small models compute the answer and then do not call ``system.finish``: they set ``answer = 3``, or print
it, and send the same code again until the run is stopped as stuck with no answer. This module owns the
two short model calls that end such runs; the loop (``codeact.engine.agent.codeact``) decides when:

1. **confirm** (trigger ``answer_variable``): a round ran without error, did not finish, and set the
   answer variable (``workflow.codeact.answerVariable``, default ``answer``). The model is asked one
   yes/no question (``answer_confirm.j2``); a yes finishes the run with the variable's value.
2. **final answer** (triggers ``repeat``, ``stuck``, ``max_turns``): a reply repeats the last successful
   round's code (it is not run again), the run is about to stop as stuck, or its last round ended with
   no answer. The model is asked once, plainly, for the answer from what it has seen
   (``final_answer.j2``, as smolagents' final-answer step); ``UNKNOWN`` leaves the run as it was.

Each step is a :class:`FinishStep` the round's record keeps (``RoundRecord.finish``: prompt, reply,
answer), so ``sessions show`` and replay read what was asked and answered without calling a model.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from codeact import prompts
from codeact.engine.agent.context import usage_of
from codeact.engine.agent.support import describe_variables
from codeact.engine.errors import ModelError
from codeact.sandbox.runtime.codec import plain, python_repr
from codeact.segments import SegmentKind

if TYPE_CHECKING:
    from codeact.engine.agent.context import RunContext

__all__ = ["FinishStep", "Trigger", "confirm_answer", "final_answer", "parse_answer"]

Trigger = Literal["answer_variable", "repeat", "stuck", "max_turns"]

_EVALUATIONS = 3  # the last rounds' Evaluations the final-answer prompt shows
_EVALUATION_CHARS = 1200  # of each, from its end (the output's last lines hold the result)
_VALUE_CHARS = 300
_FENCED = re.compile(r"^```[A-Za-z]*\n?(.*?)\n?```$", re.DOTALL)
_BLOCK = re.compile(r"```[A-Za-z]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FINISH_CALL = re.compile(r"^(?:await\s+)?system\.finish\(\s*(?:answer\s*=\s*)?(.*?)\s*\)$", re.DOTALL)
_LABEL = re.compile(r"^(?:final\s+)?answer\s*[:=]\s*", re.IGNORECASE)
_UNKNOWN = frozenset({"unknown", "none", "n/a", "no answer", "i don't know"})


@dataclass(frozen=True, kw_only=True)
class FinishStep:
    """One step of the finishing protocol, as the round's record keeps it.

    Attributes:
        step: ``confirm`` (a yes/no question on the answer variable) or ``final_answer``.
        trigger: What started it: ``answer_variable``, ``repeat``, ``stuck`` or ``max_turns``.
        prompt: What the model was sent.
        reply: What it answered.
        found: Whether the step gave an answer (a yes, or a final answer other than UNKNOWN).
        answer: The answer (plain JSON data) when ``found``.
        usage: The model call's token counts.
        error: Why the model call failed (then nothing was found), or None.
    """

    step: Literal["confirm", "final_answer"]
    trigger: Trigger
    prompt: str
    reply: str
    found: bool
    answer: object = None
    usage: Mapping[str, object] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        """The record's ``finish`` field (``answer`` only when the step found one)."""
        data: dict[str, object] = {
            "step": self.step,
            "trigger": self.trigger,
            "prompt": self.prompt,
            "reply": self.reply,
        }
        if self.found:
            data["answer"] = self.answer
        if self.error is not None:
            data["error"] = self.error
        return data


async def confirm_answer(ctx: RunContext, *, name: str, stdout: str) -> FinishStep:
    """Ask whether the answer variable ``name`` (set by the round just run) is the final answer."""
    stored = ctx.state.variables.get(name)
    value = plain(stored)
    shown = _short(python_repr(stored))
    text = prompts.render(
        "answer_confirm.j2",
        task=ctx.deps.input,
        name=name,
        value=shown,
        stdout=_tail(stdout.strip(), _EVALUATION_CHARS),
    )
    reply, usage, error = await _ask(ctx, text)
    said = re.sub(r"[^a-z]", " ", reply.strip().lower()).split()
    yes = bool(said) and said[0] in {"yes", "y", "true", "correct"}
    return FinishStep(
        step="confirm",
        trigger="answer_variable",
        prompt=text,
        reply=reply,
        found=yes,
        answer=value if yes else None,
        usage=usage,
        error=error,
    )


async def final_answer(ctx: RunContext, *, trigger: Trigger) -> FinishStep:
    """Ask the model once, plainly, for the final answer from the outputs it has seen."""
    segments = ctx.state.history.segments  # what code that ran showed: a reply without code showed nothing
    evaluations = [
        s.content
        for before, s in zip(segments, segments[1:], strict=False)
        if s.kind == SegmentKind.EVALUATION and before.kind == SegmentKind.CODE
    ]
    outputs = "\n---\n".join(_tail(text.strip(), _EVALUATION_CHARS) for text in evaluations[-_EVALUATIONS:])
    variables = describe_variables(
        {k: v for k, v in ctx.state.variables.items() if not (isinstance(v, dict) and v.get("$type") == "source")}
    )
    text = prompts.render(
        "final_answer.j2",
        task=ctx.deps.input,
        outputs=outputs or "(nothing)",
        variables="\n".join(f"{name} = {shown}" for name, (_, shown) in variables.items()),
    )
    reply, usage, error = await _ask(ctx, text)
    found, answer = parse_answer(reply, variables=ctx.state.variables)
    if found and isinstance(answer, str) and _echoes_the_question(answer):
        found, answer = False, None  # the 1.5B copied the ask's words instead of answering
    return FinishStep(
        step="final_answer",
        trigger=trigger,
        prompt=text,
        reply=reply,
        found=found,
        answer=answer,
        usage=usage,
        error=error,
    )


async def _ask(ctx: RunContext, text: str) -> tuple[str, dict[str, object], str | None]:
    """``(reply, usage, error)`` of one plain question.

    A failed call is no answer, never a new failure: the run then ends as it would have without the step
    (the error is kept in the record).
    """
    try:
        reply = await ctx.caller.call_model("utility", messages=({"role": "user", "content": text},))
    except ModelError as exc:
        return "", {}, exc.message
    return reply.text, usage_of(reply), None


def parse_answer(text: str, *, variables: Mapping[str, object] | None = None) -> tuple[bool, object]:
    """``(found, answer)`` of a final-answer reply.

    The reply is the value itself (``3``, ``'fchahcufcu'``, ``['A', 4]``: read as a Python literal when it
    is one, else kept as text), and small models also write it as ``Answer: 3``, in a fenced block, as
    ``await system.finish(answer=3)`` or as the name of a variable that holds it. ``UNKNOWN``, an empty
    reply and code (statements, not one value) are no answer.
    """
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    else:
        block = _BLOCK.search(body)
        if block is not None:  # prose around a code block: the block is what the model answered with
            body = block.group(1).strip()
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if len(lines) > 1 and _literal(_LABEL.sub("", lines[-1])) is not None:
        body = lines[-1]  # "The shortest is 3.\n3": prose, then the value on its own line
    body = _LABEL.sub("", body).strip()
    call = _FINISH_CALL.match(body)
    if call is not None:
        body = call.group(1).strip()
    if not body or body.strip(" .!").lower() in _UNKNOWN or _is_code(body):
        return False, None
    if variables is not None and body.isidentifier() and body in variables:
        return True, plain(variables[body])
    value = _literal(body)
    return True, body if value is None else value


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


@functools.cache
def _final_answer_ask() -> str:
    """The words ``final_answer.j2`` itself says (no task, outputs or variables)."""
    return _words(prompts.render("final_answer.j2", task="", outputs="", variables=""))


def _echoes_the_question(answer: str) -> bool:
    """Whether a text answer of three words or more is a piece of the final-answer question's own wording."""
    said = _words(answer)
    return len(said.split()) >= 3 and f" {said} " in f" {_final_answer_ask()} "


def _is_code(text: str) -> bool:
    """Whether ``text`` is code (``x = 1``, a loop, a call, several lines) rather than a value."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return True
    return isinstance(tree.body[0].value, ast.Call | ast.Await)  # print(x), await kit.op(): a step, not a value


def _literal(text: str) -> object:
    """``text`` as a Python literal (a tuple as a list), or None when it is not one."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, str | int | float | bool | list | tuple | dict):
        return list(value) if isinstance(value, tuple) else value
    return None


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def _short(text: str) -> str:
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."
