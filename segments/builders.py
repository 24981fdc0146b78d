"""Prompt builders: turn a segment history into a :class:`Prompt` (the seed's SegmentBuilder).

``SegmentBuilder.build(purpose, history, ...)`` routes by purpose to a builder on a common base:

* ``thought`` -> :class:`ThoughtPromptBuilder` (reply: ``Thought:`` and ``Plan:``)
* ``code``    -> :class:`CmdPromptBuilder` (reply: the FIM middle)
* ``reflect`` -> :class:`ReflectPromptBuilder` (reply: ``NextGoal:`` and optionally ``Express:``)

Every prompt is a STATIC part (the system sections, toolkit stubs included) followed by a DYNAMIC
part (the segments and, for code, the frame). The static part is rendered once per builder and is
byte-identical across rounds, so provider prompt caching applies; :attr:`Prompt.static_hash` is
its SHA-256.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from codeact import prompts
from codeact.segments.config import PromptConfig, substitute
from codeact.segments.errors import PromptConfigError
from codeact.segments.fim import CodeFrame, FimTokens, build_frame
from codeact.segments.history import SegmentHistory
from codeact.segments.model import Segment, SegmentKind

__all__ = [
    "BasePromptBuilder",
    "CmdPromptBuilder",
    "Prompt",
    "ReflectPromptBuilder",
    "SegmentBuilder",
    "ThoughtPromptBuilder",
    "ToolkitCatalog",
]

Variables = Mapping[str, tuple[str, str]]

_STUB_CLASS = re.compile(r"^class (\w+):", re.MULTILINE)

CHAT_HOLE = "# <your code for this round>"
"""The placeholder line of the chat frame: the model's code replaces it."""

CHAT_STOP: tuple[str, ...] = ("\nOutput:", "\nObservation:", "\nEvaluation:", "\nUser:")
"""Stop strings of a chat code request: the lines that start a turn the model would invent after its code.

At most 4 (OpenAI's cap). The parser cuts the same lines (and ``Assistant:``, ...) from a reply that
gets past them (segments/_repairs.py)."""

COMPLETION_STOP: tuple[str, ...] = (
    "\nOutput:", "\nObservation:", "\nEvaluation:", "\nUser:", "\nAssistant:", "\n# Evaluation:",
    "\n    # Evaluation:",
)  # fmt: skip
"""The same for a raw completion (no cap there), added to the FIM family's own stop tokens; the raw prompt
shows history as comments (``# Evaluation: Output: ...``), which the 1.5B model went on writing after its
code until the token limit, three times a round, also indented inside the frame's ``try:`` body."""


@runtime_checkable
class ToolkitCatalog(Protocol):
    """Anything that renders the toolkit stubs the model sees (the toolkits package provides one)."""

    def render_stubs(self) -> str:
        """The Python stubs of every granted toolkit."""
        ...


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """One prompt, ready for the model client.

    Attributes:
        purpose: ``thought``, ``code``, ``reflect`` or a custom purpose.
        protocol: ``chat`` or ``completion``.
        system: The system prompt (the static part for chat).
        user: The dynamic user prompt (segments, then the frame for code).
        messages: Chat messages (``system`` then ``user``); empty for ``completion``.
        text: The raw completion text (``completion`` only).
        completion_prefix: For FIM APIs that take ``prompt`` and ``suffix`` apart (Codestral's
            ``/v1/fim/completions``): everything before the hole.
        completion_suffix: Everything after the hole.
        frame: The FIM frame (code purpose only).
        tokens: The FIM markers used (code purpose only).
        stop: Stop strings for the request.
        static: The static part's text (prefix of ``system`` for chat, of ``text`` for completion).
        static_hash: SHA-256 hex of ``static``.
    """

    purpose: str
    protocol: str
    system: str
    user: str
    messages: tuple[dict[str, str], ...] = ()
    text: str | None = None
    completion_prefix: str | None = None
    completion_suffix: str | None = None
    frame: CodeFrame | None = None
    tokens: FimTokens | None = None
    stop: tuple[str, ...] = ()
    static: str = field(default="", repr=False)
    static_hash: str = ""

    def to_dict(self) -> dict[str, object]:
        """A JSON-able record (for the round record in the store)."""
        return {
            "purpose": self.purpose,
            "protocol": self.protocol,
            "messages": [dict(m) for m in self.messages],
            "text": self.text,
            "stop": list(self.stop),
            "static_hash": self.static_hash,
            "fim_family": self.tokens.family if self.tokens else None,
            "frame": {"prefix": self.frame.prefix, "suffix": self.frame.suffix} if self.frame else None,
        }


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stub_text(stubs: str | ToolkitCatalog) -> str:
    return stubs if isinstance(stubs, str) else stubs.render_stubs()


class BasePromptBuilder:
    """Common base: renders the system sections once, then a dynamic part per call.

    Subclasses set :attr:`purpose` (which ``system_output_<purpose>.j2`` describes the reply) and
    implement :meth:`dynamic`.

    Args:
        config: The prompt configuration.
        stubs: The toolkit stubs (text, or a :class:`ToolkitCatalog`), rendered once.
    """

    purpose: ClassVar[str] = ""

    def __init__(self, config: PromptConfig, *, stubs: str | ToolkitCatalog = "") -> None:
        self.config = config
        self.tokens = config.tokens()
        self.stubs = _stub_text(stubs).strip("\n")
        self.system = self._render_system()
        self.system_hash = _sha256(self.system)

    # -- static part -----------------------------------------------------------------------------

    def _section_template(self, section: str) -> str:
        if section in self.config.templates:
            return self.config.templates[section]
        if section == "output_format":
            return f"system_output_{self.purpose}.j2"
        return f"system_{section}.j2"

    def _template_variables(self) -> dict[str, Any]:
        instructions = self.config.instructions
        variables = dict(instructions.variables)
        return {
            "platform": self.config.platform,
            "role": instructions.text("system").strip(),
            "developer": instructions.text("developer").strip(),
            "variables": variables,
            "stubs": self.stubs,
            "tokens": self.tokens,
            "protocol": self.config.protocol,
            "purpose": self.purpose,
            "next_goal": self.config.next_goal,
            "layout": self.config.layout,
            "knowledge": list(self.config.knowledge),
            "experiences": list(self.config.experiences),
        }

    def _render_system(self) -> str:
        variables = self._template_variables()
        parts = []
        for section in self.config.sections:
            if section in self.config.overrides:
                text = substitute(self.config.overrides[section], variables["variables"], where=f"overrides.{section}")
            else:
                name = self._section_template(section)
                if name not in prompts.template_names():
                    raise PromptConfigError(
                        f"no template {name!r} for section {section!r} of the {self.purpose!r} prompt: add it to "
                        "prompts/ or set templates.{section} / overrides.{section}",
                        field=f"templates.{section}",
                    )
                text = prompts.render(name, **variables)
            if text.strip():
                parts.append(text.strip("\n"))
        return "\n\n".join(parts) + "\n"

    # -- dynamic part ----------------------------------------------------------------------------

    def build(
        self,
        history: SegmentHistory | Iterable[Segment],
        *,
        variables: Variables | None = None,
        goal: str | None = None,
    ) -> Prompt:
        """The prompt for the next step of ``history``.

        Args:
            history: The segments so far (round N's prompt: all earlier rounds + round N's segments).
            variables: Variables restored from earlier rounds, ``name -> (type, short repr)``.
            goal: The current goal (written in the frame header for code prompts).
        """
        if not isinstance(history, SegmentHistory):
            history = SegmentHistory(history)
        return self.dynamic(history, variables=variables, goal=goal)

    def dynamic(self, history: SegmentHistory, *, variables: Variables | None, goal: str | None) -> Prompt:
        """Build the prompt from the static system text and ``history`` (labelled segments + a cue)."""
        cue = prompts.render(f"request_{self.purpose}.j2", round_index=history.current_round + 1).strip("\n")
        rendered = history.render()
        user = f"{rendered}\n{cue}" if rendered else cue
        if self.config.protocol == "completion":
            text = f"{self.system}\n{user}\n"
            return Prompt(
                purpose=self.purpose,
                protocol="completion",
                system=self.system,
                user=user,
                text=text,
                static=self.system,
                static_hash=self.system_hash,
                stop=("\nPython:", "\nEvaluation:", "\nUser:"),
            )
        return self._chat(user)

    def _chat(self, user: str, **extra: Any) -> Prompt:
        return Prompt(
            purpose=self.purpose,
            protocol="chat",
            system=self.system,
            user=user,
            messages=({"role": "system", "content": self.system}, {"role": "user", "content": user}),
            static=self.system,
            static_hash=self.system_hash,
            **extra,
        )


class ThoughtPromptBuilder(BasePromptBuilder):
    """The Thought step: the model replies ``Thought: ...`` and ``Plan: ...``."""

    purpose = "thought"


class ReflectPromptBuilder(BasePromptBuilder):
    """After an Evaluation: the model replies ``NextGoal: ...`` (``done`` when finished) and ``Express:``."""

    purpose = "reflect"


class CmdPromptBuilder(BasePromptBuilder):
    """The code step: the FIM frame is the last user segment (chat) or the whole raw text (completion)."""

    purpose = "code"

    def __init__(self, config: PromptConfig, *, stubs: str | ToolkitCatalog = "") -> None:
        super().__init__(config, stubs=stubs)
        self._suffix_frame = build_frame(reraise=config.reraise)
        # the toolkit objects the code calls (the stubs' top-level classes; TypedDict result shapes are not objects)
        self._toolkit_names = _STUB_CLASS.findall(self.stubs)
        if config.protocol == "completion":
            # single-quote docstring: the toolkit stubs' double-quote docstrings then need no escaping
            single, double = "'" * 3, '"' * 3
            quote = single if single not in self.system else double
            body = self.system if quote == single else self.system.replace(double, '\\"' * 3)
            self._docstring = prompts.render("completion.j2", system=body, quote=quote)
            self._static = self.tokens.wrap(self._docstring, self._suffix_frame.suffix)
            # the static part is what comes before the dynamic history in the raw text
            cut = self._static.index(self._docstring) + len(self._docstring)
            self._static = self._static[:cut]
            self._static_hash = _sha256(self._static)

    def dynamic(self, history: SegmentHistory, *, variables: Variables | None, goal: str | None) -> Prompt:
        """The FIM prompt: segments so far, then the frame with this round's variables."""
        frame = build_frame(
            variables,
            imports=self.config.imports,
            goal=goal,
            reraise=self.config.reraise,
            max_repr=self.config.max_repr,
        )
        # decisive ones first: a hosted API takes only 4 (the model's end token, the frame's handler, a turn)
        stop = tuple(dict.fromkeys((*self.tokens.stop[:1], "\nexcept Exception as e:", *COMPLETION_STOP[:2],
                                    *self.tokens.stop, *COMPLETION_STOP)))  # fmt: skip
        if self.config.protocol == "completion":
            context = prompts.render("completion_history.j2", segments=_completion_rows(history))
            prefix = self._docstring + context + frame.completion_prefix
            text = self.tokens.wrap(prefix, frame.suffix)
            return Prompt(
                purpose=self.purpose,
                protocol="completion",
                system=self.system,
                user=context,
                text=text,
                completion_prefix=prefix,
                completion_suffix=frame.suffix,
                frame=frame,
                tokens=self.tokens,
                stop=stop,
                static=self._static,
                static_hash=self._static_hash,
            )
        if self.config.layout == "turns":
            return self._turns(history, frame)
        rendered = history.render()
        # A normal chat request (no model-specific FIM markers: a chat model reads those as text): the
        # program in a code block, the hole a placeholder line at the body's indentation.
        framed = prompts.render(
            "fim_chat.j2",
            prefix=frame.prefix,
            hole=frame.indent + CHAT_HOLE,
            suffix=frame.suffix,
            toolkits=self._toolkit_names,
        )
        user = f"{rendered}\n{framed}" if rendered else framed
        return self._chat(user.rstrip("\n"), frame=frame, tokens=self.tokens, stop=CHAT_STOP)

    def _turns(self, history: SegmentHistory, frame: CodeFrame) -> Prompt:
        """The ``turns`` layout: each round's code an assistant message, what followed it a user message.

        The program still runs inside ``frame`` (the variables header, ``try:``, the handler); the
        model sees only the header's comment lines, in the last user message, with what to reply.
        """
        messages: list[dict[str, str]] = [{"role": "system", "content": self.system}]
        said: list[str] = []  # the model's own words of the round (Thought, Plan) go with its code
        told: list[str] = []
        for segment in history:
            if segment.kind == SegmentKind.CODE:
                if told:
                    messages.append({"role": "user", "content": "\n".join(told)})
                    told = []
                code = segment.content.rstrip("\n")
                messages.append({"role": "assistant", "content": "\n".join([*said, f"```python\n{code}\n```"])})
                said = []
            elif segment.kind in (SegmentKind.THOUGHT, SegmentKind.PLAN):
                said.append(segment.render())
            else:
                told.extend(said)
                said = []
                told.append(segment.render())
        told.extend(said)
        header = "\n".join(line for line in frame.prefix.split("\n") if line.startswith("#"))
        asked = [s.content.strip() for s in history if s.kind == SegmentKind.USER] if self.config.restate_task else []
        cue = prompts.render(
            "turns_cue.j2",
            header=header,
            ran=any(s.kind == SegmentKind.CODE for s in history),
            task=asked[-1] if asked else "",
            toolkits=self._toolkit_names,
        ).strip("\n")
        messages.append({"role": "user", "content": "\n".join([*told, cue])})
        user = "\n".join(m["content"] for m in messages[1:])
        return Prompt(
            purpose=self.purpose,
            protocol="chat",
            system=self.system,
            user=user,
            messages=tuple(messages),
            frame=frame,
            tokens=self.tokens,
            stop=CHAT_STOP,
            static=self.system,
            static_hash=self.system_hash,
        )


def _completion_rows(history: SegmentHistory) -> list[dict[str, object]]:
    rows = []
    for segment in history:
        if segment.kind == SegmentKind.CODE:
            rows.append({"code": True, "label": segment.label, "lines": segment.content.rstrip().split("\n")})
        else:
            rows.append({"code": False, "label": segment.label, "lines": segment.content.rstrip().split("\n")})
    return rows


_DEFAULT_BUILDERS: dict[str, type[BasePromptBuilder]] = {
    "thought": ThoughtPromptBuilder,
    "code": CmdPromptBuilder,
    "reflect": ReflectPromptBuilder,
}


class SegmentBuilder:
    """Routes ``build(purpose, ...)`` to the prompt builder for that purpose (one instance each, cached).

    Args:
        config: The agent's prompt configuration.
        stubs: The toolkit stubs (text or a :class:`ToolkitCatalog`), rendered once and shared.
        builders: Extra or replacement builder classes by purpose.
    """

    def __init__(
        self,
        config: PromptConfig,
        *,
        stubs: str | ToolkitCatalog = "",
        builders: Mapping[str, type[BasePromptBuilder]] | None = None,
    ) -> None:
        self.config = config
        self.stubs = _stub_text(stubs)
        self._classes = {**_DEFAULT_BUILDERS, **(builders or {})}
        self._instances: dict[str, BasePromptBuilder] = {}

    @property
    def purposes(self) -> tuple[str, ...]:
        """The purposes this builder routes, sorted."""
        return tuple(sorted(self._classes))

    def builder(self, purpose: str) -> BasePromptBuilder:
        """The (cached) prompt builder for ``purpose``.

        Raises:
            PromptConfigError: no builder is registered for ``purpose``.
        """
        instance = self._instances.get(purpose)
        if instance is None:
            cls = self._classes.get(purpose)
            if cls is None:
                raise PromptConfigError(
                    f"no prompt builder for purpose {purpose!r}: use one of {list(self.purposes)} or register one "
                    "with SegmentBuilder(builders={...})",
                    field="purpose",
                )
            instance = self._instances[purpose] = cls(self.config, stubs=self.stubs)
        return instance

    def build(
        self,
        purpose: str,
        history: SegmentHistory | Iterable[Segment],
        *,
        variables: Variables | None = None,
        goal: str | None = None,
    ) -> Prompt:
        """Build the ``purpose`` prompt for ``history`` (see :meth:`BasePromptBuilder.build`)."""
        return self.builder(purpose).build(history, variables=variables, goal=goal)
