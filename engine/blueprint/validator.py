"""The blueprint validator: ai4j's checks and codes, in ai4j's order, plus the codeact fields.

Order: version, extend, id, model, instructions, plugins, tools, toolkits, subagents, knowledge, session,
sandbox, workflow, unknown fields. The ai4j checks keep their codes, paths and severities; the
codeact fields follow the same ``blueprint.<field>.<problem>`` style.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from codeact.engine.blueprint._coerce import block_at, field_block, known_keys
from codeact.engine.blueprint.issues import ValidationIssue, ValidationReport
from codeact.engine.blueprint.models import (
    CODEACT_VERSION,
    SUPPORTED_VERSIONS,
    Blueprint,
    ModelBlock,
    SandboxBlock,
    SessionBlock,
    WorkflowBlock,
)
from codeact.engine.blueprint.modes import SandboxBackend, ThoughtMode, WorkflowMode
from codeact.engine.blueprint.templates import builtin_variables, render_template
from codeact.engine.errors import TemplateError

__all__ = [
    "CHAT_LAYOUTS",
    "FIM_PROTOCOLS",
    "KNOWN_MODEL_OPTIONS",
    "SANDBOX_BACKENDS",
    "SANDBOX_RUNTIMES",
    "THOUGHT_MODES",
    "TOOLKIT_APPROVALS",
    "TOOL_APPROVALS",
    "WORKFLOW_MODES",
    "sandbox_declared",
    "validate_blueprint",
]

WORKFLOW_MODES: Final = tuple(mode.value for mode in WorkflowMode)
TOOL_APPROVALS: Final = ("always", "safe", "never", "manual", "auto", "deny")
TOOLKIT_APPROVALS: Final = (*TOOL_APPROVALS, "ask")
SANDBOX_BACKENDS: Final = tuple(backend.value for backend in SandboxBackend)
SANDBOX_RUNTIMES: Final = ("runc", "gvisor")
THOUGHT_MODES: Final = tuple(mode.value for mode in ThoughtMode)
FIM_PROTOCOLS: Final = ("chat", "completion")
CHAT_LAYOUTS: Final = ("frame", "turns")
KNOWN_MODEL_OPTIONS: Final = frozenset(
    {
        "temperature",
        "topP",
        "top_p",
        "maxOutputTokens",
        "max_output_tokens",
        "reasoning",
        "toolChoice",
        "tool_choice",
        "parallelToolCalls",
        "parallel_tool_calls",
        "store",
        "user",
        "seed",
        "stop",
        "vision",
    }
)

_ID: Final = re.compile(r"^[A-Za-z0-9._-]+$")
_TOOLKIT_REF: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _trim(value: str | None) -> str | None:
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None


def sandbox_declared(blueprint: Blueprint) -> bool:
    """Whether the blueprint declares a sandbox the host must accept explicitly.

    ``ai4j.agent/v1``: ``sandbox.enabled: true``. ``codeact.agent/v1`` also counts a sandbox
    block that sets backend, provider, profile, limits, imports or config without
    ``enabled: false``.
    """
    sandbox = blueprint.sandbox
    if sandbox is None:
        return False
    if sandbox.enabled is True:
        return True
    if sandbox.enabled is False or not blueprint.is_codeact_version:
        return False
    return bool(
        _trim(sandbox.backend)
        or _trim(sandbox.provider)
        or _trim(sandbox.profile)
        or sandbox.limits is not None
        or sandbox.imports
        or sandbox.config
        or sandbox.packages
        or _trim(sandbox.preset)
        or _trim(sandbox.runtime)
    )


# session.compact.strategy values the engine implements (segments.budget.CompactConfig).
COMPACT_STRATEGIES: tuple[str, ...] = ("structured-summary",)


class _Checks:
    def __init__(self, blueprint: Blueprint) -> None:
        self.bp = blueprint
        self.codeact = blueprint.is_codeact_version
        self.issues: list[ValidationIssue] = []

    def error(self, path: str, code: str, message: str) -> None:
        self.issues.append(ValidationIssue.error(path, code, message))

    def warning(self, path: str, code: str, message: str) -> None:
        self.issues.append(ValidationIssue.warning(path, code, message))

    def run(self) -> ValidationReport:
        self.version()
        self.issues.extend(issue for issue in self.bp.load_issues if issue.code.startswith("blueprint.extend."))
        self.id()
        self.model(self.bp.model)
        self.instructions()
        self.plugins()
        self.tools()
        self.toolkits()
        self.subagents()
        self.knowledge()
        self.output_schema()
        self.prompt()
        self.session(self.bp.session)
        self.sandbox(self.bp.sandbox)
        self.workflow(self.bp.workflow)
        self.flow()
        self.unknown()
        return ValidationReport(issues=tuple(self.issues))

    def version(self) -> None:
        version = _trim(self.bp.version)
        if version is None:
            self.error(
                "$.version",
                "blueprint.version.required",
                f"version is required; write version: {CODEACT_VERSION} (or ai4j.agent/v1).",
            )
        elif version not in SUPPORTED_VERSIONS:
            self.error(
                "$.version",
                "blueprint.version.unsupported",
                f"Unsupported blueprint version: {version}. Use {CODEACT_VERSION} or ai4j.agent/v1.",
            )

    def id(self) -> None:
        value = _trim(self.bp.id)
        if value is None:
            self.error("$.id", "blueprint.id.required", "id is required; write a stable slug such as id: my-agent.")
        elif not _ID.match(value):
            self.error(
                "$.id",
                "blueprint.id.invalid",
                f"id must contain only letters, digits, '.', '_' or '-' (got {value!r}).",
            )

    def model(self, model: ModelBlock | None) -> None:
        if model is None and self.bp.source_format == "kimi":
            return  # kimi-cli agent files never name a model: --model, a profile or CODEACT_MODEL does
        if model is None and self.bp.workflow is not None and _trim(self.bp.workflow.mode) == "flow":
            return  # a flow's agents name their models; a routing flow's own model is checked with the flow
        if model is None:
            self.error(
                "$.model", "blueprint.model.required", "model is required; add a model block with provider and model."
            )
            return
        kimi_profile = self.bp.source_format == "kimi" and _trim(model.profile) is not None
        if _trim(model.provider) is None and not kimi_profile:  # kimi's `model:` names a host profile
            self.error(
                "$.model.provider",
                "blueprint.model.provider.required",
                "model.provider is required, e.g. provider: openai-compatible.",
            )
        self.provider("model.provider", model.provider)
        if _trim(model.model) is None and _trim(model.profile) is None:
            self.error(
                "$.model.model", "blueprint.model.selector.required", "model.model or model.profile is required."
            )
        if model.context_window is not None and model.context_window <= 0:
            self.error(
                "$.model.contextWindow",
                "blueprint.model.contextWindow.invalid",
                "model.contextWindow must be a positive number of tokens.",
            )
        if self.codeact:
            self.options("$.model.options", model.options)
        if model.routes is not None:
            for purpose in ("code", "thought", "utility"):
                route = getattr(model.routes, purpose)
                if route is None:
                    continue
                if _trim(route.model) is None:
                    self.error(
                        f"$.model.routes.{purpose}.model",
                        "blueprint.model.route.model.required",
                        f"model.routes.{purpose}.model is required: a route names the model for {purpose}.",
                    )
                self.provider(f"model.routes.{purpose}.provider", route.provider)
                if self.codeact:
                    self.options(f"$.model.routes.{purpose}.options", route.options)

    def provider(self, where: str, value: str | None) -> None:
        """A provider codeact cannot call fails here, not 10 s into a run (issue 35); litellm is not imported."""
        from codeact.engine.model.providers import known_provider, provider_suggestion

        name = _trim(value)
        if name is None or known_provider(name):
            return
        close = provider_suggestion(name)
        hint = f"; did you mean {close!r}?" if close else "."
        self.error(
            f"$.{where}",
            "blueprint.model.provider.unknown",
            f"{where} {name!r} is not a provider codeact can call{hint} Write one of litellm's providers "
            "(https://docs.litellm.ai/docs/providers) or codeact's own: local, scripted, openai-compatible.",
        )

    def options(self, path: str, options: Mapping[str, Any]) -> None:
        for key in options:
            if key not in KNOWN_MODEL_OPTIONS:
                self.warning(
                    f"{path}.{key}",
                    "blueprint.model.option.unknown",
                    f"Unknown model option {key!r}; it is not passed to the model. Known options: "
                    f"{', '.join(sorted(KNOWN_MODEL_OPTIONS))}.",
                )

    def instructions(self) -> None:
        instructions = self.bp.instructions
        if instructions is None or not self.codeact or self.bp.kimi_prompt is not None:
            return  # ai4j.agent/v1 instructions are plain text; a kimi prompt was checked when it was loaded
        variables = {**builtin_variables(), **instructions.variables}
        for name in ("system", "developer"):
            text = getattr(instructions, name)
            if text is None:
                continue
            try:
                render_template(f"instructions.{name}", text, variables)
            except TemplateError as exc:
                problem = "undefined" if exc.variable is not None else "invalid"
                self.error(f"$.instructions.{name}", f"blueprint.instructions.template.{problem}", exc.message)

    def plugins(self) -> None:
        for index, plugin in enumerate(self.bp.plugins):
            if plugin is None or _trim(plugin.id) is None:
                self.error(
                    f"$.plugins[{index}].id", "blueprint.plugin.id.required", f"plugins[{index}].id is required."
                )

    def tools(self) -> None:
        for index, tool in enumerate(self.bp.tools):
            if tool is None or _trim(tool.ref) is None:
                self.error(f"$.tools[{index}].ref", "blueprint.tool.ref.required", f"tools[{index}].ref is required.")
                continue
            approval = _trim(tool.approval)
            if approval is not None and approval not in TOOL_APPROVALS:
                self.warning(
                    f"$.tools[{index}].approval",
                    "blueprint.tool.approval.unknown",
                    f"Unknown tool approval value: {approval}. Known values: {', '.join(TOOL_APPROVALS)}.",
                )

    def toolkits(self) -> None:
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.bp.toolkits):
            path = f"$.toolkits[{index}]"
            ref = None if entry is None else _trim(entry.ref)
            if entry is None or ref is None:
                self.error(
                    f"{path}.ref",
                    "blueprint.toolkit.ref.required",
                    f"toolkits[{index}].ref is required: the registry name of a toolkit, e.g. ref: system.",
                )
                continue
            if not _TOOLKIT_REF.match(ref):
                self.error(
                    f"{path}.ref",
                    "blueprint.toolkit.ref.invalid",
                    f"toolkits[{index}].ref {ref!r} is not a registry name; toolkits are granted by the name "
                    "they are registered under (letters, digits, '_', '.', '-'), never by import path.",
                )
            elif ref in seen:
                self.error(
                    f"{path}.ref",
                    "blueprint.toolkit.ref.duplicate",
                    f"Toolkit {ref!r} is granted twice (first at $.toolkits[{seen[ref]}]); merge the two entries.",
                )
            else:
                seen[ref] = index
            for op_index, operation in enumerate(entry.operations or []):
                if operation is None or not _IDENTIFIER.match(operation.strip()):
                    self.error(
                        f"{path}.operations[{op_index}]",
                        "blueprint.toolkit.operation.invalid",
                        f"toolkits[{index}].operations[{op_index}] must be an operation name (a Python identifier).",
                    )
            if entry.mcp is not None:
                self._mcp(index, ref, entry.mcp)
            if entry.a2a is not None:
                self._a2a(index, ref, entry.a2a)
            approval = _trim(entry.approval)
            if approval is not None and approval not in TOOLKIT_APPROVALS:
                self.warning(
                    f"{path}.approval",
                    "blueprint.toolkit.approval.unknown",
                    f"Unknown toolkit approval value: {approval}. Known values: {', '.join(TOOLKIT_APPROVALS)}.",
                )

    def _mcp(self, index: int, ref: str, mcp: dict[str, Any]) -> None:
        """``toolkits[].mcp``: an MCP server; secrets only by environment variable name (toolkits.mcp)."""
        from codeact.toolkits.mcp import config_problems

        path = f"$.toolkits[{index}]"
        if not ref.isidentifier() or ref.startswith("_"):
            self.error(
                f"{path}.ref",
                "blueprint.toolkit.mcp.ref",
                f"toolkits[{index}].ref {ref!r} names an MCP toolkit, the object the code calls: use a Python "
                "identifier such as fs or tracker.",
            )
        for problem in config_problems(mcp):
            self.error(f"{path}.mcp", "blueprint.toolkit.mcp.invalid", f"toolkits[{index}].{problem}.")

    def _a2a(self, index: int, ref: str, a2a: dict[str, Any]) -> None:
        """``toolkits[].a2a``: remote A2A agents by URL (toolkits.a2a)."""
        from codeact.toolkits.a2a.toolkit import a2a_problems

        path = f"$.toolkits[{index}]"
        if not ref.isidentifier() or ref.startswith("_"):
            self.error(
                f"{path}.ref",
                "blueprint.toolkit.a2a.ref",
                f"toolkits[{index}].ref {ref!r} names an A2A toolkit, the object the code calls: use a Python "
                "identifier such as agents.",
            )
        if self.bp.toolkits[index] is not None and self.bp.toolkits[index].mcp is not None:  # type: ignore[union-attr]
            self.error(f"{path}.a2a", "blueprint.toolkit.a2a.invalid", f"toolkits[{index}] has both mcp and a2a.")
        for problem in a2a_problems(a2a):
            self.error(f"{path}.a2a", "blueprint.toolkit.a2a.invalid", f"toolkits[{index}].{problem}.")

    def subagents(self) -> None:
        load_issues = [issue for issue in self.bp.load_issues if issue.code.startswith("blueprint.subagent.")]
        for name, entry in self.bp.subagents.items():
            if entry is None:
                continue  # removed (null overrides an inherited sub-agent)
            path = f"$.subagents.{name}"
            if not _ID.match(name):
                self.error(
                    path,
                    "blueprint.subagent.name.invalid",
                    f"Subagent name {name!r} must contain only letters, digits, '.', '_' or '-'.",
                )
            if _trim(entry.path) is None:
                self.error(
                    f"{path}.path",
                    "blueprint.subagent.path.required",
                    f"subagents.{name}.path is required: the sub-agent's blueprint file.",
                )
            if _trim(entry.description) is None:
                self.error(
                    f"{path}.description",
                    "blueprint.subagent.description.required",
                    f"subagents.{name}.description is required: it tells the parent what the sub-agent is for.",
                )
            self.issues.extend(issue for issue in load_issues if issue.path.startswith(f"{path}."))
            child = self.bp.subagent_blueprints.get(name)
            if child is not None:
                for issue in validate_blueprint(child).issues:
                    self.issues.append(
                        ValidationIssue(
                            severity=issue.severity,
                            path=f"{path}.path",
                            code=issue.code,
                            message=f"Subagent {name!r} at {issue.path}: {issue.message}",
                        )
                    )

    def knowledge(self) -> None:
        block = self.bp.knowledge
        if block is None:
            return
        from codeact.engine.blueprint.spec import KNOWLEDGE_FOLDER_GLOBS, KNOWLEDGE_KINDS

        if block.budget is not None and block.budget <= 0:
            self.error("$.knowledge.budget", "blueprint.knowledge.budget.invalid", "knowledge.budget must be positive.")
        if block.chunk_chars is not None and block.chunk_chars < 100:
            self.error(
                "$.knowledge.chunkChars",
                "blueprint.knowledge.chunkChars.invalid",
                f"knowledge.chunkChars must be at least 100 (got {block.chunk_chars}).",
            )
        mode = _trim(self.bp.workflow.mode) if self.bp.workflow is not None else None
        if any(entry is not None for entry in block.sources) and mode not in ("codeact", "react"):
            self.warning(
                "$.knowledge",
                "blueprint.knowledge.ignored",
                f"knowledge is retrieved into the prompt of workflow.mode codeact and react only (got {mode!r}); "
                "give the knowledge to the flow's agents.",
            )
        base = self.bp.source_path.parent if self.bp.source_path is not None else Path.cwd()
        for index, entry in enumerate(block.sources):
            if entry is None:
                continue
            path = f"$.knowledge.sources[{index}]"
            given = [name for name in ("text", "file", "folder") if getattr(entry, name) is not None]
            if len(given) != 1:
                self.error(
                    path,
                    "blueprint.knowledge.source.invalid",
                    f"knowledge.sources[{index}] needs exactly one of text, file or folder "
                    f"(got {' and '.join(given) if given else 'none'}).",
                )
                continue
            kind = _trim(entry.kind)
            if kind is not None and kind not in KNOWLEDGE_KINDS:
                close = difflib.get_close_matches(kind, KNOWLEDGE_KINDS, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else "."
                self.error(
                    f"{path}.kind",
                    "blueprint.knowledge.kind.invalid",
                    f"knowledge.sources[{index}].kind must be one of: {', '.join(KNOWLEDGE_KINDS)} "
                    f"(got {kind!r}){hint}",
                )
            if entry.text is not None:
                if not entry.text.strip():
                    self.error(
                        f"{path}.text", "blueprint.knowledge.text.empty", f"knowledge.sources[{index}].text is empty."
                    )
                continue
            field = given[0]
            raw = _trim(getattr(entry, field))
            if raw is None:
                self.error(
                    f"{path}.{field}",
                    "blueprint.knowledge.path.required",
                    f"knowledge.sources[{index}].{field} is empty: name a {field} relative to the blueprint's folder.",
                )
                continue
            target = Path(raw) if Path(raw).is_absolute() else base / raw
            shown = os.path.relpath(target, base) if target.is_relative_to(base) else str(target)
            if not target.exists():
                self.error(
                    f"{path}.{field}",
                    "blueprint.knowledge.notFound",
                    f"knowledge.sources[{index}]: {field} {shown!r} was not found (looked for {str(target)!r}); "
                    "a path is relative to the blueprint file that declares it: fix the path or remove the entry.",
                )
            elif field == "file" and not target.is_file():
                self.error(
                    f"{path}.file",
                    "blueprint.knowledge.notAFile",
                    f"knowledge.sources[{index}]: {shown!r} is a folder; write folder: {shown!r} instead of file:.",
                )
            elif field == "folder" and not target.is_dir():
                self.error(
                    f"{path}.folder",
                    "blueprint.knowledge.notAFolder",
                    f"knowledge.sources[{index}]: {shown!r} is a file; write file: {shown!r} instead of folder:.",
                )
            elif field == "folder":
                glob = _trim(entry.glob)
                patterns: tuple[str, ...] = (glob,) if glob is not None else KNOWLEDGE_FOLDER_GLOBS
                if not any(item.is_file() for pattern in patterns for item in target.rglob(pattern)):
                    self.warning(
                        f"{path}.folder",
                        "blueprint.knowledge.empty",
                        f"knowledge.sources[{index}]: folder {shown!r} has no file matching "
                        f"{', '.join(patterns)}; add files or set glob.",
                    )

    def output_schema(self) -> None:
        from codeact.engine.blueprint._output import check_output_schema

        self.issues.extend(check_output_schema(self.bp.output_schema))

    def prompt(self) -> None:
        """``prompt:``: the sections, templates and overrides as the prompt builder checks them."""
        block = self.bp.prompt
        if block is None:
            return
        from pydantic import ValidationError

        from codeact.segments import PromptConfig

        for key, value in (
            ("platform", block.platform),
            ("sections", block.sections),
            ("templates", block.templates),
            ("overrides", block.overrides),
        ):
            if value is None:
                continue
            try:
                PromptConfig.model_validate({key: tuple(value) if key == "sections" else value})
            except ValidationError as exc:
                message = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
                self.error(f"$.prompt.{key}", "blueprint.prompt.invalid", f"prompt.{key}: {message}.")

    def session(self, session: SessionBlock | None) -> None:
        if session is None:
            return
        memory = session.memory
        if (
            memory is not None
            and memory.enabled is True
            and _trim(memory.scope) is None
            and _trim(memory.store) is None
        ):
            self.warning(
                "$.session.memory",
                "blueprint.memory.scope.warning",
                "session.memory.enabled is true but neither scope nor store is declared.",
            )
        scope, store, strategy, unmapped = ai4j_session(session) if not self.codeact else _session_strings(session)
        self.issues.extend(unmapped)  # ai4j's free strings codeact has no counterpart for: warned, never refused
        if memory is not None:
            from codeact.engine.memory.settings import memory_config_problems

            for path, message in memory_config_problems(
                enabled=memory.enabled is True, scope=scope, store=store, config=memory.config
            ):
                self.error(path, "blueprint.memory.invalid", message)
        if strategy is not None and strategy not in COMPACT_STRATEGIES:
            self.error(
                "$.session.compact.strategy",
                "blueprint.compact.strategy.invalid",
                f"session.compact.strategy must be one of: {', '.join(COMPACT_STRATEGIES)} (got {strategy!r}).",
            )
        trigger = session.compact.trigger if session.compact is not None else None
        if trigger is None:
            return
        if trigger.context_ratio is not None and not 0.0 < trigger.context_ratio <= 1.0:
            self.error(
                "$.session.compact.trigger.contextRatio",
                "blueprint.compact.contextRatio.invalid",
                "contextRatio must be greater than 0 and less than or equal to 1.",
            )
        if trigger.max_turns is not None and trigger.max_turns <= 0:
            self.error(
                "$.session.compact.trigger.maxTurns",
                "blueprint.compact.maxTurns.invalid",
                "compact trigger maxTurns must be positive.",
            )

    def sandbox(self, sandbox: SandboxBlock | None) -> None:
        if sandbox is None:
            return
        has_selector = _trim(sandbox.provider) or _trim(sandbox.profile) or _trim(sandbox.backend)
        if sandbox.enabled is True and not has_selector:
            selector = "sandbox.backend, sandbox.provider" if self.codeact else "sandbox.provider"
            self.error(
                "$.sandbox",
                "blueprint.sandbox.selector.required",
                f"{selector} or sandbox.profile is required when sandbox.enabled is true.",
            )
        backend = _trim(sandbox.backend)
        if backend is not None and backend not in SANDBOX_BACKENDS:
            self.error(
                "$.sandbox.backend",
                "blueprint.sandbox.backend.invalid",
                f"sandbox.backend must be one of: {', '.join(SANDBOX_BACKENDS)} (got {backend!r}).",
            )
        runtime = _trim(sandbox.runtime)
        if runtime is not None and runtime not in SANDBOX_RUNTIMES:
            self.error(
                "$.sandbox.runtime",
                "blueprint.sandbox.runtime.invalid",
                f"sandbox.runtime must be one of: {', '.join(SANDBOX_RUNTIMES)} (got {runtime!r}).",
            )
        elif runtime == "gvisor" and backend != "docker":
            self.error(
                "$.sandbox.runtime",
                "blueprint.sandbox.runtime.backend",
                "sandbox.runtime gvisor runs Docker containers on gVisor: set sandbox.backend to docker.",
            )
        if sandbox.limits is not None:
            for field, info in type(sandbox.limits).model_fields.items():
                value = getattr(sandbox.limits, field)
                if value is not None and value <= 0:
                    self.error(
                        f"$.sandbox.limits.{info.alias}",
                        "blueprint.sandbox.limits.invalid",
                        f"sandbox.limits.{info.alias} must be positive.",
                    )
        for index, module in enumerate(sandbox.imports or []):
            if module is None or not _MODULE.match(module.strip()):
                self.error(
                    f"$.sandbox.imports[{index}]",
                    "blueprint.sandbox.imports.invalid",
                    f"sandbox.imports[{index}] must be a module name such as json or collections.abc.",
                )
        self._sandbox_packages(sandbox)

    def _sandbox_packages(self, sandbox: SandboxBlock) -> None:
        from codeact.sandbox.env import PRESETS, normalize_requirement
        from codeact.sandbox.errors import EnvironmentBuildError

        for index, requirement in enumerate(sandbox.packages or []):
            try:
                normalize_requirement(requirement or "")
            except EnvironmentBuildError:
                self.error(
                    f"$.sandbox.packages[{index}]",
                    "blueprint.sandbox.packages.invalid",
                    f"sandbox.packages[{index}] must be a pip requirement such as numpy or pandas>=2.2 "
                    f"(got {requirement!r}; URLs, paths, options and markers are not accepted).",
                )
        preset = _trim(sandbox.preset)
        if sandbox.preset is not None and preset not in PRESETS:
            self.error(
                "$.sandbox.preset",
                "blueprint.sandbox.preset.unknown",
                f"sandbox.preset must be one of: {', '.join(sorted(PRESETS))} (got {sandbox.preset!r}).",
            )

    def workflow(self, workflow: WorkflowBlock | None) -> None:
        if workflow is None:
            return  # no workflow means react
        mode = _trim(workflow.mode)
        # ``flow`` (engine.flow) is a codeact.agent/v1 mode; ai4j.agent/v1 keeps ai4j's two.
        modes = WORKFLOW_MODES if self.codeact else WORKFLOW_MODES[:2]
        if mode is not None and mode not in modes:
            self.error(
                "$.workflow.mode",
                "blueprint.workflow.mode.invalid",
                f"workflow.mode must be one of: {', '.join(modes)}.",
            )
        if workflow.max_turns is not None and workflow.max_turns <= 0:
            self.error(
                "$.workflow.maxTurns", "blueprint.workflow.maxTurns.invalid", "workflow.maxTurns must be positive."
            )
        codeact = workflow.codeact
        if codeact is None:
            return
        if mode != "codeact":
            self.warning(
                "$.workflow.codeact",
                "blueprint.workflow.codeact.ignored",
                "workflow.codeact is ignored because workflow.mode is not codeact; set mode: codeact.",
            )
        for field, allowed in (("thought", THOUGHT_MODES), ("protocol", FIM_PROTOCOLS), ("layout", CHAT_LAYOUTS)):
            value = _trim(getattr(codeact, field))
            if value is not None and value not in allowed:
                self.error(
                    f"$.workflow.codeact.{field}",
                    f"blueprint.workflow.codeact.{field}.invalid",
                    f"workflow.codeact.{field} must be one of: {', '.join(allowed)} (got {value!r}).",
                )
        tokens = codeact.fim.tokens if codeact.fim is not None else None
        if tokens is not None:
            for marker in ("prefix", "suffix", "middle"):
                if not getattr(tokens, marker):
                    self.error(
                        f"$.workflow.codeact.fim.tokens.{marker}",
                        "blueprint.workflow.codeact.fim.tokens.required",
                        f"workflow.codeact.fim.tokens.{marker} is required when fim.tokens is given "
                        "(or use fim.family instead).",
                    )
        name = _trim(codeact.answer_variable)
        if name is not None and name != "off" and not (name.isidentifier() and not name.startswith("_")):
            self.error(
                "$.workflow.codeact.answerVariable",
                "blueprint.workflow.codeact.answerVariable.invalid",
                f"workflow.codeact.answerVariable must be a public Python name (like answer) or off (got {name!r}).",
            )
        for field, alias in (("max_repeats", "maxRepeats"), ("max_self_checks", "maxSelfChecks")):
            value = getattr(codeact, field)
            if value is not None and value <= 0:
                self.error(
                    f"$.workflow.codeact.{alias}",
                    f"blueprint.workflow.codeact.{alias}.invalid",
                    f"workflow.codeact.{alias} must be positive.",
                )

    def flow(self) -> None:
        if self.bp.flow is None and (self.bp.workflow is None or _trim(self.bp.workflow.mode) != "flow"):
            return
        from codeact.engine.blueprint._flow import check_flow

        self.issues.extend(check_flow(self.bp, lambda child: list(validate_blueprint(child).issues)))

    def unknown(self) -> None:
        for item in self.bp.unknown_fields:
            name = item.path[2:]
            message = f"Unknown field: {name}" if "." in name or "[" in name else f"Unknown top-level field: {name}"
            if item.origin is not None:
                message = f"{message} (in base blueprint {item.origin!r})"
            # A field of a base came from a codeact.agent/v1 file (only those are extended).
            codeact = self.codeact or item.origin is not None
            hint = _did_you_mean(item.path, codeact=codeact)
            if _decides_access(item.path, codeact=codeact):
                self.error(item.path, "blueprint.safety.field.unknown", f"{message}{hint or '.'} {_FAIL_CLOSED}")
            else:
                self.warning(item.path, "blueprint.field.unknown", f"{message}{hint or '.'}")


_FAIL_CLOSED: Final = "Keys that decide what the model may do are never ignored: fix this one or remove it."
# Top-level names that read as a setting of what the model may do, though no blueprint field has them.
_ACCESS_WORDS: Final = ("approval", "grants", "limits", "network", "permissions", "policy", "secrets")


def _decides_access(path: str, *, codeact: bool) -> bool:
    """Whether an unknown key at ``path`` sits where keys decide what the model may do (issue 35: fail closed).

    Inside a fail-closed block (a toolkit or tool grant, the sandbox, its limits) every unknown key
    does; at the top level, a name close to such a block's field (``toolkit``, ``sandboxes``) or to
    a word of access (``network``, ``secrets``, ``policy``, ...) does.
    """
    if path.count(".") > 1 or "[" in path:
        return bool(getattr(block_at(Blueprint, path, codeact=codeact), "fail_closed", False))
    name = path[2:].lower().replace("_", "").replace("-", "")
    top = known_keys(Blueprint, "$.x", codeact=True)
    guarded = [key for key in top if getattr(field_block(Blueprint, key), "fail_closed", False)]
    words = [*(key.lower() for key in guarded), *_ACCESS_WORDS]
    return bool(difflib.get_close_matches(name, words, n=1, cutoff=0.75))


def _did_you_mean(path: str, *, codeact: bool) -> str:
    """``; did you mean 'toolkits'?`` from the known keys of the mapping holding ``path`` ('' if none is close).

    In an ``ai4j.agent/v1`` file a ``codeact.agent/v1`` field is named as such, with the fix.
    """
    name = re.split(r"[.\[]", path)[-1]
    holder = block_at(Blueprint, path, codeact=codeact)
    if not codeact and name in getattr(holder, "codeact_only", ()):
        return f"; it is a {CODEACT_VERSION} field: set version: {CODEACT_VERSION} to use it."
    known = known_keys(Blueprint, path, codeact=codeact)
    by_folded = {key.lower().replace("_", ""): key for key in known}
    close = difflib.get_close_matches(name.lower().replace("_", ""), list(by_folded), n=1, cutoff=0.6)
    return f"; did you mean {by_folded[close[0]]!r}?" if close else ""


def validate_blueprint(blueprint: Blueprint) -> ValidationReport:
    """Validate a loaded blueprint (and, recursively, its sub-agents).

    Returns:
        The report; ``report.valid`` is True iff no issue is an ``ERROR``.
    """
    return _Checks(blueprint).run()


def _session_strings(session: SessionBlock) -> tuple[str | None, str | None, str | None, list[ValidationIssue]]:
    memory, compact = session.memory, session.compact
    return (
        _trim(memory.scope) if memory is not None else None,
        _trim(memory.store) if memory is not None else None,
        _trim(compact.strategy) if compact is not None else None,
        [],
    )


def ai4j_session(session: SessionBlock) -> tuple[str | None, str | None, str | None, list[ValidationIssue]]:
    """An ``ai4j.agent/v1`` file's free strings (``session.memory.scope``/``store``, ``session.compact.strategy``).

    ai4j checks their structure only. codeact keeps each one it has a counterpart for, and runs the
    nearest safe value (with a warning that says so) for one it has not: the ``session`` scope (nothing
    is shared beyond the session), the run's own store, the ``structured-summary`` compaction.

    Returns:
        ``(scope, store, strategy, warnings)`` as codeact runs them.
    """
    from codeact.engine.memory.settings import SCOPES, is_memory_store

    scope, store, strategy, _ = _session_strings(session)
    warnings: list[ValidationIssue] = []
    if scope is not None and scope not in SCOPES:
        warnings.append(
            ValidationIssue.warning(
                "$.session.memory.scope",
                "blueprint.memory.scope.unmapped",
                f"session.memory.scope {scope!r} has no codeact counterpart ({', '.join(SCOPES)}); this run keeps "
                "memory to the session (nothing is shared beyond it). Set one of them to choose.",
            )
        )
        scope = "session"
    if store is not None and not is_memory_store(store):
        warnings.append(
            ValidationIssue.warning(
                "$.session.memory.store",
                "blueprint.memory.store.unmapped",
                f"session.memory.store {store!r} is not a store codeact opens; this run keeps memory in the run's "
                "own store. Set 'session', sqlite:///PATH or redis://HOST:PORT/DB to choose.",
            )
        )
        store = None
    if strategy is not None and strategy not in COMPACT_STRATEGIES:
        warnings.append(
            ValidationIssue.warning(
                "$.session.compact.strategy",
                "blueprint.compact.strategy.unmapped",
                f"session.compact.strategy {strategy!r} has no codeact counterpart; this run compacts with "
                f"{', '.join(COMPACT_STRATEGIES)}.",
            )
        )
        strategy = COMPACT_STRATEGIES[0]
    return scope, store, strategy, warnings
