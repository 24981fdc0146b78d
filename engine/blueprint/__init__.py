"""Agent blueprints: load YAML, validate it, inherit with ``extend``, and build agent specs.

``ai4j.agent/v1`` files load and validate exactly as ai4j does; ``codeact.agent/v1`` adds
``extend``, ``toolkits``, ``subagents``, ``model.routes``, ``workflow.codeact`` and a richer
``sandbox``. Typical use::

    from codeact.engine.blueprint import AgentFactory, HostContext, load_path, validate_blueprint

    blueprint = load_path("agent.yaml")          # BlueprintLoadError on unreadable input
    report = validate_blueprint(blueprint)       # issues with severity, path, code, message
    spec = AgentFactory().create(blueprint, HostContext(model_client=client))
"""

from __future__ import annotations

from codeact.engine.blueprint._flow import agent_name, is_flow
from codeact.engine.blueprint._output import read_schema
from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.bundle import MAX_BUNDLE_BYTES, pack_blueprint, unpack_blueprint
from codeact.engine.blueprint.factory import (
    DEFAULT_MAX_TURNS,
    AgentFactory,
    HostContext,
    blueprint_hash,
    format_factory_error,
    format_load_error,
    granted_toolkits,
    print_warnings,
    render_instructions,
    strict_error,
    ungranted_error,
)
from codeact.engine.blueprint.inheritance import INHERIT, MAX_EXTEND_DEPTH, builtin_names
from codeact.engine.blueprint.issues import Severity, ValidationIssue, ValidationReport
from codeact.engine.blueprint.models import (
    AI4J_VERSION,
    CODEACT_VERSION,
    MAX_SUBAGENT_DEPTH,
    SUPPORTED_VERSIONS,
    Blueprint,
    load_path,
    load_stream,
    load_text,
)
from codeact.engine.blueprint.modes import SandboxBackend, ThoughtMode, WorkflowMode
from codeact.engine.blueprint.spec import (
    AgentKind,
    AgentSpec,
    CodeActSettings,
    CompactSettings,
    FimMarkers,
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
from codeact.engine.blueprint.templates import RenderedInstructions
from codeact.engine.blueprint.validator import sandbox_declared, validate_blueprint

__all__ = [
    "AI4J_VERSION",
    "AgentFactory",
    "AgentKind",
    "AgentSpec",
    "Blueprint",
    "CODEACT_VERSION",
    "CodeActSettings",
    "CompactSettings",
    "DEFAULT_MAX_TURNS",
    "FimMarkers",
    "HostContext",
    "INHERIT",
    "MAX_BUNDLE_BYTES",
    "MAX_EXTEND_DEPTH",
    "MAX_SUBAGENT_DEPTH",
    "MemorySettings",
    "ModelOptions",
    "ModelSettings",
    "PluginRef",
    "RenderedInstructions",
    "RoutePurpose",
    "SUPPORTED_VERSIONS",
    "SandboxBackend",
    "SandboxLimitSettings",
    "SandboxSettings",
    "SessionSettings",
    "Severity",
    "SubagentSpec",
    "ThoughtMode",
    "ToolRef",
    "ToolkitGrant",
    "ValidationIssue",
    "ValidationReport",
    "WorkflowMode",
    "agent_name",
    "blueprint_hash",
    "builtin_names",
    "format_factory_error",
    "format_load_error",
    "granted_toolkits",
    "is_flow",
    "load_path",
    "load_stream",
    "load_text",
    "pack_blueprint",
    "parse_yaml",
    "print_warnings",
    "read_schema",
    "render_instructions",
    "sandbox_declared",
    "strict_error",
    "ungranted_error",
    "unpack_blueprint",
    "validate_blueprint",
]
