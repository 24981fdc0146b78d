"""``AgentSpec``: what the factory resolves from a blueprint and a host context.

Everything the agent runtime needs, resolved and typed: the runtime turns an ``AgentSpec`` into
a running agent; nothing here runs anything.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from codeact.engine.blueprint.issues import ValidationIssue
from codeact.engine.blueprint.modes import ThoughtMode
from codeact.engine.blueprint.templates import RenderedInstructions

if TYPE_CHECKING:
    from codeact.engine.blueprint.models import Blueprint

__all__ = [
    "AgentKind",
    "AgentSpec",
    "CodeActSettings",
    "CompactSettings",
    "DEFAULT_MAX_ROUND_SECONDS",
    "DEFAULT_ROUND_SECONDS",
    "FimMarkers",
    "HostContext",
    "KNOWLEDGE_DEFAULT_BUDGET",
    "KNOWLEDGE_DEFAULT_CHUNK_CHARS",
    "KNOWLEDGE_FOLDER_GLOBS",
    "KNOWLEDGE_KINDS",
    "KnowledgeSettings",
    "KnowledgeSourceSpec",
    "MemorySettings",
    "ModelOptions",
    "ModelSettings",
    "PluginRef",
    "RoutePurpose",
    "SandboxLimitSettings",
    "SandboxSettings",
    "SessionSettings",
    "SubagentSpec",
    "ToolRef",
    "ToolkitGrant",
]


DEFAULT_ROUND_SECONDS: Final = 60.0
"""Seconds of code per round unless the blueprint sets ``workflow.codeact.roundSeconds`` (host time not counted)."""

DEFAULT_MAX_ROUND_SECONDS: Final = 600.0
"""The host's cap on a blueprint's round limit unless the host sets its own (``--max-round-seconds``)."""


@dataclass(frozen=True, kw_only=True)
class HostContext:
    """What the host supplies to the factory; a blueprint file can set none of it.

    The runtime types (model client, registry, store, ...) are defined by the engine runtime,
    so they are typed loosely here.

    Attributes:
        model_client: The model client the agent calls (required by the factory).
        toolkit_registry: Resolves ``toolkits[].ref`` names; when it supports ``in``, unknown
            names are refused with ``blueprint.toolkit.notFound``.
        store: The session store.
        sandbox_provider: Creates sandboxes for sessions.
        approval_callback: Asked when a tool call needs approval.
        hooks: Before/after agent and model hooks.
        interceptors: Model and tool call interceptors.
        allow_sandbox_declaration: Accept a blueprint's ``sandbox`` declaration
            (``--allow-sandbox-declaration``); refused by default.
        strict: Make the validator's warnings errors (``--strict``): the factory refuses a
            blueprint with any warning (``blueprint.validation.strict``).
        allowed_imports: Modules a blueprint's ``sandbox.imports`` may add to the sandbox's
            import allow-list; None allows none.
        work_dir: ``work_dir`` for instruction templates (default: the current directory).
        now: ``now`` for instruction templates (default: the current local time).
        max_round_seconds: The most seconds of code per round a blueprint may ask for
            (``workflow.codeact.roundSeconds``, ``sandbox.limits.timeoutSeconds``;
            ``--max-round-seconds``; None: 600 s); a blueprint asking more is refused.
        call_budgets: The host's caps on toolkit calls and bridge bytes per round and per run
            (``toolkits.CallBudgets``; None: ``toolkits.DEFAULT_BUDGETS``); they are also the budgets of a
            blueprint that sets none, and a blueprint asking more (``workflow.codeact.budgets``) is refused.
        offered_toolkits: Names of the toolkits the caller loaded for this one agent (``codeact run
            --toolkit``, ``Agent.from_blueprint(toolkits=[...])``). Each must be granted by the
            blueprint or one of its sub-agents, else the factory refuses it with
            ``blueprint.toolkit.notGranted``: loaded but not granted, every call to it would fail.
    """

    model_client: object | None = None
    toolkit_registry: object | None = None
    store: object | None = None
    sandbox_provider: object | None = None
    approval_callback: Callable[..., Any] | None = None
    hooks: tuple[object, ...] = ()
    interceptors: tuple[object, ...] = ()
    allow_sandbox_declaration: bool = False
    strict: bool = False
    allowed_imports: frozenset[str] | None = None
    work_dir: Path | None = None
    now: _dt.datetime | None = None
    max_round_seconds: float | None = None
    call_budgets: object | None = None
    offered_toolkits: tuple[str, ...] = ()


AgentKind = Literal["react", "codeact"]
RoutePurpose = Literal["code", "thought", "utility"]


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Model options mapped from ``model.options`` (ai4j's option mapping); None = provider default."""

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    reasoning: object = None
    tool_choice: object = None
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    user: str | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    vision: bool | None = None  # the model takes image parts (None: litellm's model info decides); not sent

    def as_kwargs(self) -> dict[str, object]:
        """OpenAI-style keyword arguments (the names litellm's ``completion()`` takes), None omitted.

        ``max_output_tokens`` becomes ``max_tokens``; a string ``reasoning`` (or a mapping with an
        ``effort`` key) becomes ``reasoning_effort``.
        """
        kwargs: dict[str, object] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_output_tokens,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "store": self.store,
            "user": self.user,
            "seed": self.seed,
            "stop": list(self.stop) if self.stop is not None else None,
        }
        if isinstance(self.reasoning, str):
            kwargs["reasoning_effort"] = self.reasoning
        elif isinstance(self.reasoning, Mapping) and isinstance(self.reasoning.get("effort"), str):
            kwargs["reasoning_effort"] = self.reasoning["effort"]
        return {key: value for key, value in kwargs.items() if value is not None}


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """One model selection: provider, model name, host profile (metadata), options."""

    provider: str
    model: str
    profile: str | None = None
    options: ModelOptions = field(default_factory=ModelOptions)
    context_window: int | None = None


@dataclass(frozen=True, kw_only=True)
class ToolRef:
    """``tools[]``: a tool reference for the host's tool registry."""

    ref: str
    approval: str | None = None
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PluginRef:
    """``plugins[]``: plugin intent; the factory never installs or scans plugins."""

    id: str
    enabled: bool = True
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolkitGrant:
    """``toolkits[]``: a toolkit granted by registry name.

    Attributes:
        ref: The name the toolkit is registered under.
        operations: The allowed operations, or None for all of them.
        approval: The approval policy (always, safe, auto, ask, manual, never, deny) or None.
        config: Free-form toolkit configuration.
    """

    ref: str
    operations: tuple[str, ...] | None = None
    approval: str | None = None
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MemorySettings:
    """``session.memory``: the agent's memory (resolved by ``codeact.engine.memory.memory_config``; docs/memory.md)."""

    enabled: bool = False
    scope: str | None = None
    store: str | None = None
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CompactSettings:
    """``session.compact``: when and how to compact older rounds."""

    enabled: bool = False
    context_ratio: float | None = None
    max_turns: int | None = None
    strategy: str | None = None
    preserve: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SessionSettings:
    """``session``: memory and compaction settings (None when not declared)."""

    memory: MemorySettings | None = None
    compact: CompactSettings | None = None


@dataclass(frozen=True, kw_only=True)
class SandboxLimitSettings:
    """``sandbox.limits``; None means the backend's default."""

    timeout_seconds: float | None = None
    memory_mb: int | None = None
    cpus: float | None = None
    cpu_seconds: int | None = None
    pids: int | None = None
    output_bytes: int | None = None
    artifact_bytes: int | None = None
    round_artifact_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class SandboxSettings:
    """The sandbox the blueprint declared (accepted by the host) or the host's defaults.

    Attributes:
        declared: True when the blueprint declared a sandbox (and the host allowed it).
        backend: ``subprocess`` or ``docker``; None lets the host choose.
        provider: ai4j-style provider name (host metadata), if any.
        profile: Host sandbox profile name, if any.
        limits: Resource limits requested by the blueprint.
        imports: Extra modules for the import allow-list, already checked against the host's
            ``allowed_imports`` (a blueprint cannot widen the policy by itself).
        config: Free-form sandbox configuration.
        packages: pip requirement strings the sandbox's environment installs (``sandbox.packages``).
        preset: A package preset (``sandbox.preset``, e.g. ``datascience``), or None.
        runtime: Docker backend only: ``runc`` or ``gvisor`` (gVisor's user-space kernel); None: runc.
    """

    declared: bool = False
    backend: Literal["subprocess", "docker"] | None = None
    provider: str | None = None
    profile: str | None = None
    limits: SandboxLimitSettings = field(default_factory=SandboxLimitSettings)
    imports: tuple[str, ...] = ()
    config: Mapping[str, object] = field(default_factory=dict)
    packages: tuple[str, ...] = ()
    preset: str | None = None
    runtime: Literal["runc", "gvisor"] | None = None


@dataclass(frozen=True, kw_only=True)
class FimMarkers:
    """Explicit fill-in-the-middle markers (``workflow.codeact.fim.tokens``)."""

    prefix: str
    suffix: str
    middle: str


@dataclass(frozen=True, kw_only=True)
class CodeActSettings:
    """``workflow.codeact`` with defaults resolved.

    Attributes:
        thought: ``separate`` (a thought call, then a code call), ``inline`` (one call) or ``off``.
        protocol: ``chat`` (FIM frame in a chat message) or ``completion`` (raw FIM tokens).
        layout: How a chat code prompt lays out the rounds: ``frame`` (one user message ending with the
            round's program) or ``turns`` (each round's code an assistant message, its output the next
            user message; small models follow it far better); None: the model's default (``turns``
            for the registry's local models, else ``frame``).
        fim_family: Model family whose FIM token table to use, or None to infer it.
        fim_markers: Explicit FIM markers overriding the family table, or None.
        self_check: Whether a self-check model call judges completion.
        max_self_checks: How many "not done" verdicts may re-enter the loop.
        max_repeats: The same code or error this many times in a row ends the run.
        round_seconds: Seconds of code per round (``workflow.codeact.roundSeconds``, else the declared
            ``sandbox.limits.timeoutSeconds``, else 60); time waiting on toolkit calls is not counted.
        budgets: The toolkit calls and bridge bytes a round and a run may use (``toolkits.CallBudgets``;
            ``workflow.codeact.budgets`` under the host's caps; None: the bridge's defaults).
        answer_variable: A round that runs without error and sets this variable (without calling
            ``system.finish``) asks the model one confirming question; a yes finishes the run with the
            variable's value (``workflow.codeact.answerVariable``; None: off). See docs/finishing.md.
        final_answer: Whether a reply repeating the last successful round's code, a stuck run and a run
            at ``maxTurns`` end with the final-answer step (the model asked once, plainly, for the answer
            from what it has seen) instead of running the code again or ending with no answer.
        restate_task: Whether the ``turns`` layout's last user message says the task again just above
            what to reply (``The task: ...``), so a small model reads "if the output above answers the
            task" next to the task; None: on unless ``thought`` is ``inline`` (whose replies state their
            own next goal). See docs/eval.md for what it measured.
    """

    thought: ThoughtMode = ThoughtMode.SEPARATE
    protocol: Literal["chat", "completion"] = "chat"
    layout: Literal["frame", "turns"] | None = None
    fim_family: str | None = None
    fim_markers: FimMarkers | None = None
    self_check: bool = False
    max_self_checks: int = 2
    max_repeats: int = 3
    round_seconds: float = DEFAULT_ROUND_SECONDS
    budgets: Any | None = None
    answer_variable: str | None = "answer"
    final_answer: bool = True
    restate_task: bool | None = None


KNOWLEDGE_KINDS: Final = ("domain", "constraint")
KNOWLEDGE_DEFAULT_BUDGET: Final = 1000
"""Estimated tokens (4 characters each) of knowledge a run's prompt gets unless ``knowledge.budget`` says."""
KNOWLEDGE_DEFAULT_CHUNK_CHARS: Final = 1200
"""The most characters of one retrievable chunk unless ``knowledge.chunkChars`` says."""
KNOWLEDGE_FOLDER_GLOBS: Final = ("*.md", "*.markdown", "*.txt", "*.rst")
"""The files a ``knowledge.sources[].folder`` contributes (recursively) unless its ``glob`` says."""


@dataclass(frozen=True, kw_only=True)
class KnowledgeSourceSpec:
    """One ``knowledge.sources[]`` entry, resolved.

    Attributes:
        label: How listings and messages name it (``text[0]``, or the path relative to the blueprint).
        kind: ``domain`` (retrieved when relevant) or ``constraint`` (always included).
        text: The inline text, for a ``text`` entry.
        path: The file or folder (absolute), for a ``file`` / ``folder`` entry.
        folder: ``path`` is a folder.
        title: A title for an inline text (shown before its chunks and indexed with them).
        glob: The folder's file pattern (None: :data:`KNOWLEDGE_FOLDER_GLOBS`).
    """

    label: str
    kind: Literal["domain", "constraint"] = "domain"
    text: str | None = None
    path: Path | None = None
    folder: bool = False
    title: str | None = None
    glob: str | None = None

    def files(self) -> list[Path]:
        """The files the source reads: its file, or its folder's matching files (sorted; hidden ones left out)."""
        if self.path is None:
            return []
        if not self.folder:
            return [self.path]
        found: set[Path] = set()
        for pattern in (self.glob,) if self.glob else KNOWLEDGE_FOLDER_GLOBS:
            for path in self.path.rglob(pattern):
                if path.is_file() and not any(part.startswith(".") for part in path.relative_to(self.path).parts):
                    found.add(path)
        return sorted(found)


@dataclass(frozen=True, kw_only=True)
class KnowledgeSettings:
    """``knowledge``: the sources and the bounds of what a run retrieves from them (docs/knowledge.md)."""

    sources: tuple[KnowledgeSourceSpec, ...] = ()
    budget: int = KNOWLEDGE_DEFAULT_BUDGET
    chunk_chars: int = KNOWLEDGE_DEFAULT_CHUNK_CHARS


@dataclass(frozen=True, kw_only=True)
class SubagentSpec:
    """A fixed sub-agent: its name, what it is for, and its own resolved spec."""

    name: str
    description: str
    path: Path
    spec: AgentSpec


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """An agent, fully resolved from a blueprint and a host context, ready for the runtime.

    Attributes:
        id: The blueprint id.
        name: Display name, if any.
        version: The blueprint version (``ai4j.agent/v1`` or ``codeact.agent/v1``).
        kind: ``codeact`` for ``workflow.mode: codeact``, else ``react``.
        model: The main model with mapped options.
        routes: Per-purpose models (``code``/``thought``/``utility``) the blueprint declared;
            use :meth:`model_for` to fall back to the main model.
        instructions: ``instructions.system``/``developer`` after template rendering.
        variables: ``instructions.variables`` (for prompt sections that want them).
        tools: ``tools[]`` references.
        toolkits: ``toolkits[]`` grants.
        plugins: ``plugins[]`` intents.
        subagents: Fixed sub-agents with their specs.
        session: Memory and compaction settings.
        sandbox: Sandbox settings.
        max_turns: Upper bound on rounds (``workflow.maxTurns`` or the default 20).
        run_seconds: Wall-clock seconds the whole run may take (``workflow.runSeconds``); None: no limit.
        codeact: CodeAct loop settings (defaults when ``kind`` is ``react``).
        knowledge: The knowledge sources (None when the blueprint declares none).
        blueprint_hash: sha256 of the canonical JSON of the merged blueprint (sub-agents by hash).
        source_path: The blueprint file, if loaded from one.
        extends: The base blueprints merged in, nearest first.
        warnings: The validator's warnings.
        blueprint: The merged blueprint this spec was built from.
        host: The host context (model client, registry, store, sandbox provider, callbacks).
    """

    id: str
    name: str | None
    version: str
    kind: AgentKind
    model: ModelSettings
    routes: Mapping[RoutePurpose, ModelSettings]
    instructions: RenderedInstructions
    variables: Mapping[str, object]
    tools: tuple[ToolRef, ...]
    toolkits: tuple[ToolkitGrant, ...]
    plugins: tuple[PluginRef, ...]
    subagents: tuple[SubagentSpec, ...]
    session: SessionSettings
    sandbox: SandboxSettings
    max_turns: int
    codeact: CodeActSettings
    blueprint_hash: str
    source_path: Path | None
    extends: tuple[str, ...]
    warnings: tuple[ValidationIssue, ...]
    blueprint: Blueprint = field(repr=False, compare=False)
    host: HostContext = field(repr=False, compare=False)
    run_seconds: float | None = None
    knowledge: KnowledgeSettings | None = None

    def model_for(self, purpose: RoutePurpose) -> ModelSettings:
        """The model for ``purpose``: its route if declared, else the main model."""
        return self.routes.get(purpose, self.model)
