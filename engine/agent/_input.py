"""What a run takes (a string, a message or a list of messages) and what its result carries back.

* ``"Deploy the API"``: the task.
* ``{"role": "user", "content": "Deploy the API"}``: the same; ``content`` may be a list of parts
  (``{"type": "text", "text": ...}``).
* ``[{"role": "user", ...}, {"role": "assistant", ...}, {"role": "user", ...}]``: the last user
  message is the task, the messages around it are history the model sees (user messages as User
  segments, assistant messages as Express segments, system/developer messages as Context segments).

Image parts are refused with a clear error: the codeact prompt is built from text segments only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codeact.engine.errors import CodeactError
from codeact.segments import SegmentKind

__all__ = ["AgentInput", "RunInput", "conversation", "run_input"]

AgentInput = str | Mapping[str, Any] | Sequence[Mapping[str, Any]]

_KINDS = {
    "user": SegmentKind.USER,
    "assistant": SegmentKind.EXPRESS,
    "system": SegmentKind.CONTEXT,
    "developer": SegmentKind.CONTEXT,
}
_IMAGE_PARTS = frozenset({"image", "image_url", "input_image"})


@dataclass(frozen=True)
class RunInput:
    """A run's input, read: the task text and the history around it as ``(segment kind, text)``."""

    task: str
    history: tuple[tuple[str, str], ...] = ()


def _invalid(message: str) -> CodeactError:
    return CodeactError(message, code="input.invalid")


def _text(message: Mapping[str, Any], index: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        texts: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in _IMAGE_PARTS:
                raise CodeactError(
                    f"message {index} has an image part ({kind}): image input is not supported (the codeact prompt "
                    "is built from text segments); describe the image in a text part instead",
                    code="input.image_unsupported",
                )
            if kind != "text" or not isinstance(part.get("text"), str):
                raise _invalid(
                    f'message {index}: a content part must be {{"type": "text", "text": "..."}}, not {part!r}'
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise _invalid(f"message {index}: content must be a string or a list of text parts, not {type(content).__name__}")


def run_input(value: Any) -> RunInput:
    """Read ``value`` (a string, a message or a list of messages) as a task and its history.

    Raises:
        CodeactError: ``input.invalid`` (the message says what is wrong) or ``input.image_unsupported``.
    """
    if isinstance(value, str):
        return RunInput(task=value)
    messages: list[Any] = [value] if isinstance(value, Mapping) else list(value) if isinstance(value, Sequence) else []
    if not messages:
        raise _invalid(
            "the input must be a string, a message {'role', 'content'} or a non-empty list of messages, "
            f"not {value!r}"
        )
    read: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise _invalid(f"message {index} is a {type(message).__name__}, not a {{'role', 'content'}} mapping")
        role = message.get("role")
        if role not in _KINDS:
            raise _invalid(f"message {index} has role {role!r}; the roles are {', '.join(sorted(_KINDS))}")
        read.append((str(role), _text(message, index)))
    last = max((i for i, (role, _) in enumerate(read) if role == "user"), default=None)
    if last is None:
        raise _invalid("the messages hold no user message: the last user message is the task")
    history = tuple((_KINDS[role], text) for i, (role, text) in enumerate(read) if i != last)
    return RunInput(task=read[last][1], history=history)


def conversation(segments: Sequence[Mapping[str, Any]], answer: Any = None) -> list[dict[str, str]]:
    """The session's conversation as messages: user segments, the agent's Express segments, then ``answer``."""
    messages: list[dict[str, str]] = []
    for segment in segments:
        kind, content = segment.get("kind"), segment.get("content")
        if not isinstance(content, str):
            continue
        if kind == SegmentKind.USER:
            messages.append({"role": "user", "content": content})
        elif kind == SegmentKind.EXPRESS:
            messages.append({"role": "assistant", "content": content})
    if answer is not None:
        text = answer if isinstance(answer, str) else str(answer)
        if not messages or messages[-1] != {"role": "assistant", "content": text}:
            messages.append({"role": "assistant", "content": text})
    return messages
