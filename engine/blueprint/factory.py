"""``AgentFactory``: blueprint + host context -> :class:`~codeact.engine.blueprint.spec.AgentSpec`.

Check order and codes follow ai4j's AgentFactory: ``blueprint.validation.failed`` (report
attached), ``blueprint.sandbox.unsupported``, ``blueprint.modelClient.required``,
``blueprint.model.model.requiredForFactory``, then option mapping
(``blueprint.option.number.invalid`` / ``.integer.invalid`` / ``.boolean.invalid``). codeact
adds ``blueprint.sandbox.imports.denied`` (right after the sandbox check) and
``blueprint.toolkit.notFound`` (after option mapping, when the registry can answer ``in``), then
``blueprint.toolkit.notGranted`` (a toolkit the host loaded for this agent that no grant names).

The factory never reads keys, profiles or plugin folders: the host supplies everything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, Final, Literal, cast

from codeact.engine.blueprint._flow import is_flow
from codeact.engine.blueprint.issues import ValidationIssue, ValidationReport
from codeact.engine.blueprint.kimi import kimi_builtin_args, render_kimi_prompt
from codeact.engine.blueprint.models import (
    Blueprint,
    InstructionsBlock,
    ModelBlock,
    ModelRoute,
    SandboxBlock,
    WorkflowBlock,
)
from codeact.engine.blueprint.modes import ThoughtMode, WorkflowMode
from codeact.engine.blueprint.spec import (
    DEFAULT_MAX_ROUND_SECONDS,
    DEFAULT_ROUND_SECONDS,
    AgentKind,
    AgentSpec,
    CodeActSettings,
    CompactSettings,
    FimMarkers,
    HostContext,
    KnowledgeSettings,
    KnowledgeSourceSpec,
    MemorySettings,
    ModelOptions,
    ModelSettings,
    PluginRef,
    RoutePurpose,
    SandboxLimitSettings,
    SandboxSettings,
    SessionSettings,
    SubagentSpec,
    ToolkitGrant,
    ToolRef,
)
from codeact.engine.blueprint.templates import RenderedInstructions, builtin_variables, render_template
from codeact.engine.blueprint.validator import ai4j_session, sandbox_declared, validate_blueprint
from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError, TemplateError

__all__ = [
    "AgentFactory",
    "DEFAULT_MAX_TURNS",
    "HostContext",
    "blueprint_hash",
    "format_factory_error",
    "format_load_error",
    "granted_toolkits",
    "knowledge_settings",
    "map_options",
    "print_warnings",
    "render_instructions",
    "strict_error",
    "ungranted_error",
]

DEFAULT_MAX_TURNS: Final = 20
_INT_RE: Final = re.compile(r"^[+-]?[0-9]+$")
_FLOAT_RE: Final = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def format_load_error(error: BlueprintLoadError) -> str:
    """``Blueprint load error [<code>]: <message>`` (as the CLI prints it)."""
    return f"Blueprint load error [{error.code}]: {error.message}"


def format_factory_error(error: BlueprintFactoryError) -> str:
    """``Blueprint factory error [<code>]: <message>`` and one indented line per report issue."""
    lines = [f"Blueprint factory error [{error.code}]: {error.message}"]
    if isinstance(error.report, ValidationReport):
        lines.extend(f"  {issue.format()}" for issue in error.report.issues)
    return "\n".join(lines)


def print_warnings(issues: Iterable[ValidationIssue], file: IO[str] | None = None) -> None:
    """Write each warning on one line (``WARNING $.toolkit blueprint.field.unknown: ...``) to stderr.

    ``codeact run``, ``serve``, ``worker``, ``eval`` and ``Agent.from_blueprint`` call it before a run,
    so a typo the validator caught is seen where the author looks.
    """
    out = file if file is not None else sys.stderr
    for issue in issues:
        out.write(issue.format() + "\n")
    out.flush()


def strict_error(report: ValidationReport) -> BlueprintFactoryError | None:
    """The ``blueprint.validation.strict`` error of a report with warnings (``--strict``), else None."""
    count = len(report.warnings)
    if not count:
        return None
    return BlueprintFactoryError(
        f"Agent Blueprint has {count} warning{'s' if count != 1 else ''} and --strict makes warnings errors; "
        "fix the issues listed (codeact validate FILE shows them).",
        code="blueprint.validation.strict",
        report=ValidationReport(issues=report.warnings),
    )


def granted_toolkits(blueprint: Blueprint) -> frozenset[str]:
    """The toolkits a blueprint grants: ``toolkits[].ref``, ``tools[].ref``, its sub-agents' and flow agents'."""
    names = {(entry.ref or "").strip() for entry in blueprint.toolkits if entry is not None}
    names.update((tool.ref or "").strip().partition(".")[0] for tool in blueprint.tools if tool is not None)
    for child in (*blueprint.subagent_blueprints.values(), *blueprint.flow_blueprints.values()):
        names.update(granted_toolkits(child))
    return frozenset(names - {""})


def ungranted_error(
    blueprint: Blueprint, offered: Iterable[str], report: ValidationReport | None = None
) -> BlueprintFactoryError | None:
    """``blueprint.toolkit.notGranted`` for toolkits loaded for the agent that nothing in ``blueprint`` grants.

    A toolkit given with ``--toolkit`` (or ``toolkits=[...]``) is refused, never granted by being
    loaded: the blueprint is where what the model may do is written and reviewed (docs/blueprints.md).
    """
    granted = granted_toolkits(blueprint) | {"system"}  # system is granted to every agent
    missing = [name for name in dict.fromkeys(offered) if name not in granted]
    if not missing:
        return None
    shown = ", ".join(repr(name) for name in missing)
    grants = ", ".join(f"{{ref: {name}}}" for name in missing)
    word = "toolkit" if len(missing) == 1 else "toolkits"
    source = f" {blueprint.source_path.name!r}" if blueprint.source_path is not None else ""
    return BlueprintFactoryError(
        f"{word} {shown} loaded (--toolkit) but not granted: the blueprint{source} names it in no toolkits[].ref, "
        f"so every call the model made to it would fail with NameError. Grant it (toolkits: [{grants}]) "
        "or stop loading it.",
        code="blueprint.toolkit.notGranted",
        report=report,
    )


def _check_offered(blueprint: Blueprint, offered: tuple[str, ...], report: ValidationReport) -> None:
    error = ungranted_error(blueprint, offered, report) if offered else None
    if error is not None:
        raise error


def blueprint_hash(blueprint: Blueprint) -> str:
    """sha256 (hex) of the canonical JSON of the merged blueprint.

    Sub-agents enter by their own hash instead of their file path, so the hash does not depend
    on where the files live.
    """
    data = blueprint.model_dump(mode="json", by_alias=True)
    subagents: dict[str, Any] = {}
    for name, entry in blueprint.subagents.items():
        child = blueprint.subagent_blueprints.get(name)
        if entry is None:
            subagents[name] = None
        else:
            subagents[name] = {
                "description": entry.description,
                "blueprint": blueprint_hash(child) if child is not None else entry.path,
            }
    data["subagents"] = subagents
    knowledge = data.get("knowledge")
    if isinstance(knowledge, dict) and blueprint.source_path is not None:  # where the folder lives is not hashed
        base = blueprint.source_path.parent
        for entry in knowledge.get("sources") or []:
            for key in ("file", "folder"):
                if isinstance(entry, dict) and isinstance(entry.get(key), str):
                    entry[key] = os.path.relpath(entry[key], base)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _trim(value: str | None) -> str | None:
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None


def _first(options: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if options.get(key) is not None:
            return options[key]
    return None


def _number(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and _FLOAT_RE.match(value.strip()):
        return float(value.strip())
    raise BlueprintFactoryError(f"{path} must be a number.", code="blueprint.option.number.invalid")


def _integer(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        return int(value.strip())
    raise BlueprintFactoryError(f"{path} must be an integer.", code="blueprint.option.integer.invalid")


def _boolean(value: Any, path: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BlueprintFactoryError(f"{path} must be a boolean.", code="blueprint.option.boolean.invalid")


def _stop(value: Any, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise BlueprintFactoryError(
        f"{path} must be a string or a list of strings.", code="blueprint.option.string.invalid"
    )


def map_options(options: Mapping[str, Any], path: str) -> ModelOptions:
    """Map ``model.options`` as ai4j's AgentFactory does (``path`` is ``$.model.options``)."""
    user = options.get("user")
    return ModelOptions(
        temperature=_number(options.get("temperature"), f"{path}.temperature"),
        top_p=_number(_first(options, "topP", "top_p"), f"{path}.topP"),
        max_output_tokens=_integer(_first(options, "maxOutputTokens", "max_output_tokens"), f"{path}.maxOutputTokens"),
        reasoning=options.get("reasoning"),
        tool_choice=options["toolChoice"] if "toolChoice" in options else options.get("tool_choice"),
        parallel_tool_calls=_boolean(
            _first(options, "parallelToolCalls", "parallel_tool_calls"), f"{path}.parallelToolCalls"
        ),
        store=_boolean(options.get("store"), f"{path}.store"),
        user=None if user is None else str(user),
        seed=_integer(options.get("seed"), f"{path}.seed"),
        stop=_stop(options.get("stop"), f"{path}.stop"),
        vision=_boolean(options.get("vision"), f"{path}.vision"),
    )


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


class AgentFactory:
    """Builds :class:`~codeact.engine.blueprint.spec.AgentSpec` objects from validated blueprints.

    Args:
        validator: The validation function (default :func:`~codeact.engine.blueprint.validate_blueprint`).
    """

    def __init__(self, *, validator: Callable[[Blueprint], ValidationReport] = validate_blueprint) -> None:
        self._validate = validator

    def _validated(self, blueprint: Blueprint, host: HostContext) -> ValidationReport:
        """The validation report; ``BlueprintFactoryError`` when it has errors (or warnings, under ``strict``)."""
        report = self._validate(blueprint)
        strict = strict_error(report) if host.strict and report.valid else None
        if strict is not None:
            raise strict
        if not report.valid:
            count = len(report.errors)
            raise BlueprintFactoryError(
                f"Agent Blueprint validation failed with {count} error{'s' if count != 1 else ''}; "
                "fix the issues listed (codeact validate FILE shows them).",
                code="blueprint.validation.failed",
                report=report,
            )
        return report

    def create(self, blueprint: Blueprint, context: HostContext | None = None) -> AgentSpec:
        """Check the blueprint against the host context and resolve it into an ``AgentSpec``.

        Args:
            blueprint: A loaded blueprint (inheritance already applied by the loader).
            context: What the host supplies; None is an empty context.

        Raises:
            BlueprintFactoryError: The first failed check, in ai4j's order (see the module doc).
        """
        host = context if context is not None else HostContext()
        report = self._validated(blueprint, host)
        if is_flow(blueprint):
            raise BlueprintFactoryError(
                f"blueprint {blueprint.id!r} is a flow (workflow.mode: flow), not a single agent: build it with "
                "engine.flow.FlowAgent.from_blueprint(...) or run it with `codeact run`",
                code="blueprint.flow.isAFlow",
                report=report,
            )
        sandbox = self._sandbox(blueprint, host, report)
        if host.model_client is None:
            raise BlueprintFactoryError(
                "A model client is required. Provide it from the host (HostContext(model_client=...)); "
                "the factory does not read provider keys or profiles.",
                code="blueprint.modelClient.required",
                report=report,
            )
        model_block = cast(ModelBlock, blueprint.model)  # validation guarantees a model block
        model_name = _trim(model_block.model)
        if model_name is None:
            raise BlueprintFactoryError(
                "model.model is required by AgentFactory. model.profile is host metadata only and is not "
                "resolved by the factory; set model.model in the blueprint or pass --model.",
                code="blueprint.model.model.requiredForFactory",
                report=report,
            )
        warnings = report.warnings
        if sandbox.declared and blueprint.sandbox is not None:
            # ai4j's provider: mapped to a backend, or refused; in an ai4j file the host's allow flag
            # (checked by _sandbox) lets an unknown provider's declaration pass: the run says so.
            note = _sandbox_backend(blueprint.sandbox, report, ai4j=not blueprint.is_codeact_version)
            warnings = (*warnings, *note)
        provider = cast(str, _trim(model_block.provider))
        model = ModelSettings(
            provider=provider,
            model=model_name,
            profile=_trim(model_block.profile),
            options=map_options(model_block.options, "$.model.options"),
            context_window=model_block.context_window,
        )
        routes = self._routes(model_block, provider)
        instructions = render_instructions(blueprint, host)
        toolkits = self._toolkits(blueprint, host, report)
        _check_offered(blueprint, host.offered_toolkits, report)
        subagents = self._subagents(blueprint, dataclasses.replace(host, offered_toolkits=()))
        workflow = blueprint.workflow
        kind: AgentKind = (
            "codeact" if workflow is not None and workflow.workflow_mode is WorkflowMode.CODEACT else "react"
        )
        return AgentSpec(
            id=cast(str, _trim(blueprint.id)),
            name=_trim(blueprint.name),
            version=cast(str, _trim(blueprint.version)),
            kind=kind,
            model=model,
            routes=MappingProxyType(routes),
            instructions=instructions,
            variables=_frozen(blueprint.instructions.variables if blueprint.instructions else {}),
            tools=tuple(
                ToolRef(ref=cast(str, _trim(tool.ref)), approval=_trim(tool.approval), config=_frozen(tool.config))
                for tool in blueprint.tools
                if tool is not None
            ),
            toolkits=toolkits,
            plugins=tuple(
                PluginRef(
                    id=cast(str, _trim(plugin.id)), enabled=plugin.enabled is not False, config=_frozen(plugin.config)
                )
                for plugin in blueprint.plugins
                if plugin is not None
            ),
            subagents=subagents,
            session=self._session(blueprint),
            sandbox=sandbox,
            max_turns=workflow.max_turns
            if workflow is not None and workflow.max_turns is not None
            else DEFAULT_MAX_TURNS,
            codeact=self._codeact(
                blueprint,
                round_seconds=_round_seconds(blueprint, sandbox, host, report),
                budgets=_budgets(blueprint, host, report),
            ),
            run_seconds=_run_seconds(workflow, report),
            knowledge=knowledge_settings(blueprint),
            blueprint_hash=blueprint_hash(blueprint),
            source_path=blueprint.source_path,
            extends=blueprint.extends,
            warnings=warnings,
            blueprint=blueprint,
            host=host,
        )

    def sandbox_settings(self, blueprint: Blueprint, context: HostContext | None = None) -> SandboxSettings:
        """Only the sandbox part of :meth:`create` (validation, the host's consent, provider, imports).

        ``codeact exec --blueprint`` and ``codeact sandbox build`` use it: they need the sandbox a
        blueprint declares, not a model.

        Raises:
            BlueprintFactoryError: The blueprint is invalid, declares a sandbox the host did not
                allow, names an unknown provider, or asks for imports the host does not allow.
        """
        host = context if context is not None else HostContext()
        report = self._validated(blueprint, host)
        settings = self._sandbox(blueprint, host, report)
        if settings.declared and blueprint.sandbox is not None:
            _sandbox_backend(blueprint.sandbox, report, ai4j=not blueprint.is_codeact_version)
        return settings

    def _sandbox(self, blueprint: Blueprint, host: HostContext, report: ValidationReport) -> SandboxSettings:
        declared = sandbox_declared(blueprint)
        if declared and not host.allow_sandbox_declaration:
            raise BlueprintFactoryError(
                "The blueprint declares a sandbox, but the host has not allowed sandbox declarations; "
                "pass --allow-sandbox-declaration (HostContext(allow_sandbox_declaration=True)) "
                "or remove the sandbox block.",
                code="blueprint.sandbox.unsupported",
                report=report,
            )
        block = blueprint.sandbox if declared else None
        if block is None:
            return SandboxSettings()
        imports = tuple(dict.fromkeys(item.strip() for item in block.imports or [] if item is not None))
        denied = sorted(set(imports) - (host.allowed_imports or frozenset()))
        if denied:
            raise BlueprintFactoryError(
                f"sandbox.imports asks for {', '.join(denied)}, which the host's import policy does not allow; "
                "a blueprint cannot widen the sandbox's imports by itself: the host must allow them "
                "(HostContext(allowed_imports=...)).",
                code="blueprint.sandbox.imports.denied",
                report=report,
            )
        return self._sandbox_settings(block, imports)

    @staticmethod
    def _sandbox_settings(block: SandboxBlock, imports: tuple[str, ...]) -> SandboxSettings:
        limits = block.limits
        provider = _trim(block.provider)
        # ai4j's provider picks the backend; an unknown one (refused, or allowed in an ai4j file) picks none
        backend = SANDBOX_PROVIDERS.get(provider.lower()) if provider is not None else None
        backend = backend or _trim(block.backend)
        return SandboxSettings(
            declared=True,
            backend=cast(Literal["subprocess", "docker"] | None, backend),
            provider=_trim(block.provider),
            profile=_trim(block.profile),
            limits=SandboxLimitSettings(
                timeout_seconds=limits.timeout_seconds,
                memory_mb=limits.memory_mb,
                cpus=limits.cpus,
                cpu_seconds=limits.cpu_seconds,
                pids=limits.pids,
                output_bytes=limits.output_bytes,
                artifact_bytes=limits.artifact_bytes,
                round_artifact_bytes=limits.round_artifact_bytes,
            )
            if limits is not None
            else SandboxLimitSettings(),
            imports=imports,
            config=_frozen(block.config),
            packages=tuple(p.strip() for p in block.packages or [] if p is not None and p.strip()),
            preset=_trim(block.preset),
            runtime=cast(Literal["runc", "gvisor"] | None, _trim(block.runtime)),
        )

    @staticmethod
    def _routes(model: ModelBlock, provider: str) -> dict[RoutePurpose, ModelSettings]:
        routes: dict[RoutePurpose, ModelSettings] = {}
        if model.routes is None:
            return routes
        purposes: tuple[RoutePurpose, ...] = ("code", "thought", "utility")
        for purpose in purposes:
            route: ModelRoute | None = getattr(model.routes, purpose)
            if route is None:
                continue
            options = {**model.options, **route.options}  # a route inherits the main options key by key
            routes[purpose] = ModelSettings(
                provider=_trim(route.provider) or provider,
                model=cast(str, _trim(route.model)),
                profile=_trim(model.profile),
                options=map_options(options, f"$.model.routes.{purpose}.options"),
                context_window=model.context_window,
            )
        return routes

    @staticmethod
    def _toolkits(blueprint: Blueprint, host: HostContext, report: ValidationReport) -> tuple[ToolkitGrant, ...]:
        grants: list[ToolkitGrant] = []
        registry: Any = host.toolkit_registry if hasattr(host.toolkit_registry, "__contains__") else None
        for index, entry in enumerate(blueprint.toolkits):
            if entry is None:
                continue
            ref = cast(str, _trim(entry.ref))
            if registry is not None and ref not in registry:
                raise BlueprintFactoryError(
                    f"$.toolkits[{index}].ref names toolkit {ref!r}, which the host's toolkit registry does not "
                    "have; register it (decorator or the codeact.toolkits entry point) or pass --toolkit MOD:OBJ.",
                    code="blueprint.toolkit.notFound",
                    report=report,
                )
            operations = (
                None
                if entry.operations is None
                else tuple(dict.fromkeys(op.strip() for op in entry.operations if op is not None))
            )
            grants.append(
                ToolkitGrant(
                    ref=ref, operations=operations, approval=_trim(entry.approval), config=_frozen(entry.config)
                )
            )
        return tuple(grants)

    def _subagents(self, blueprint: Blueprint, host: HostContext) -> tuple[SubagentSpec, ...]:
        specs: list[SubagentSpec] = []
        for name, entry in blueprint.subagents.items():
            child = blueprint.subagent_blueprints.get(name)
            if entry is None or child is None:
                continue
            if child.model is None:
                # A kimi-cli sub-agent names no model: as in kimi-cli, it runs on its parent's.
                child = child.model_copy(update={"model": blueprint.model})
            try:
                spec = self.create(child, host)
            except BlueprintFactoryError as exc:
                raise BlueprintFactoryError(
                    f"Subagent {name!r}: {exc.message}", code=exc.code, report=exc.report
                ) from None
            description = cast(str, _trim(entry.description))
            if child.source_format == "kimi" and _trim(child.description):
                # kimi-cli's when_to_use (and the tools it lacks here) complete what the parent reads.
                description = f"{description}\n{_trim(child.description)}"
            specs.append(SubagentSpec(name=name, description=description, path=Path(entry.path or ""), spec=spec))
        return tuple(specs)

    @staticmethod
    def _session(blueprint: Blueprint) -> SessionSettings:
        session = blueprint.session
        if session is None:
            return SessionSettings()
        memory = session.memory
        compact = session.compact
        trigger = compact.trigger if compact is not None else None
        # ai4j's free strings run as their codeact counterpart, or the nearest safe value (validator warns)
        scope, store, strategy = (
            ai4j_session(session)[:3]
            if not blueprint.is_codeact_version
            else (
                _trim(memory.scope) if memory is not None else None,
                _trim(memory.store) if memory is not None else None,
                _trim(compact.strategy) if compact is not None else None,
            )
        )
        return SessionSettings(
            memory=MemorySettings(
                enabled=memory.enabled is True,
                scope=scope,
                store=store,
                config=_frozen(memory.config),
            )
            if memory is not None
            else None,
            compact=CompactSettings(
                enabled=compact.enabled is True,
                context_ratio=trigger.context_ratio if trigger is not None else None,
                max_turns=trigger.max_turns if trigger is not None else None,
                strategy=strategy,
                preserve=tuple(item for item in compact.preserve if item is not None),
            )
            if compact is not None
            else None,
        )

    @staticmethod
    def _codeact(
        blueprint: Blueprint, *, round_seconds: float = DEFAULT_ROUND_SECONDS, budgets: Any = None
    ) -> CodeActSettings:
        workflow = blueprint.workflow
        block = workflow.codeact if workflow is not None else None
        defaults = CodeActSettings(round_seconds=round_seconds, budgets=budgets)
        if block is None:
            return defaults
        tokens = block.fim.tokens if block.fim is not None else None
        return CodeActSettings(
            thought=ThoughtMode(_trim(block.thought) or defaults.thought),
            protocol=cast(Literal["chat", "completion"], _trim(block.protocol) or defaults.protocol),
            layout=cast(Literal["frame", "turns"] | None, _trim(block.layout) or defaults.layout),
            fim_family=_trim(block.fim.family) if block.fim is not None else None,
            fim_markers=FimMarkers(prefix=tokens.prefix or "", suffix=tokens.suffix or "", middle=tokens.middle or "")
            if tokens is not None
            else None,
            self_check=block.self_check if block.self_check is not None else defaults.self_check,
            max_self_checks=block.max_self_checks if block.max_self_checks is not None else defaults.max_self_checks,
            max_repeats=block.max_repeats if block.max_repeats is not None else defaults.max_repeats,
            round_seconds=round_seconds,
            budgets=budgets,
            answer_variable=_answer_variable(block.answer_variable, defaults.answer_variable),
            final_answer=block.final_answer if block.final_answer is not None else defaults.final_answer,
            restate_task=block.restate_task,
        )


def _budgets(blueprint: Blueprint, host: HostContext, report: ValidationReport) -> Any:
    """The run's call budgets: ``workflow.codeact.budgets`` over the host's caps (which are the default).

    Raises:
        BlueprintFactoryError: ``blueprint.budgets.invalid`` (not a whole number of at least 1) or
            ``blueprint.budgets.overHostCap`` (more than the host allows; the message names the key).
    """
    import dataclasses

    from codeact.toolkits import DEFAULT_BUDGETS, CallBudgets, ToolkitError

    cap = host.call_budgets if isinstance(host.call_budgets, CallBudgets) else DEFAULT_BUDGETS
    workflow = blueprint.workflow
    block = workflow.codeact.budgets if workflow is not None and workflow.codeact is not None else None
    if block is None:
        return cap
    asked = {name: getattr(block, name) for name in ("round_calls", "run_calls", "round_bytes", "run_bytes")}
    try:
        budgets = dataclasses.replace(cap, **{k: v for k, v in asked.items() if v is not None})
    except ToolkitError as exc:
        raise BlueprintFactoryError(
            f"workflow.codeact.budgets: {exc.message}", code="blueprint.budgets.invalid", report=report
        ) from None
    try:
        return budgets.within(cap)
    except ToolkitError as exc:
        raise BlueprintFactoryError(exc.message, code="blueprint.budgets.overHostCap", report=report) from None


def _answer_variable(value: str | None, default: str | None) -> str | None:
    """``workflow.codeact.answerVariable``: a name, ``off`` (None), or the default when not set."""
    name = _trim(value)
    if name is None:
        return default
    return None if name == "off" else name


def _positive(value: float | None, path: str, report: ValidationReport) -> float | None:
    if value is None:
        return None
    if not value > 0 or value == float("inf"):
        raise BlueprintFactoryError(
            f"{path} must be a positive number of seconds, got {value:g}.",
            code="blueprint.timeLimit.invalid",
            report=report,
        )
    return float(value)


def _round_seconds(
    blueprint: Blueprint, sandbox: SandboxSettings, host: HostContext, report: ValidationReport
) -> float:
    """The round's limit in seconds of code.

    ``workflow.codeact.roundSeconds``, else the declared ``sandbox.limits.timeoutSeconds``, else the
    default; neither may exceed the host's cap.
    """
    workflow = blueprint.workflow
    block = workflow.codeact if workflow is not None else None
    asked = [
        (
            "workflow.codeact.roundSeconds",
            _positive(block.round_seconds if block else None, "workflow.codeact.roundSeconds", report),
        ),
        (
            "sandbox.limits.timeoutSeconds",
            _positive(sandbox.limits.timeout_seconds, "sandbox.limits.timeoutSeconds", report),
        ),
    ]
    cap = host.max_round_seconds if host.max_round_seconds is not None else DEFAULT_MAX_ROUND_SECONDS
    for path, value in asked:
        if value is not None and value > cap:
            raise BlueprintFactoryError(
                f"{path} asks for {value:g} s of code per round, more than this host allows ({cap:g} s); "
                f"lower {path} to {cap:g} or less, or let the host allow more (--max-round-seconds, "
                "HostContext(max_round_seconds=...)).",
                code="blueprint.roundSeconds.overHostCap",
                report=report,
            )
    for _, value in asked:
        if value is not None:
            return value
    return min(DEFAULT_ROUND_SECONDS, cap)


def _run_seconds(workflow: WorkflowBlock | None, report: ValidationReport) -> float | None:
    """``workflow.runSeconds``: the whole run's wall-clock limit (None: no limit)."""
    return _positive(workflow.run_seconds if workflow is not None else None, "workflow.runSeconds", report)


def knowledge_settings(blueprint: Blueprint) -> KnowledgeSettings | None:
    """The blueprint's ``knowledge`` resolved (None when it declares no source); validate it first.

    Paths are absolute already (the loader resolved them against the file that declares them); a
    label names each source as the author wrote it: relative to the blueprint's folder when inside it.
    """
    block = blueprint.knowledge
    if block is None or not any(entry is not None for entry in block.sources):
        return None
    base = blueprint.source_path.parent if blueprint.source_path is not None else Path.cwd()
    sources: list[KnowledgeSourceSpec] = []
    for index, entry in enumerate(block.sources):
        if entry is None:
            continue
        kind: Literal["domain", "constraint"] = "constraint" if _trim(entry.kind) == "constraint" else "domain"
        raw = _trim(entry.file) or _trim(entry.folder)
        if raw is None:
            sources.append(
                KnowledgeSourceSpec(label=f"text[{index}]", kind=kind, text=entry.text or "", title=_trim(entry.title))
            )
            continue
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        try:
            label = Path(os.path.relpath(path, base)).as_posix()
        except ValueError:  # another drive on Windows
            label = path.as_posix()
        folder = _trim(entry.folder) is not None
        sources.append(
            KnowledgeSourceSpec(
                label=label + ("/" if folder else ""),
                kind=kind,
                path=path,
                folder=folder,
                title=_trim(entry.title),
                glob=_trim(entry.glob),
            )
        )
    defaults = KnowledgeSettings()
    return KnowledgeSettings(
        sources=tuple(sources),
        budget=block.budget if block.budget is not None else defaults.budget,
        chunk_chars=block.chunk_chars if block.chunk_chars is not None else defaults.chunk_chars,
    )


def render_instructions(
    blueprint: Blueprint, host: HostContext, *, variables: Mapping[str, Any] | None = None
) -> RenderedInstructions:
    """The blueprint's instructions as the prompt shows them.

    A ``codeact.agent/v1`` file's are rendered with the built-ins, then ``instructions.variables``,
    then ``variables`` (a host's binding ``config``, which by the AgentRunner protocol overrides the
    blueprint's variables: it is applied before rendering, so the prompt shows the host's value).
    An ``ai4j.agent/v1`` file's are never templated: ai4j reads them as text, ``{{ }}`` included.

    Raises:
        BlueprintFactoryError: ``blueprint.instructions.template.*`` (undefined variable, bad syntax).
    """
    if blueprint.kimi_prompt is not None:
        # A kimi-cli agent file: kimi's own template syntax, with kimi's built-in arguments from this host.
        try:
            system = render_kimi_prompt(blueprint.kimi_prompt, kimi_builtin_args(work_dir=host.work_dir, now=host.now))
        except BlueprintLoadError as exc:
            raise BlueprintFactoryError(exc.message, code=exc.code) from None
        return RenderedInstructions(system=_trim(system))
    block: InstructionsBlock | None = blueprint.instructions
    if block is None:
        return RenderedInstructions()
    if not blueprint.is_codeact_version:
        return RenderedInstructions(system=_trim(block.system), developer=_trim(block.developer))
    values = {**builtin_variables(now=host.now, work_dir=host.work_dir), **block.variables, **(variables or {})}
    rendered: dict[str, str | None] = {}
    for name in ("system", "developer"):
        text = getattr(block, name)
        if text is None:
            rendered[name] = None
            continue
        try:
            rendered[name] = _trim(render_template(f"instructions.{name}", text, values))
        except TemplateError as exc:
            problem = "undefined" if exc.variable is not None else "invalid"
            raise BlueprintFactoryError(exc.message, code=f"blueprint.instructions.template.{problem}") from None
    return RenderedInstructions(system=rendered["system"], developer=rendered["developer"])


SANDBOX_PROVIDERS: Final[Mapping[str, str]] = {
    "subprocess": "subprocess",
    "local": "subprocess",
    "process": "subprocess",
    "bubblewrap": "subprocess",
    "bwrap": "subprocess",
    "docker": "docker",
}
"""ai4j ``sandbox.provider`` names this host runs, and the backend each one selects."""


def _sandbox_backend(
    block: SandboxBlock, report: ValidationReport | None, *, ai4j: bool = False
) -> tuple[ValidationIssue, ...]:
    """Check ai4j's ``sandbox.provider`` against ``sandbox.backend``: an unknown provider is refused.

    The one exception is ai4j's: in an ``ai4j.agent/v1`` file whose declaration the host allowed
    (``--allow-sandbox-declaration``), an unknown provider (``remote-vm``) passes, as in ai4j, where the
    flag only lets the declaration through; the run then uses the host's own backend, and the warning
    returned says so.

    Raises:
        BlueprintFactoryError: ``blueprint.sandbox.provider.unknown`` or ``.conflict``.
    """
    backend = _trim(block.backend)
    provider = _trim(block.provider)
    if provider is None:
        return ()
    mapped = SANDBOX_PROVIDERS.get(provider.lower())
    if mapped is None and ai4j:
        return (
            ValidationIssue.warning(
                "$.sandbox.provider",
                "blueprint.sandbox.provider.substituted",
                f"sandbox.provider {provider!r} is not a sandbox this host runs; the host allowed the declaration, "
                "so this run uses the host's own sandbox backend instead (the run names it). "
                f"Set sandbox.provider to one of {', '.join(sorted(SANDBOX_PROVIDERS))} to choose.",
            ),
        )
    if mapped is None:
        raise BlueprintFactoryError(
            f"sandbox.provider {provider!r} is not a sandbox this host can run; the providers are: "
            f"{', '.join(sorted(SANDBOX_PROVIDERS))} (docker runs the Docker backend, the others the "
            "subprocess backend). Set sandbox.provider to one of them, or remove it to use the host's default.",
            code="blueprint.sandbox.provider.unknown",
            report=report,
        )
    if backend is not None and backend != mapped:
        raise BlueprintFactoryError(
            f"sandbox.provider {provider!r} selects the {mapped} backend but sandbox.backend says {backend!r}; "
            "keep one of them.",
            code="blueprint.sandbox.provider.conflict",
            report=report,
        )
    return ()
