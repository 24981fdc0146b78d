"""The reply side of a code round: a cut-off reply continued, code that cannot run turned into an outcome.

* A reply cut by the token limit (finish reason ``length``) is continued: the model is asked for the
  rest (chat: the partial reply as the assistant's turn, then a request to continue; completion: the
  prompt plus the partial reply, which the model simply extends), at most :data:`MAX_CONTINUATIONS`
  times, and the pieces are concatenated (on chat, a fence the model re-opens is dropped; a
  continuation that is a whole new complete block replaces the partial reply: the model started
  over). A reply still cut off after that runs nothing. A reply that went on after its code into an
  invented turn (``Output:``, ``# Evaluation:``) is not continued: the code before that turn runs.
  Nor is one cut off while writing one line over and over (the 1.5B wrote ``await cipher.count_letters(...)``
  fifteen times, then twice more 400 tokens of it when asked to continue: 130 s a round): it runs
  nothing, and the model is told which line it repeated.
* A reply whose code does not parse runs nothing either (the parser never cuts code down to what
  parses): the syntax error, at the model's line, is the round's outcome — in the Evaluation, the
  ``code.completed`` event (status ``parse_error``), the terminal and the record.
* A round without code (prose only, an empty reply, a bash block) says what the model wrote and why
  nothing ran (status ``no_code``).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.segments import CodeParseError, cut_invented_turn, parse_python

if TYPE_CHECKING:
    from codeact.engine.agent.context import RunContext
    from codeact.segments import Prompt

__all__ = ["MAX_CONTINUATIONS", "FullReply", "complete_reply", "no_code_outcome", "truncated_error"]

MAX_CONTINUATIONS = 2
"""How many times a reply cut off by the token limit is continued before the round gives up."""

LOOP_LINES = 6
"""A cut-off reply whose last whole lines are one line this many times running is looping, not continued."""

_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*[\w+#.-]*[ \t]*\n")


@dataclass(frozen=True, kw_only=True)
class FullReply:
    """The model's reply after continuations.

    Attributes:
        text: The reply, continuations concatenated.
        truncated: Still cut off by the token limit after :data:`MAX_CONTINUATIONS` continuations.
        continuations: How many continuation calls were made.
        usage: Token usage summed over the calls.
        looped: The line a cut-off reply kept repeating (it was not continued), else None.
    """

    text: str
    truncated: bool
    continuations: int
    usage: dict[str, object]
    looped: str | None = None


async def complete_reply(ctx: RunContext, prompt: Prompt, text: str, finish: str | None,
                         usage: dict[str, Any]) -> FullReply:  # fmt: skip
    """Continue ``text`` while the model stops at its token limit (bounded); see the module docstring."""
    total = dict(usage)
    count = 0
    # A reply that went on after its code into an invented turn is whole: the parser keeps the code
    # before that turn, so asking for the rest only buys more invented text.
    invented, looped = _cut_short(text, finish)
    while finish == "length" and count < MAX_CONTINUATIONS and not invented and looped is None:
        count += 1
        if prompt.protocol == "completion" and prompt.text is not None:
            more = await ctx.caller.call_model("code", prompt=dataclasses.replace(prompt, text=prompt.text + text))
        else:
            request = prompts.render("reply_continue.j2").strip()
            messages = (*prompt.messages, {"role": "assistant", "content": text}, {"role": "user", "content": request})
            more = await ctx.caller.call_model("code", messages=messages)
        piece = more.text
        if _unclosed_fence(text) and _OPEN_FENCE.match(piece):
            if _whole_program(piece):
                text = piece  # the model started over with the whole code: that is its reply now
            else:
                text += _OPEN_FENCE.sub("", piece, count=1)  # it re-opened the block it was writing
        else:
            text += piece
        finish = more.finish_reason
        invented, looped = _cut_short(text, finish)
        for key, value in more.usage.items():
            if isinstance(value, int | float) and isinstance(total.get(key, 0), int | float):
                total[key] = total.get(key, 0) + value
    if count:
        total["continuations"] = count
    truncated = finish == "length" and not invented
    looped = looped if truncated else None
    return FullReply(text=text, truncated=truncated, continuations=count, usage=total, looped=looped)


def _cut_short(text: str, finish: str | None) -> tuple[bool, str | None]:
    """For a reply cut off at its token limit: (it went on into an invented turn, the line it loops on)."""
    if finish != "length":  # only a cut-off reply is looked at
        return False, None
    return cut_invented_turn(text)[1] is not None, _looping_line(text)


def _looping_line(text: str) -> str | None:
    """The line ``text`` ends by repeating :data:`LOOP_LINES` times or more (its cut-off last line aside), else None."""
    lines = [line.strip() for line in text.split("\n")[:-1]]  # the last line is where the limit cut
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) < LOOP_LINES or not lines[-1]:
        return None
    return lines[-1] if len(set(lines[-LOOP_LINES:])) == 1 else None


def _whole_program(piece: str) -> bool:
    """True when ``piece`` opens a fence, closes it, and the code between parses (a fresh, complete block)."""
    body = _OPEN_FENCE.sub("", piece, count=1)
    closing = re.search(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$", body, flags=re.MULTILINE)
    if closing is None:
        return False
    try:
        parse_python(textwrap.dedent(body[: closing.start()]))
    except (SyntaxError, ValueError):
        return False
    return True


def _unclosed_fence(text: str) -> bool:
    fences = re.findall(r"^[ \t]*(?:`{3,}|~{3,})", text, flags=re.MULTILINE)
    return len(fences) % 2 == 1


def truncated_error(reply: str, continuations: int, looped: str | None = None) -> CodeParseError:
    """The outcome of a reply still cut off after its continuations (or cut off looping): nothing of it runs."""
    message = prompts.render("reply_error.j2", reason="truncated", continued=continuations, looped=looped).strip()
    detail = "reply cut off at the token limit" + (", repeating one line" if looped is not None else "")
    return CodeParseError(message, reason="truncated", reply=reply, detail=detail)


def no_code_outcome(error: CodeParseError) -> tuple[str, dict[str, object]]:
    """``(status, error dict)`` of a round whose reply gave no code to run.

    The error dict is what ``code.completed`` and the record carry: ``type`` (``SyntaxError`` for code
    that does not parse or a reply cut off, else ``NoCode``), ``message`` (Python's words, or why
    nothing ran), ``reason`` (the parser's), and for a syntax error ``line`` (the model's line) and
    ``source`` (its text).
    """
    if error.reason in ("syntax", "truncated"):
        data: dict[str, object] = {
            "type": "SyntaxError",
            "message": error.detail or error.message,
            "reason": error.reason,
        }
        if error.line is not None:
            data["line"] = error.line
        if error.text:
            data["source"] = error.text
        return "parse_error", data
    why = re.split(r"(?<=\.) ", error.message, maxsplit=1)[0]  # the first sentence; the rest is for the model
    return "no_code", {"type": "NoCode", "message": why, "reason": error.reason}
