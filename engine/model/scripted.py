r"""The scripted model: replays a file (or list) of replies, for the demo and for tests.

A script is a YAML or JSON list (or ``{replies: [...]}``); each entry is a string or a mapping::

    - "print('hello')"                       # a reply for any purpose
    - text: "The user wants the project list."
      purpose: thought                       # only served to the `thought` route
    - text: "answer = 42"
      usage: {prompt_tokens: 120, completion_tokens: 4}
    - tool_calls: [{name: devops__get_project, arguments: {project_id: "123"}}]   # react mode
    - error: rate_limit                      # the call fails once with ModelRateLimitError
    - text: "x = 1\ny = 2"
      chunks: ["x = 1\n", "y = 2"]          # how a streaming call splits it (default: per word)

Replies are consumed in order: a call for purpose P takes the first unconsumed entry whose
``purpose`` is P or unset. The model name is ``scripted/<path to the file>``; in-process,
``ScriptedReplies([...]).model`` gives a name that routes to that very object.

This module is pure Python. :class:`~codeact.engine.model.ModelClient` serves ``scripted/...`` calls
without litellm: :func:`openai_response` and :func:`openai_chunks` build the very JSON an
OpenAI-compatible server would send (a reply, or its stream's chunks), and the client reads them
through the same code as a server's (:mod:`codeact.engine.model._wire`). Direct litellm use
(``litellm.acompletion(model="scripted/...")``) goes through the custom provider that
:mod:`codeact.engine.model._litellm` registers, built from the same two functions.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codeact.engine.model.errors import (
    ModelAuthError,
    ModelBadRequestError,
    ModelConfigError,
    ModelConnectionError,
    ModelProviderError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ScriptExhaustedError,
)

__all__ = [
    "SCRIPTED_PREFIX",
    "ScriptedReplies",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedToolCall",
    "approx_tokens",
    "openai_chunks",
    "openai_response",
    "reply_finish",
    "reply_usage",
]

SCRIPTED_PREFIX = "scripted/"

ScriptedErrorKind = Literal["rate_limit", "connection", "timeout", "server", "auth", "bad_request"]

_ERRORS: dict[str, tuple[type[ModelProviderError], int | None]] = {
    "rate_limit": (ModelRateLimitError, 429),
    "connection": (ModelConnectionError, None),
    "timeout": (ModelTimeoutError, None),
    "server": (ModelServerError, 503),
    "auth": (ModelAuthError, 401),
    "bad_request": (ModelBadRequestError, 400),
}


def approx_tokens(text: str) -> int:
    """The token estimate used when no tokenizer is available: about four characters per token."""
    return (len(text) + 3) // 4


class ScriptedToolCall(BaseModel):
    """A function call in a scripted reply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string a provider would send."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


class ScriptedReply(BaseModel):
    """One entry of a script."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    purpose: str | None = None
    usage: dict[str, int] | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    chunks: tuple[str, ...] | None = None
    finish_reason: str | None = None
    error: ScriptedErrorKind | None = None
    message: str | None = None

    def pieces(self) -> list[str]:
        """How a streaming call delivers the text: ``chunks`` or one piece per word (lossless)."""
        if self.chunks is not None:
            return list(self.chunks)
        return [piece for piece in re.findall(r"\S*\s*", self.text) if piece]

    def to_error(self, *, model: str) -> ModelProviderError:
        """The exception an ``error:`` entry stands for."""
        kind = self.error or "server"
        cls, status = _ERRORS[kind]
        message = self.message or f"scripted {kind.replace('_', ' ')} failure"
        return cls(message, status_code=status, provider="scripted", model=model)


@dataclass(frozen=True, kw_only=True)
class ScriptedRequest:
    """What the scripted model was asked (recorded for tests)."""

    purpose: str
    messages: tuple[dict[str, Any], ...]
    protocol: str
    stream: bool


_counter = itertools.count(1)
_registry: weakref.WeakValueDictionary[str, ScriptedReplies] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


@dataclass(eq=False)
class ScriptedReplies:
    """A script of replies and its cursor; thread-safe (litellm may call from worker threads).

    Args:
        replies: Strings, mappings (see the module docstring) or :class:`ScriptedReply`.
        source: Where the script came from, for messages (``<memory>`` when built in-process).
    """

    replies: Sequence[str | Mapping[str, Any] | ScriptedReply]
    source: str = "<memory>"
    requests: list[ScriptedRequest] = field(default_factory=list, init=False)
    _entries: list[ScriptedReply] = field(default_factory=list, init=False, repr=False)
    _used: list[bool] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _key: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._entries = [_coerce(entry, index=i, source=self.source) for i, entry in enumerate(self.replies)]
        self._used = [False] * len(self._entries)

    @classmethod
    def from_text(cls, text: str, *, source: str = "<memory>") -> ScriptedReplies:
        """Parse a YAML (or JSON) script."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ModelConfigError(f"scripted reply file {source} is not valid YAML/JSON: {exc}") from exc
        if isinstance(data, Mapping) and set(data) == {"replies"}:
            data = data["replies"]
        if not isinstance(data, list):
            raise ModelConfigError(
                f"scripted reply file {source} is invalid: expected a list of replies (strings or mappings "
                f"with text, purpose, usage, tool_calls), or {{replies: [...]}}; got {type(data).__name__}"
            )
        return cls(data, source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedReplies:
        """Load a script from a YAML or JSON file."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelConfigError(
                f"scripted reply file not found: {str(file)!r} ({exc.strerror}): "
                "pass --model scripted/<path to a YAML or JSON list of replies>"
            ) from exc
        return cls.from_text(text, source=str(path))

    @property
    def model(self) -> str:
        """A model name (``scripted/@N``) that routes calls to THIS object while it is alive."""
        with _registry_lock:
            if self._key is None:
                self._key = f"@{next(_counter)}"
                _registry[self._key] = self
            return SCRIPTED_PREFIX + self._key

    @property
    def consumed(self) -> int:
        """Replies served so far."""
        with self._lock:
            return sum(self._used)

    @property
    def remaining(self) -> int:
        """Replies not served yet."""
        with self._lock:
            return self._used.count(False)

    def fresh(self) -> ScriptedReplies:
        """A new, unconsumed copy (one per model client, so concurrent sessions do not share a cursor)."""
        return ScriptedReplies(list(self._entries), source=self.source)

    def take(
        self,
        purpose: str,
        *,
        messages: Iterable[Mapping[str, object]] = (),
        protocol: str = "chat",
        stream: bool = False,
    ) -> ScriptedReply:
        """Serve the next reply for ``purpose`` and record the request.

        Raises:
            ScriptExhaustedError: No unconsumed reply fits ``purpose``.
        """
        with self._lock:
            self.requests.append(
                ScriptedRequest(
                    purpose=purpose, messages=tuple(dict(m) for m in messages), protocol=protocol, stream=stream
                )
            )
            for index, entry in enumerate(self._entries):
                if not self._used[index] and entry.purpose in (None, purpose):
                    self._used[index] = True
                    return entry
            raise ScriptExhaustedError(consumed=sum(self._used), source=self.source, purpose=purpose)


def lookup(key: str) -> ScriptedReplies | None:
    """The live in-process script registered under ``key`` (``@N``), if any."""
    with _registry_lock:
        return _registry.get(key)


def _coerce(entry: object, *, index: int, source: str) -> ScriptedReply:
    if isinstance(entry, ScriptedReply):
        return entry
    if isinstance(entry, str):
        return ScriptedReply(text=entry)
    if not isinstance(entry, Mapping):
        raise ModelConfigError(
            f"scripted reply file {source} is invalid at replies[{index}]: "
            f"expected a string or a mapping, got {type(entry).__name__}"
        )
    try:
        return ScriptedReply.model_validate(dict(entry))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in error["loc"])
        raise ModelConfigError(
            f"scripted reply file {source} is invalid at replies[{index}]{where}: {error['msg']}"
        ) from exc


# ------------------------------------------------------------------- a reply as an OpenAI server sends it


def reply_usage(entry: ScriptedReply, messages: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """The usage a scripted reply reports: its ``usage:`` entry, else about len/4 of the prompt and the reply."""
    prompt = approx_tokens("\n".join(str(m.get("content") or "") for m in messages))
    completion = approx_tokens(entry.text) + sum(approx_tokens(c.arguments_json()) for c in entry.tool_calls)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, **(entry.usage or {})}
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return usage


def reply_finish(entry: ScriptedReply) -> str:
    """The finish reason of a scripted reply: its ``finish_reason:``, else ``tool_calls`` or ``stop``."""
    return entry.finish_reason or ("tool_calls" if entry.tool_calls else "stop")


def _tool_calls(entry: ScriptedReply) -> list[dict[str, object]]:
    return [
        {
            "index": i,
            "id": c.id or f"call_{i}",
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments_json()},
        }  # fmt: skip
        for i, c in enumerate(entry.tool_calls)
    ]


def openai_response(entry: ScriptedReply, messages: Sequence[Mapping[str, object]], *, model: str,
                    raw: bool) -> dict[str, object]:  # fmt: skip
    """The JSON body an OpenAI-compatible server answers with (``/v1/completions`` when ``raw``)."""
    choice: dict[str, object] = {"index": 0, "finish_reason": reply_finish(entry)}
    if raw:
        choice["text"] = entry.text
    else:
        calls = _tool_calls(entry)
        choice["message"] = {"role": "assistant", "content": entry.text or None, "tool_calls": calls or None}
    return {"object": "text_completion" if raw else "chat.completion", "model": model, "choices": [choice],
            "usage": reply_usage(entry, messages)}  # fmt: skip


def openai_chunks(entry: ScriptedReply, messages: Sequence[Mapping[str, object]], *,
                  raw: bool) -> Iterator[dict[str, object]]:  # fmt: skip
    """The chunks of the same reply streamed (``stream_options.include_usage``: usage in the last chunk)."""
    for piece in entry.pieces():
        yield {"choices": [{"index": 0, "text": piece} if raw else {"index": 0, "delta": {"content": piece}}]}
    if not raw:
        for call in _tool_calls(entry):
            yield {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
    last: dict[str, object] = {"index": 0, "finish_reason": reply_finish(entry)}
    if raw:
        last["text"] = ""
    else:
        last["delta"] = {}
    yield {"choices": [last], "usage": reply_usage(entry, messages)}
