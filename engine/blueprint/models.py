"""The blueprint data model: one pydantic model for ``ai4j.agent/v1`` and ``codeact.agent/v1``.

Field names are snake_case in Python and camelCase in YAML (``maxTurns``). Fields that only exist
in ``codeact.agent/v1`` are listed in each model's ``codeact_only`` class variable; in an
``ai4j.agent/v1`` file they are unknown fields (a warning), exactly as ai4j treats them.

Trust decisions (accepting a sandbox declaration, widening the sandbox's import allow-list) are
never fields here: they belong to the host (:class:`codeact.engine.blueprint.factory.HostContext`).

Reading one (``load_path``, ``load_text``, ``load_stream``; ``Blueprint.from_*`` call them) lives
here too, after the model. ``load_*`` parse safe YAML (duplicate keys refused), check types with
ai4j's codes and locations, follow ``extend`` for ``codeact.agent/v1`` and load the declared
sub-agents and flow agents. A kimi-cli agent file (``version: 1`` with an ``agent:`` block) is
resolved by :mod:`codeact.engine.blueprint.kimi` first and then loads as a ``codeact.agent/v1`` document.
Problems that make the document unreadable raise :class:`~codeact.engine.errors.BlueprintLoadError`
(ai4j-compatible); problems with inheritance or sub-agents are recorded on the blueprint and
reported by the validator.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Annotated, Any, ClassVar, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from codeact.engine.blueprint._coerce import coerce_document
from codeact.engine.blueprint._document import AI4J_VERSION, CODEACT_VERSION, SUPPORTED_VERSIONS, UnknownField
from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.inheritance import peek_version, read_blueprint_text, resolve_inheritance, shown_path
from codeact.engine.blueprint.issues import ValidationIssue
from codeact.engine.blueprint.kimi import KimiPrompt, is_kimi_document, kimi_to_codeact
from codeact.engine.blueprint.modes import WorkflowMode
from codeact.engine.errors import BlueprintLoadError

__all__ = [
    "AI4J_VERSION",
    "Blueprint",
    "CODEACT_VERSION",
    "CodeActBlock",
    "CompactBlock",
    "CompactTrigger",
    "FimBlock",
    "FimTokens",
    "FlowAgentEntry",
    "FlowBlock",
    "InstructionsBlock",
    "KnowledgeBlock",
    "KnowledgeSource",
    "LoopBlock",
    "LoopCondition",
    "MAX_SUBAGENT_DEPTH",
    "MemoryBlock",
    "ModelBlock",
    "ModelRoute",
    "ModelRoutes",
    "PluginEntry",
    "PromptBlock",
    "SUPPORTED_VERSIONS",
    "SandboxBlock",
    "SandboxLimits",
    "SessionBlock",
    "SubagentEntry",
    "ToolEntry",
    "ToolkitEntry",
    "UnknownField",
    "WorkflowBlock",
    "load_path",
    "load_stream",
    "load_text",
]


def _none_to_list(value: Any) -> Any:
    return [] if value is None else value


def _none_to_dict(value: Any) -> Any:
    return {} if value is None else value


_Options = Annotated[dict[str, Any], BeforeValidator(_none_to_dict)]


class _Block(BaseModel):
    """Common configuration: camelCase aliases, immutable, no stray keys (the loader filters them)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    codeact_only: ClassVar[frozenset[str]] = frozenset()
    # True for a block that decides what the model (and its code) may do: a toolkit or tool grant,
    # the sandbox and its limits. An unknown key there is an error in every version (fail closed),
    # because ignoring it would run with a default the author meant to change (issue 35).
    fail_closed: ClassVar[bool] = False


class ModelRoute(_Block):
    """A per-purpose model (``model.routes.code`` / ``thought`` / ``utility``)."""

    provider: str | None = None
    model: str | None = None
    options: _Options = Field(default_factory=dict)


class ModelRoutes(_Block):
    """Per-purpose model routes; a purpose without a route uses the main model."""

    code: ModelRoute | None = None
    thought: ModelRoute | None = None
    utility: ModelRoute | None = None


class ModelBlock(_Block):
    """``model``: provider, model or host profile, options, and (codeact) routes."""

    codeact_only: ClassVar[frozenset[str]] = frozenset({"routes", "contextWindow"})

    provider: str | None = None
    profile: str | None = None
    model: str | None = None
    options: _Options = Field(default_factory=dict)
    routes: ModelRoutes | None = None
    context_window: int | None = None


class InstructionsBlock(_Block):
    """``instructions``: system and developer text and template variables."""

    system: str | None = None
    developer: str | None = None
    variables: _Options = Field(default_factory=dict)


class PluginEntry(_Block):
    """``plugins[]``: a plugin intent (never installed or scanned by the factory)."""

    id: str | None = None
    enabled: bool | None = None
    config: _Options = Field(default_factory=dict)


class ToolEntry(_Block):
    """``tools[]``: a tool reference resolved by the host's registry."""

    fail_closed: ClassVar[bool] = True

    ref: str | None = None
    approval: str | None = None
    config: _Options = Field(default_factory=dict)


class ToolkitEntry(_Block):
    """``toolkits[]`` (codeact): a toolkit granted by registry name, optionally limited to some operations."""

    fail_closed: ClassVar[bool] = True

    ref: str | None = None
    operations: list[str | None] | None = None
    approval: str | None = None
    config: _Options = Field(default_factory=dict)
    mcp: dict[str, Any] | None = None  # an MCP server as the toolkit (toolkits.mcp), checked by the validator
    # Remote A2A agents as the toolkit's operations (toolkits.a2a); the alias keeps camelCase from making it "a2A".
    a2a: dict[str, Any] | None = Field(default=None, alias="a2a")


class SubagentEntry(_Block):
    """``subagents.<name>`` (codeact): a fixed sub-agent blueprint and what it is good at."""

    path: str | None = None
    description: str | None = None


class MemoryBlock(_Block):
    """``session.memory``."""

    enabled: bool | None = None
    scope: str | None = None
    store: str | None = None
    config: _Options = Field(default_factory=dict)


class CompactTrigger(_Block):
    """``session.compact.trigger``."""

    context_ratio: float | None = None
    max_turns: int | None = None


class CompactBlock(_Block):
    """``session.compact``."""

    enabled: bool | None = None
    trigger: CompactTrigger | None = None
    strategy: str | None = None
    preserve: Annotated[list[str | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)


class SessionBlock(_Block):
    """``session``: memory and compaction intent."""

    memory: MemoryBlock | None = None
    compact: CompactBlock | None = None


class SandboxLimits(_Block):
    """``sandbox.limits`` (codeact): resource limits for the sandbox."""

    fail_closed: ClassVar[bool] = True

    timeout_seconds: float | None = None
    memory_mb: int | None = None
    cpus: float | None = None
    cpu_seconds: int | None = None  # CPU seconds per round (RLIMIT_CPU); the runtime dies past it
    pids: int | None = None
    output_bytes: int | None = None
    artifact_bytes: int | None = None
    round_artifact_bytes: int | None = None


class SandboxBlock(_Block):
    """``sandbox``: a declaration the host must accept explicitly."""

    fail_closed: ClassVar[bool] = True

    codeact_only: ClassVar[frozenset[str]] = frozenset(
        {"backend", "limits", "imports", "packages", "preset", "runtime"}
    )

    enabled: bool | None = None
    provider: str | None = None
    profile: str | None = None
    config: _Options = Field(default_factory=dict)
    backend: str | None = None
    limits: SandboxLimits | None = None
    imports: list[str | None] | None = None
    packages: list[str | None] | None = None
    preset: str | None = None
    runtime: str | None = None


class FimTokens(_Block):
    """``workflow.codeact.fim.tokens``: explicit fill-in-the-middle markers."""

    prefix: str | None = None
    suffix: str | None = None
    middle: str | None = None


class FimBlock(_Block):
    """``workflow.codeact.fim``: a model family's FIM token table, or explicit tokens."""

    family: str | None = None
    tokens: FimTokens | None = None


def _yaml_off(value: Any) -> Any:
    # YAML 1.1 reads an unquoted ``off`` as false (the loader coerces it to "false"): it means "off".
    return "off" if value is False or value == "false" else value


class BudgetsBlock(_Block):
    """``workflow.codeact.budgets``: the toolkit calls and bridge bytes a round and a run may use (docs/limits.md)."""

    round_calls: int | None = None
    run_calls: int | None = None
    round_bytes: int | None = None
    run_bytes: int | None = None


class CodeActBlock(_Block):
    """``workflow.codeact`` (codeact): how the CodeAct loop talks to the model."""

    thought: Annotated[str | None, BeforeValidator(_yaml_off)] = None
    protocol: str | None = None
    layout: str | None = None  # chat code prompts: frame (default) or turns
    fim: FimBlock | None = None
    self_check: bool | None = None
    max_self_checks: int | None = None
    max_repeats: int | None = None
    round_seconds: float | None = None  # seconds of code per round (waiting on the host not counted)
    budgets: BudgetsBlock | None = None  # toolkit calls and bridge bytes per round / per run, under the host's caps
    answer_variable: Annotated[str | None, BeforeValidator(_yaml_off)] = None  # the finishing protocol
    final_answer: bool | None = None
    restate_task: bool | None = None  # the turns layout says the task again above what to reply (None: auto)


class WorkflowBlock(_Block):
    """``workflow``: ``react`` (default) or ``codeact``, the round limit and the run's time limit."""

    codeact_only: ClassVar[frozenset[str]] = frozenset({"codeact", "runSeconds"})

    mode: str | None = None
    max_turns: int | None = None
    codeact: CodeActBlock | None = None
    run_seconds: float | None = None  # wall-clock seconds of the whole run; None: no limit

    @property
    def workflow_mode(self) -> WorkflowMode | None:
        """``mode`` as an enum (blanks ignored); None when unset (or not a mode: the validator refuses it)."""
        return WorkflowMode.of(self.mode)


class KnowledgeSource(_Block):
    """``knowledge.sources[]`` (codeact): one of ``text``, ``file`` or ``folder``, and its ``kind``.

    ``kind`` is ``domain`` (the default: included when relevant to the task) or ``constraint`` (rules
    the agent must follow: always included). ``glob`` picks a folder's files (default: Markdown, text
    and reStructuredText files, recursively).
    """

    text: str | None = None
    file: str | None = None
    folder: str | None = None
    kind: str | None = None
    title: str | None = None
    glob: str | None = None


class KnowledgeBlock(_Block):
    """``knowledge`` (codeact): sources retrieved per task into the prompt's Knowledge section.

    A bare list is short for ``{sources: [...]}``. ``budget`` bounds the section (estimated tokens,
    4 characters each), ``chunkChars`` the size of one retrievable chunk.
    """

    list_shorthand: ClassVar[str] = "sources"

    sources: Annotated[list[KnowledgeSource | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)
    budget: int | None = None
    chunk_chars: int | None = None


class FlowAgentEntry(_Block):
    """``flow.agents[]`` (codeact): a sub-agent blueprint of a flow and how its result is kept."""

    path: str | None = None
    name: str | None = None
    description: str | None = None
    output_key: str | None = None
    include_contents: bool | None = None
    return_reasoning_contents: bool | None = None
    when: str | None = None  # conditional flows: a condition on the flow's state (engine/blueprint/conditions.py)


class LoopCondition(_Block):
    """``flow.loop.condition``: a predicate over the iteration's result (as text); stop when true."""

    contains: str | None = None
    equals: str | None = None
    matches: str | None = None


class LoopBlock(_Block):
    """``flow.loop``: ``count``, ``condition`` or ``array`` (exactly one)."""

    count: int | None = None
    condition: LoopCondition | None = None
    array: bool | None = None
    max_iterations: int | None = None


class FlowBlock(_Block):
    """``flow`` (codeact, ``workflow.mode: flow``): a sequential, conditional, parallel, routing or loop flow."""

    kind: str | None = None
    description: str | None = None
    instruction: str | None = None
    agents: Annotated[list[FlowAgentEntry | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)
    merge_strategy: str | None = None
    merge_output_key: str | None = None
    separator: str | None = None
    max_concurrency: int | None = None
    output_key: str | None = None
    loop: LoopBlock | None = None
    # seed 002's FlowAgent.interruptBefore: names of agents the flow pauses before (sequential, conditional).
    interrupt_before: Annotated[list[str | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)


class PromptBlock(_Block):
    """``prompt:``, how the agent's system prompt is assembled (seed 001's prompt sections; codeact files).

    Attributes:
        platform: The platform the agent works for (the Platform section), e.g. ``Acme's support desk``.
        sections: The system sections, in order (names from ``codeact.segments.SECTION_NAMES``).
        templates: Per-section template of the prompts package (``{role: system_role.j2}``).
        overrides: Per-section literal text replacing the template (``{{ name }}`` substituted).
    """

    platform: str | None = None
    sections: list[str] | None = None
    templates: _Options = Field(default_factory=dict)
    overrides: _Options = Field(default_factory=dict)


class Blueprint(_Block):
    """An agent blueprint as loaded from YAML (after ``extend`` inheritance).

    Build one with :meth:`from_file`, :meth:`from_text` or :meth:`from_stream` (they run the
    loader, inheritance and sub-agent loading), check it with
    :func:`codeact.engine.blueprint.validate_blueprint`, turn it into an
    :class:`~codeact.engine.blueprint.spec.AgentSpec` with :class:`~codeact.engine.blueprint.factory.AgentFactory`.
    The fields after ``extensions`` are filled by the loader, never from the file.
    """

    codeact_only: ClassVar[frozenset[str]] = frozenset(
        {"extend", "toolkits", "subagents", "flow", "knowledge", "outputSchema", "prompt"}
    )

    schema_uri: str | None = Field(default=None, alias="$schema")
    version: str | None = None
    id: str | None = None
    name: str | None = None
    description: str | None = None
    extend: str | None = None
    model: ModelBlock | None = None
    instructions: InstructionsBlock | None = None
    plugins: Annotated[list[PluginEntry | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)
    tools: Annotated[list[ToolEntry | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)
    toolkits: Annotated[list[ToolkitEntry | None], BeforeValidator(_none_to_list)] = Field(default_factory=list)
    subagents: Annotated[dict[str, SubagentEntry | None], BeforeValidator(_none_to_dict)] = Field(default_factory=dict)
    session: SessionBlock | None = None
    sandbox: SandboxBlock | None = None
    workflow: WorkflowBlock | None = None
    flow: FlowBlock | None = None
    knowledge: KnowledgeBlock | None = None
    # seed 002's BaseAgent.outputSchema: a JSON Schema the final answer must match (engine/agent/output.py).
    output_schema: dict[str, Any] | None = None
    prompt: PromptBlock | None = None
    extensions: _Options = Field(default_factory=dict)

    # Filled by the loader; excluded from dumps (and so from the blueprint hash).
    source_path: Path | None = Field(default=None, exclude=True, repr=False)
    extends: tuple[str, ...] = Field(default=(), exclude=True, repr=False)
    unknown_fields: tuple[UnknownField, ...] = Field(default=(), exclude=True, repr=False)
    load_issues: tuple[ValidationIssue, ...] = Field(default=(), exclude=True, repr=False)
    subagent_blueprints: dict[str, Blueprint] = Field(default_factory=dict, exclude=True, repr=False)
    # flow.agents[i] -> its loaded blueprint (absent when it could not be loaded: see load_issues).
    flow_blueprints: dict[int, Blueprint] = Field(default_factory=dict, exclude=True, repr=False)
    # "kimi" for a kimi-cli agent file (its model comes from the host, as in kimi-cli's config).
    source_format: str = Field(default="blueprint", exclude=True, repr=False)
    # A kimi-cli agent's system prompt, rendered with the host's values when the agent is built.
    kimi_prompt: KimiPrompt | None = Field(default=None, exclude=True, repr=False)

    @property
    def is_codeact_version(self) -> bool:
        """True for ``version: codeact.agent/v1`` (the superset with inheritance and toolkits)."""
        return (self.version or "").strip() == CODEACT_VERSION

    @classmethod
    def from_file(cls, path: str | Path) -> Blueprint:
        """Load a blueprint file (see :func:`load_path`)."""
        return load_path(path)

    @classmethod
    def from_text(cls, text: str, *, base_dir: str | Path | None = None) -> Blueprint:
        """Load a blueprint from YAML text (see :func:`load_text`)."""
        return load_text(text, base_dir=base_dir)

    @classmethod
    def from_stream(cls, stream: IO[str] | IO[bytes], *, base_dir: str | Path | None = None) -> Blueprint:
        """Load a blueprint from an open stream (see :func:`load_stream`)."""
        return load_stream(stream, base_dir=base_dir)


# -- reading a blueprint ----------------------------------------------------------------------

MAX_SUBAGENT_DEPTH: Final = 8
_MAX_FLOW_DEPTH: Final = 8


def load_text(text: str, *, base_dir: str | Path | None = None) -> Blueprint:
    """Load a blueprint from YAML text.

    Args:
        text: The YAML document.
        base_dir: Directory that relative paths (``extend``, sub-agent paths) are resolved
            against; defaults to the current directory.

    Raises:
        BlueprintLoadError: Invalid YAML, an empty document, or a value of the wrong type.
    """
    directory = Path(base_dir) if base_dir is not None else Path.cwd()
    return _load(text, source=None, base_dir=directory.resolve(), label="<text>", stack=())


def load_stream(stream: IO[str] | IO[bytes], *, base_dir: str | Path | None = None) -> Blueprint:
    """Load a blueprint from an open text or binary stream (read to its end, UTF-8).

    Raises:
        BlueprintLoadError: ``blueprint.io`` when the stream cannot be read, else as :func:`load_text`.
    """
    try:
        content = stream.read()
    except OSError as exc:
        raise BlueprintLoadError(
            f"Unable to read Agent Blueprint stream: {exc.strerror or type(exc).__name__}.", code="blueprint.io"
        ) from None
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BlueprintLoadError(
                "Unable to read Agent Blueprint stream: it is not UTF-8 text. Save it as UTF-8.", code="blueprint.io"
            ) from None
    return load_text(content, base_dir=base_dir)


def load_path(path: str | Path) -> Blueprint:
    """Load a blueprint file; relative paths inside it are resolved against its directory.

    Raises:
        BlueprintLoadError: ``blueprint.io`` when the file cannot be read, else as :func:`load_text`.
    """
    return _load_file(Path(path), shown=str(path), stack=())


def _load_file(path: Path, *, shown: str, stack: tuple[Path, ...]) -> Blueprint:
    text = read_blueprint_text(path, shown)
    resolved = path.resolve()
    return _load(text, source=resolved, base_dir=resolved.parent, label=path.name, stack=(*stack, resolved))


def _load(text: str, *, source: Path | None, base_dir: Path, label: str, stack: tuple[Path, ...]) -> Blueprint:
    # The file's name, never its directory (messages may reach an HTTP client: no local paths).
    document = parse_yaml(text, source=label if source is not None else None)
    kimi = is_kimi_document(document)
    kimi_prompt: KimiPrompt | None = None
    if kimi:
        # A kimi-cli agent file: its own inheritance and checks, then it loads as a codeact agent.
        document, kimi_prompt = kimi_to_codeact(document, source=source, base_dir=base_dir, label=label)
    codeact = peek_version(document) == CODEACT_VERSION
    coerced = coerce_document(document, Blueprint, codeact=codeact)
    data = coerced.data
    unknown = [UnknownField(path=path) for path in coerced.unknown]
    issues: list[ValidationIssue] = []
    extends: tuple[str, ...] = ()
    if codeact:
        resolution = resolve_inheritance(data, model=Blueprint, base_dir=base_dir, root_label=label, root_path=source)
        data = resolution.data
        issues.extend(resolution.issues)
        unknown.extend(resolution.unknown)
        extends = resolution.extends
    blueprint = Blueprint.model_validate(data)
    subagents: dict[str, Blueprint] = {}
    flow: dict[int, Blueprint] = {}
    if codeact:
        subagents = _load_subagents(blueprint, base_dir=base_dir, stack=stack, issues=issues)
        if blueprint.flow is not None:
            flow = _load_flow_agents(blueprint.flow, base_dir=base_dir, stack=stack, issues=issues)
    return blueprint.model_copy(
        update={
            "source_path": source,
            "extends": extends,
            "unknown_fields": tuple(unknown),
            "load_issues": tuple(issues),
            "subagent_blueprints": subagents,
            "flow_blueprints": flow,
            "source_format": "kimi" if kimi else "blueprint",
            "kimi_prompt": kimi_prompt,
        }
    )


def _load_subagents(
    blueprint: Blueprint, *, base_dir: Path, stack: tuple[Path, ...], issues: list[ValidationIssue]
) -> dict[str, Blueprint]:
    loaded: dict[str, Blueprint] = {}
    for name, entry in blueprint.subagents.items():
        if entry is None or not (entry.path or "").strip():
            continue  # null removes an inherited sub-agent; a blank path is a validation error
        where = f"$.subagents.{name}.path"
        path = Path(entry.path or "")
        shown = shown_path(path, base_dir)
        if path.resolve() in stack:
            chain = " -> ".join([item.name for item in stack] + [path.name])
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.cycle",
                    f"Subagent {name!r} refers back to a blueprint that declares it: {chain}. Remove the cycle.",
                )
            )
        elif len(stack) >= MAX_SUBAGENT_DEPTH:
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.tooDeep",
                    f"Subagent {name!r} is nested more than {MAX_SUBAGENT_DEPTH} levels deep. Flatten the sub-agents.",
                )
            )
        elif not path.is_file():
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.notFound",
                    f"Subagent {name!r}: file {shown!r} was not found; "
                    "a path is relative to the file that declares it.",
                )
            )
        else:
            try:
                loaded[name] = _load_file(path, shown=shown, stack=stack)
            except BlueprintLoadError as exc:
                issues.append(
                    ValidationIssue.error(
                        where,
                        "blueprint.subagent.invalid",
                        f"Subagent {name!r} could not be loaded [{exc.code}]: {exc.message}",
                    )
                )
    return loaded


def _load_flow_agents(
    flow: FlowBlock,
    *,
    base_dir: Path,
    stack: tuple[Path, ...],
    issues: list[ValidationIssue],
) -> dict[int, Blueprint]:
    """Load ``flow.agents[].path`` (index -> blueprint); problems become ``blueprint.flow.agent.*`` issues."""
    loaded: dict[int, Blueprint] = {}
    for index, entry in enumerate(flow.agents):
        if entry is None or not (entry.path or "").strip():
            continue  # a validation error (path required)
        where = f"$.flow.agents[{index}].path"
        path = Path((entry.path or "").strip())
        path = path if path.is_absolute() else base_dir / path
        if path.resolve() in stack:
            chain = " -> ".join([item.name for item in stack] + [path.name])
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.flow.agent.cycle",
                    f"flow.agents[{index}] refers back to a blueprint that declares it: {chain}. Remove the cycle.",
                )
            )
        elif len(stack) >= _MAX_FLOW_DEPTH:
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.flow.agent.tooDeep",
                    f"flow.agents[{index}] is nested more than {_MAX_FLOW_DEPTH} levels deep. Flatten the flow.",
                )
            )
        elif not path.is_file():
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.flow.agent.notFound",
                    f"flow.agents[{index}]: file {shown_path(path, base_dir)!r} was not found; "
                    "a path is relative to the file that declares it.",
                )
            )
        else:
            try:
                loaded[index] = _load_file(path, shown=shown_path(path, base_dir), stack=stack)
            except BlueprintLoadError as exc:
                issues.append(
                    ValidationIssue.error(
                        where,
                        "blueprint.flow.agent.invalid",
                        f"flow.agents[{index}] could not be loaded [{exc.code}]: {exc.message}",
                    )
                )
    return loaded
