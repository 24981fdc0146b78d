"""The flags of ``codeact run``: declared once, gathered in one :class:`RunFlags` value, mapped once.

:func:`build_options` is the one place the flags become the engine's
:class:`~codeact.engine.agent.BuildOptions`; :func:`run_kwargs` turns ``--tag``/``--meta``/``--context`` into
``Agent.run``'s ``config`` and ``context``; :meth:`RunFlags.resume_options` is what the printed resume
command repeats. The options ``run`` shares with other commands are in ``_options.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypedDict, cast

import typer

from codeact.engine.cli._options import Usage, call_budgets
from codeact.engine.cli._resume import OptionValue

if TYPE_CHECKING:
    from codeact.engine.agent import BuildOptions, RunConfig
    from codeact.engine.agent.support import Approver

__all__ = ["RunFlags", "RunKwargs", "build_options", "run_kwargs"]

# The options only `run` takes (its shared ones are _options.py's).
Input = Annotated[str, typer.Option("--input", "-i", "--prompt", help="The user's message (alias --prompt).")]
Model = Annotated[str | None, typer.Option("--model", help="litellm model, e.g. openai/gpt-4.1-mini.")]
Provider = Annotated[str | None, typer.Option("--provider", help="Model provider (openai-compatible, ...).")]
Profile = Annotated[str | None, typer.Option("--profile", help="A model profile from profiles.yaml.")]
Protocol = Annotated[
    str | None,
    typer.Option("--protocol", help="chat, completion (raw FIM) or responses (litellm's Responses API route)."),
]
ApiKey = Annotated[
    str | None,
    typer.Option("--api-key", help="The model's API key (held by the model client only; never recorded)."),
]
Session = Annotated[str | None, typer.Option("--session", help="Continue (or name) this session.")]
Sandbox = Annotated[str | None, typer.Option("--sandbox", help="subprocess or docker.")]
Runtime = Annotated[
    str | None, typer.Option("--runtime", help="docker only: runc or gvisor (default: the blueprint's, runc).")
]
ApproveAll = Annotated[bool, typer.Option("--approve-all", help="Approve every approval request.")]
DenyAll = Annotated[bool, typer.Option("--deny-all", help="Deny every approval request.")]
Json = Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")]
Trace = Annotated[
    Path | None, typer.Option("--trace", help="Write the run's OpenTelemetry spans to this file (JSON lines).")
]
User = Annotated[
    str | None, typer.Option("--user", help="Who the run is for (memory: history summaries, experiences).")
]
Queue = Annotated[
    str | None, typer.Option("--queue", help="Enqueue on this Redis (codeact worker runs it); prints the run id.")
]
Detach = Annotated[bool, typer.Option("--detach", help="With --queue: print the run id and return.")]
Strict = Annotated[
    bool, typer.Option("--strict", help="Refuse the blueprint if the validator warns (exit 1), e.g. a typo.")
]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="A tag of the run (repeatable).")]
Meta = Annotated[list[str] | None, typer.Option("--meta", help="Run metadata KEY=VALUE (JSON or text; repeatable).")]
ContextFile = Annotated[
    Path | None, typer.Option("--context", help="JSON object file: where the user is, for the prompt.")
]


@dataclass(frozen=True, kw_only=True)
class RunFlags:
    """The flags of one ``codeact run`` (each field is the option of the same name in :func:`run_command`)."""

    file: Path
    input: str = ""
    model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    profile: str | None = None
    protocol: str | None = None
    api_key: str | None = None
    session: str | None = None
    store: str | None = None
    sandbox: str | None = None
    isolation: str = "bwrap"
    runtime: str | None = None
    allow: bool = False
    max_round_seconds: float | None = None
    max_round_calls: int | None = None
    max_run_calls: int | None = None
    max_round_bytes: int | None = None
    max_run_bytes: int | None = None
    toolkits: list[str] | None = None
    approve_all: bool = False
    deny_all: bool = False
    json_output: bool = False
    artifacts: Path | None = None
    trace: Path | None = None
    user: str | None = None
    queue: str | None = None
    detach: bool = False
    strict: bool = False
    tag: list[str] | None = None
    meta: list[str] | None = None
    context_file: Path | None = None

    def resume_options(self) -> list[tuple[str, OptionValue]]:
        """The options to repeat in the command that resumes the session (``--api-key`` is never echoed)."""

        def number(value: float | None) -> str | None:
            return f"{value:g}" if value is not None else None

        return [
            *((flag, getattr(self, name)) for flag, name in _ROUTE_FLAGS),
            ("--store", self.store),
            ("--sandbox", self.sandbox),
            ("--isolation", None if self.isolation == "bwrap" else self.isolation),
            ("--runtime", self.runtime),
            ("--allow-sandbox-declaration", self.allow),
            ("--max-round-seconds", number(self.max_round_seconds)),
            *((f"--{name.replace('_', '-')}", number(getattr(self, name))) for name in _BUDGET_FLAGS),
            ("--toolkit", list(self.toolkits or [])),
            ("--approve-all", self.approve_all),
            ("--deny-all", self.deny_all),
            ("--json", self.json_output),
            ("--artifacts", str(self.artifacts) if self.artifacts is not None else None),
            ("--trace", str(self.trace) if self.trace is not None else None),
            ("--user", self.user),
            ("--tag", list(self.tag or [])),
            ("--meta", list(self.meta or [])),
            ("--context", str(self.context_file) if self.context_file is not None else None),
        ]


_ROUTE_FLAGS = (
    ("--model", "model"),
    ("--provider", "provider"),
    ("--base-url", "base_url"),
    ("--profile", "profile"),
    ("--protocol", "protocol"),
)
_BUDGET_FLAGS = ("max_round_calls", "max_run_calls", "max_round_bytes", "max_run_bytes")


class RunKwargs(TypedDict, total=False):
    """``Agent.run``'s ``config`` and ``context``, as ``--tag``/``--meta`` and ``--context`` give them."""

    config: RunConfig
    context: dict[str, object]


def run_kwargs(tags: list[str], meta: list[str], context_file: Path | None) -> RunKwargs:
    """``Agent.run``'s ``config`` and ``context`` from ``--tag``, ``--meta KEY=VALUE`` and ``--context FILE``."""
    from codeact.engine.agent import RunConfig
    from codeact.engine.errors import CodeactError

    out: RunKwargs = {}
    metadata: dict[str, object] = {}
    for item in meta:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise Usage(f"--meta takes KEY=VALUE, not {item!r}")
        try:
            metadata[key.strip()] = json.loads(raw)
        except ValueError:
            metadata[key.strip()] = raw
    if tags or metadata:
        try:
            out["config"] = RunConfig(tags=tags, metadata=metadata)
        except CodeactError as exc:
            raise Usage(exc.message, exc.code) from None
    if context_file is not None:
        try:
            context = json.loads(context_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Usage(f"--context {context_file}: not a readable JSON file: {exc}") from None
        if not isinstance(context, dict):
            raise Usage(f"--context {context_file}: the file must hold a JSON object, not {type(context).__name__}")
        out["context"] = context
    return out


def build_options(flags: RunFlags, approve: Approver, *, stream: bool) -> BuildOptions:
    """The one mapping of the flags onto :class:`~codeact.engine.agent.BuildOptions`.

    Raises:
        Usage: A flag has a value outside its choices, or two flags exclude each other.
    """
    from codeact.engine.agent import BuildOptions

    _choice("--sandbox", flags.sandbox, ("subprocess", "docker"))
    _choice("--isolation", flags.isolation, ("bwrap", "process"), optional=False)
    _choice("--runtime", flags.runtime, ("runc", "gvisor"))
    _choice("--protocol", flags.protocol, ("chat", "completion", "responses"))
    if flags.approve_all and flags.deny_all:
        raise Usage("--approve-all and --deny-all exclude each other: pass one")
    return BuildOptions(
        model=flags.model,
        provider=flags.provider,
        base_url=flags.base_url,
        profile=flags.profile,
        protocol=cast("Literal['chat', 'completion', 'responses'] | None", flags.protocol),
        api_key=flags.api_key,
        store=flags.store,
        sandbox=cast("Literal['subprocess', 'docker'] | None", flags.sandbox),
        isolation=cast("Literal['bwrap', 'process']", flags.isolation),
        runtime=cast("Literal['runc', 'gvisor'] | None", flags.runtime),
        allow_sandbox_declaration=flags.allow,
        max_round_seconds=flags.max_round_seconds,
        call_budgets=call_budgets(
            round_calls=flags.max_round_calls,
            run_calls=flags.max_run_calls,
            round_bytes=flags.max_round_bytes,
            run_bytes=flags.max_run_bytes,
        ),
        strict=flags.strict,
        approver=approve,
        stream=stream,
        user=flags.user,
    )


def _choice(flag: str, value: str | None, choices: tuple[str, ...], *, optional: bool = True) -> None:
    if (value is None and optional) or value in choices:
        return
    names = [repr(c) for c in choices]
    listed = f"{', '.join(names[:-1])} or {names[-1]}"
    raise Usage(f"{flag} must be {listed}, got {value!r}")
