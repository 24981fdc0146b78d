"""What a run takes (a string, a message or a list of messages) and what its result carries back.

* ``"Deploy the API"``: the task.
* ``{"role": "user", "content": "Deploy the API"}``: the same; ``content`` may be a list of parts
  (``{"type": "text", "text": ...}``).
* ``[{"role": "user", ...}, {"role": "assistant", ...}, {"role": "user", ...}]``: the last user
  message is the task, the messages around it are history the model sees (user messages as User
  segments, assistant messages as Express segments, system/developer messages as Context segments).

Image and file parts (``{"type": "image_url", ...}``, ``{"type": "file", "file": {...}}``) become the
run's input files (``engine/agent/_files.py``): files in the sandbox's working directory, and images
also image parts for a model that takes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codeact.engine.agent._files import FILE_PARTS, IMAGE_PARTS, InputFile, check_files, file_from_part, input_limits
from codeact.engine.errors import CodeactError
from codeact.segments import SegmentKind

__all__ = [
    "AgentInput",
    "RunConfig",
    "RunInput",
    "context_text",
    "conversation",
    "labelled",
    "resolve_run",
    "run_input",
]

AgentInput = str | Mapping[str, object] | Sequence[Mapping[str, object]]

_KINDS = {
    "user": SegmentKind.USER,
    "assistant": SegmentKind.EXPRESS,
    "system": SegmentKind.CONTEXT,
    "developer": SegmentKind.CONTEXT,
}


@dataclass(frozen=True)
class RunInput:
    """A run's input, read: the task text, the history around it as ``(segment kind, text)``, its files."""

    task: str
    history: tuple[tuple[str, str], ...] = ()
    files: tuple[InputFile, ...] = ()


def _invalid(message: str) -> CodeactError:
    return CodeactError(message, code="input.invalid")


def _text(message: Mapping[str, object], index: int, files: list[InputFile]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        texts: list[str] = []
        for number, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in IMAGE_PARTS or kind in FILE_PARTS:
                images = sum(1 for f in files if f.image)
                where = f"message {index}, part {number}"
                files.append(file_from_part(part, where, image_number=images + 1, limits=input_limits()))
                continue
            if kind != "text" or not isinstance(part.get("text"), str):
                raise _invalid(
                    f'message {index}: a content part must be {{"type": "text", "text": "..."}}, an image part '
                    f'{{"type": "image_url", ...}} or a file part {{"type": "file", ...}}, not {_short(part)}'
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise _invalid(f"message {index}: content must be a string or a list of parts, not {type(content).__name__}")


def _short(part: object) -> str:
    text = repr(part)
    return text if len(text) <= 200 else text[:200] + "..."


def run_input(value: object) -> RunInput:
    """Read ``value`` (a string, a message or a list of messages) as a task and its history.

    Raises:
        CodeactError: ``input.invalid`` (the message says what is wrong), ``input.file_name``,
            ``input.image_url`` or ``input.too_large`` (a part, see ``engine/agent/_files.py``).
    """
    if isinstance(value, str):
        return RunInput(task=value)
    messages: list[object] = (
        [value] if isinstance(value, Mapping) else list(value) if isinstance(value, Sequence) else []
    )
    if not messages:
        raise _invalid(
            "the input must be a string, a message {'role', 'content'} or a non-empty list of messages, "
            f"not {value!r}"
        )
    read: list[tuple[str, str]] = []
    files: list[InputFile] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise _invalid(f"message {index} is a {type(message).__name__}, not a {{'role', 'content'}} mapping")
        role = message.get("role")
        if role not in _KINDS:
            raise _invalid(f"message {index} has role {role!r}; the roles are {', '.join(sorted(_KINDS))}")
        read.append((str(role), _text(message, index, files)))
    last = max((i for i, (role, _) in enumerate(read) if role == "user"), default=None)
    if last is None:
        raise _invalid("the messages hold no user message: the last user message is the task")
    history = tuple((_KINDS[role], text) for i, (role, text) in enumerate(read) if i != last)
    return RunInput(task=read[last][1], history=history, files=check_files(files, input_limits()))


def conversation(segments: Sequence[Mapping[str, object]], answer: object = None) -> list[dict[str, str]]:
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


_MAX_METADATA_BYTES = 8_000
_MAX_TAGS = 64
_MAX_TAG_CHARS = 128


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How one run is labelled (seed 002's RunnableConfig): accepted by ``run``/``invoke``/``run_sync``.

    Attributes:
        thread_id: The conversation to continue or start: the session id (``session_id=`` wins
            when both are given and agree; differing values are refused).
        tags: Labels of the run (``--tag``), in ``run.started``, the session record and the run's span;
            at most 64, each at most 128 characters.
        metadata: JSON values by name (``--meta k=v``), likewise; at most 8 KB as JSON.
        user: Who the run is for (as ``user=``).
    """

    thread_id: str | None = None
    tags: Sequence[str] = ()
    metadata: Mapping[str, object] = field(default_factory=dict)
    user: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tags, str) or not all(isinstance(t, str) and t for t in self.tags):
            message = f"RunConfig.tags must be a list of non-empty strings, not {self.tags!r}"
            raise CodeactError(message, code="config.invalid")
        object.__setattr__(self, "tags", tuple(dict.fromkeys(self.tags)))
        if len(self.tags) > _MAX_TAGS or any(len(t) > _MAX_TAG_CHARS for t in self.tags):
            message = f"RunConfig.tags: at most {_MAX_TAGS} tags of at most {_MAX_TAG_CHARS} characters each"
            raise CodeactError(message, code="config.invalid")
        if not isinstance(self.metadata, Mapping) or not all(isinstance(k, str) for k in self.metadata):
            raise CodeactError("RunConfig.metadata must be a mapping with string keys", code="config.invalid")
        try:
            size = len(json.dumps(dict(self.metadata), ensure_ascii=False))
        except (TypeError, ValueError) as exc:
            raise CodeactError(f"RunConfig.metadata must be JSON values: {exc}", code="config.invalid") from exc
        if size > _MAX_METADATA_BYTES:
            raise CodeactError(
                f"RunConfig.metadata is {size} bytes as JSON; at most {_MAX_METADATA_BYTES}", code="config.invalid"
            )
        object.__setattr__(self, "metadata", dict(self.metadata))

    def labels(self) -> dict[str, Any]:
        """What the events and the record carry: ``{"thread_id"?, "tags", "metadata"}`` (empty ones left out)."""
        out: dict[str, object] = {}
        if self.thread_id:
            out["thread_id"] = self.thread_id
        if self.tags:
            out["tags"] = list(self.tags)
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


def labelled(extra: Mapping[str, Any], labels: Mapping[str, Any] | None) -> dict[str, Any]:
    """A session's ``extra`` with a run's tags (added) and metadata (merged, the run's values win)."""
    out = dict(extra)
    if not labels:
        return out
    if labels.get("tags"):
        out["tags"] = list(dict.fromkeys([*out.get("tags", ()), *labels["tags"]]))
    if labels.get("metadata"):
        out["metadata"] = {**out.get("metadata", {}), **labels["metadata"]}
    return out


_NO_CONFIG = RunConfig()  # a run given no config: validated once (frozen, and nothing writes its metadata)


def resolve_run(
    config: RunConfig | None, session_id: str | None, user: str | None
) -> tuple[RunConfig, str | None, str | None]:
    """The run's config, session id and user from ``config`` and the explicit arguments."""
    config = config if config is not None else _NO_CONFIG
    if session_id and config.thread_id and session_id != config.thread_id:
        raise CodeactError(
            f"session_id={session_id!r} and RunConfig.thread_id={config.thread_id!r} differ: give one of them",
            code="config.invalid",
        )
    return config, session_id or config.thread_id, user if user is not None else config.user


CONTEXT_MAX_CHARS = 4_000


def context_text(context: Mapping[str, object] | None, *, max_chars: int = CONTEXT_MAX_CHARS) -> str | None:
    """The caller's context (page, URL, environment...) as the text of a Context segment, or None.

    One ``key: value`` line per entry (values other than strings as JSON). Past ``max_chars`` the
    text is cut and ends with a note saying how much was kept, so the model knows it is partial.

    Raises:
        CodeactError: ``context.invalid`` when ``context`` is not a mapping of JSON values.
    """
    if context is None:
        return None
    if not isinstance(context, Mapping) or not all(isinstance(k, str) for k in context):
        raise CodeactError(
            f"context must be a mapping with string keys, not {type(context).__name__}", code="context.invalid"
        )
    lines: list[str] = []
    for key, value in context.items():
        try:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise CodeactError(f"context[{key!r}] is not a JSON value: {exc}", code="context.invalid") from exc
        lines.append(f"{key}: {text}")
    full = "\n".join(lines)
    if not full:
        return None
    if len(full) <= max_chars:
        return full
    return f"{full[:max_chars]}\n[context truncated: {max_chars} of {len(full)} characters kept]"
