from __future__ import annotations

import pytest

from codeact.engine.blueprint import (
    Blueprint,
    Severity,
    ValidationIssue,
    ValidationReport,
    load_text,
    validate_blueprint,
)
from codeact.engine.blueprint.models import ModelBlock

from ._helpers import report_for, triples

E, W = "ERROR", "WARNING"

# (fixture, [(severity, path, code), ...]) -- the FULL report, in order.
CASES = [
    pytest.param("validate/valid_ai4j_full.yaml", [], id="seed-full-example-valid"),
    pytest.param("validate/workflow_missing.yaml", [], id="workflow-missing-is-react"),
    pytest.param("validate/model_profile_only.yaml", [], id="profile-is-a-selector"),
    pytest.param(
        "validate/version_required.yaml", [(E, "$.version", "blueprint.version.required")], id="version.required"
    ),
    pytest.param(
        "validate/version_unsupported.yaml",
        [(E, "$.version", "blueprint.version.unsupported")],
        id="version.unsupported",
    ),
    pytest.param("validate/id_required.yaml", [(E, "$.id", "blueprint.id.required")], id="id.required"),
    pytest.param("validate/id_invalid.yaml", [(E, "$.id", "blueprint.id.invalid")], id="id.invalid"),
    pytest.param("validate/model_required.yaml", [(E, "$.model", "blueprint.model.required")], id="model.required"),
    pytest.param(
        "validate/model_provider_required.yaml",
        [(E, "$.model.provider", "blueprint.model.provider.required")],
        id="model.provider.required",
    ),
    pytest.param(
        "validate/model_selector_required.yaml",
        [(E, "$.model.model", "blueprint.model.selector.required")],
        id="model.selector.required",
    ),
    pytest.param(
        "validate/plugin_id_required.yaml",
        [
            (E, "$.plugins[0].id", "blueprint.plugin.id.required"),
            (E, "$.plugins[1].id", "blueprint.plugin.id.required"),
        ],
        id="plugin.id.required-null-and-blank",
    ),
    pytest.param(
        "validate/tool_ref_required.yaml",
        [(E, "$.tools[1].ref", "blueprint.tool.ref.required"), (E, "$.tools[2].ref", "blueprint.tool.ref.required")],
        id="tool.ref.required-null-and-missing",
    ),
    pytest.param(
        "validate/tool_approval_unknown.yaml",
        [(W, "$.tools[1].approval", "blueprint.tool.approval.unknown")],
        id="tool.approval.unknown",
    ),
    pytest.param(
        "validate/memory_scope_warning.yaml",
        [(W, "$.session.memory", "blueprint.memory.scope.warning")],
        id="memory.scope.warning",
    ),
    pytest.param(
        "validate/compact_context_ratio_invalid.yaml",
        [(E, "$.session.compact.trigger.contextRatio", "blueprint.compact.contextRatio.invalid")],
        id="compact.contextRatio.invalid-above-1",
    ),
    pytest.param(
        "validate/compact_context_ratio_zero.yaml",
        [(E, "$.session.compact.trigger.contextRatio", "blueprint.compact.contextRatio.invalid")],
        id="compact.contextRatio.invalid-zero",
    ),
    pytest.param(
        "validate/compact_max_turns_invalid.yaml",
        [(E, "$.session.compact.trigger.maxTurns", "blueprint.compact.maxTurns.invalid")],
        id="compact.maxTurns.invalid-ratio-1-ok",
    ),
    pytest.param(
        "validate/sandbox_selector_required.yaml",
        [(E, "$.sandbox", "blueprint.sandbox.selector.required")],
        id="sandbox.selector.required",
    ),
    pytest.param(
        "validate/workflow_mode_invalid.yaml",
        [(E, "$.workflow.mode", "blueprint.workflow.mode.invalid")],
        id="workflow.mode",
    ),
    pytest.param(
        "validate/workflow_max_turns_invalid.yaml",
        [(E, "$.workflow.maxTurns", "blueprint.workflow.maxTurns.invalid")],
        id="workflow.maxTurns.invalid",
    ),
    pytest.param(
        "validate/field_unknown.yaml",
        # ai4j reports unknown fields at the top level only, as warnings; but ``toolkits`` is a grant,
        # which is never ignored silently (issue 35: fail closed).
        [(E, "$.toolkits", "blueprint.safety.field.unknown"), (W, "$.team", "blueprint.field.unknown")],
        id="field.unknown-ai4j-top-level-only",
    ),
    pytest.param(
        "validate/order_all_errors.yaml",
        [
            (E, "$.version", "blueprint.version.unsupported"),
            (E, "$.id", "blueprint.id.invalid"),
            (E, "$.model.provider", "blueprint.model.provider.required"),
            (E, "$.model.model", "blueprint.model.selector.required"),
            (E, "$.plugins[0].id", "blueprint.plugin.id.required"),
            (E, "$.tools[0].ref", "blueprint.tool.ref.required"),
            (E, "$.session.compact.trigger.contextRatio", "blueprint.compact.contextRatio.invalid"),
            (E, "$.sandbox", "blueprint.sandbox.selector.required"),
            (E, "$.workflow.mode", "blueprint.workflow.mode.invalid"),
            (W, "$.zzz", "blueprint.field.unknown"),
        ],
        id="order-version-id-model-plugins-tools-session-sandbox-workflow-unknown",
    ),
    # codeact.agent/v1 fields
    pytest.param(
        "validate/cx_model_route_required.yaml",
        [(E, "$.model.routes.code.model", "blueprint.model.route.model.required")],
        id="model.route.model.required",
    ),
    pytest.param(
        "validate/cx_model_context_window_invalid.yaml",
        [(E, "$.model.contextWindow", "blueprint.model.contextWindow.invalid")],
        id="model.contextWindow.invalid",
    ),
    pytest.param(
        "validate/cx_model_option_unknown.yaml",
        [
            (W, "$.model.options.api_base", "blueprint.model.option.unknown"),
            (W, "$.model.routes.utility.options.frequency", "blueprint.model.option.unknown"),
        ],
        id="model.option.unknown",
    ),
    pytest.param(
        "validate/cx_template_undefined.yaml",
        [(E, "$.instructions.system", "blueprint.instructions.template.undefined")],
        id="instructions.template.undefined-builtins-defined",
    ),
    pytest.param(
        "validate/cx_template_invalid.yaml",
        [
            (E, "$.instructions.system", "blueprint.instructions.template.invalid"),
            (E, "$.instructions.developer", "blueprint.instructions.template.invalid"),
        ],
        id="instructions.template.invalid-syntax-and-sandbox",
    ),
    pytest.param(
        "validate/cx_toolkits.yaml",
        [
            (E, "$.toolkits[1].ref", "blueprint.toolkit.ref.required"),
            (E, "$.toolkits[2].ref", "blueprint.toolkit.ref.invalid"),
            (E, "$.toolkits[3].operations[1]", "blueprint.toolkit.operation.invalid"),
            (E, "$.toolkits[3].operations[2]", "blueprint.toolkit.operation.invalid"),
            (W, "$.toolkits[3].approval", "blueprint.toolkit.approval.unknown"),
            (E, "$.toolkits[4].ref", "blueprint.toolkit.ref.duplicate"),
            (E, "$.toolkits[5].ref", "blueprint.toolkit.ref.required"),
        ],
        id="toolkit-codes",
    ),
    pytest.param(
        "validate/cx_subagent_fields.yaml",
        [
            (E, "$.subagents.bad name", "blueprint.subagent.name.invalid"),
            (E, "$.subagents.bad name.path", "blueprint.subagent.notFound"),
            (E, "$.subagents.nopath.path", "blueprint.subagent.path.required"),
            (E, "$.subagents.nodesc.description", "blueprint.subagent.description.required"),
        ],
        id="subagent-field-codes",
    ),
    pytest.param(
        "validate/cx_sandbox.yaml",
        [
            (E, "$.sandbox.backend", "blueprint.sandbox.backend.invalid"),
            (E, "$.sandbox.limits.timeoutSeconds", "blueprint.sandbox.limits.invalid"),
            (E, "$.sandbox.limits.pids", "blueprint.sandbox.limits.invalid"),
            (E, "$.sandbox.imports[1]", "blueprint.sandbox.imports.invalid"),
        ],
        id="sandbox-codeact-codes-backend-is-a-selector",
    ),
    pytest.param(
        "validate/cx_sandbox_selector.yaml",
        [(E, "$.sandbox", "blueprint.sandbox.selector.required")],
        id="sandbox.selector.required-codeact",
    ),
    pytest.param(
        "validate/cx_workflow_codeact.yaml",
        [
            (E, "$.workflow.codeact.thought", "blueprint.workflow.codeact.thought.invalid"),
            (E, "$.workflow.codeact.protocol", "blueprint.workflow.codeact.protocol.invalid"),
            (E, "$.workflow.codeact.fim.tokens.middle", "blueprint.workflow.codeact.fim.tokens.required"),
            (E, "$.workflow.codeact.maxRepeats", "blueprint.workflow.codeact.maxRepeats.invalid"),
            (E, "$.workflow.codeact.maxSelfChecks", "blueprint.workflow.codeact.maxSelfChecks.invalid"),
        ],
        id="workflow.codeact-codes",
    ),
    pytest.param(
        "validate/cx_workflow_codeact_ignored.yaml",
        [(W, "$.workflow.codeact", "blueprint.workflow.codeact.ignored")],
        id="workflow.codeact.ignored",
    ),
    pytest.param(
        "validate/cx_field_unknown.yaml",
        [
            (W, "$.model.routes.planner", "blueprint.field.unknown"),
            (W, "$.workflow.codeact.selfcheck", "blueprint.field.unknown"),
            (W, "$.allow_sandbox_declaration", "blueprint.field.unknown"),
        ],
        id="field.unknown-codeact-nested",
    ),
    pytest.param(
        "validate/cx_safety_field_unknown.yaml",
        [
            (E, "$.toolkits[0].aproval", "blueprint.safety.field.unknown"),
            (E, "$.sandbox.limits.memoryMB", "blueprint.safety.field.unknown"),
            (E, "$.sandbox.network", "blueprint.safety.field.unknown"),
            (E, "$.toolkit", "blueprint.safety.field.unknown"),
            (E, "$.secrets", "blueprint.safety.field.unknown"),
            (W, "$.teams", "blueprint.field.unknown"),
        ],
        id="safety.field.unknown-codeact",
    ),
    pytest.param(
        "validate/safety_field_unknown.yaml",
        [
            (E, "$.tools[0].aproval", "blueprint.safety.field.unknown"),
            (E, "$.sandbox.backend", "blueprint.safety.field.unknown"),
        ],
        id="safety.field.unknown-ai4j-nested",
    ),
]


@pytest.mark.parametrize(("name", "expected"), CASES)
def test_fixture_reports(name: str, expected: list[tuple[str, str, str]]) -> None:
    report = report_for(name)
    assert triples(report) == expected
    assert report.valid is (not any(severity == E for severity, _, _ in expected))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param(
            "validate/version_required.yaml",
            "version is required; write version: codeact.agent/v1 (or ai4j.agent/v1).",
            id="version.required",
        ),
        pytest.param(
            "validate/version_unsupported.yaml",
            "Unsupported blueprint version: ai4j.agent/v2. Use codeact.agent/v1 or ai4j.agent/v1.",
            id="version.unsupported",
        ),
        pytest.param(
            "validate/id_invalid.yaml",
            "id must contain only letters, digits, '.', '_' or '-' (got 'coding assistant!').",
            id="id.invalid",
        ),
        pytest.param(
            "validate/model_selector_required.yaml", "model.model or model.profile is required.", id="selector"
        ),
        pytest.param(
            "validate/tool_approval_unknown.yaml",
            "Unknown tool approval value: sometimes. Known values: always, safe, never, manual, auto, deny.",
            id="tool.approval.unknown",
        ),
        pytest.param(
            "validate/memory_scope_warning.yaml",
            "session.memory.enabled is true but neither scope nor store is declared.",
            id="memory.scope.warning",
        ),
        pytest.param(
            "validate/compact_context_ratio_invalid.yaml",
            "contextRatio must be greater than 0 and less than or equal to 1.",
            id="compact.contextRatio.invalid",
        ),
        pytest.param(
            "validate/sandbox_selector_required.yaml",
            "sandbox.provider or sandbox.profile is required when sandbox.enabled is true.",
            id="sandbox.selector.required",
        ),
        pytest.param(
            "validate/workflow_mode_invalid.yaml", "workflow.mode must be one of: react, codeact.", id="workflow.mode"
        ),
        pytest.param(
            "validate/workflow_max_turns_invalid.yaml", "workflow.maxTurns must be positive.", id="workflow.maxTurns"
        ),
        pytest.param(
            "validate/cx_template_undefined.yaml",
            "instructions.system uses undefined variable 'project'; define it under instructions.variables "
            "(built-ins: now, os, work_dir).",
            id="template.undefined",
        ),
        pytest.param(
            "validate/cx_toolkits.yaml",
            "toolkits[1].ref is required: the registry name of a toolkit, e.g. ref: system.",
            id="toolkit.ref.required",
        ),
    ],
)
def test_first_issue_message_is_pinned(name: str, message: str) -> None:
    assert report_for(name).issues[0].message == message


def test_unknown_field_messages() -> None:
    assert [issue.message for issue in report_for("validate/cx_field_unknown.yaml").issues] == [
        "Unknown field: model.routes.planner.",
        "Unknown field: workflow.codeact.selfcheck; did you mean 'selfCheck'?",
        "Unknown top-level field: allow_sandbox_declaration.",
    ]


def test_safety_field_messages_name_the_fix() -> None:
    fix = "Keys that decide what the model may do are never ignored: fix this one or remove it."
    assert [issue.message for issue in report_for("validate/cx_safety_field_unknown.yaml").errors] == [
        f"Unknown field: toolkits[0].aproval; did you mean 'approval'? {fix}",
        f"Unknown field: sandbox.limits.memoryMB; did you mean 'memoryMb'? {fix}",
        f"Unknown field: sandbox.network. {fix}",
        f"Unknown top-level field: toolkit; did you mean 'toolkits'? {fix}",
        f"Unknown top-level field: secrets. {fix}",
    ]
    assert [issue.message for issue in report_for("validate/safety_field_unknown.yaml").errors] == [
        f"Unknown field: tools[0].aproval; did you mean 'approval'? {fix}",
        "Unknown field: sandbox.backend; it is a codeact.agent/v1 field: set version: codeact.agent/v1 to use it. "
        + fix,
    ]


def test_report_to_dict_and_accessors() -> None:
    report = report_for("validate/tool_ref_required.yaml")
    assert report.to_dict() == {
        "valid": False,
        "issues": [
            {
                "severity": "ERROR",
                "path": "$.tools[1].ref",
                "code": "blueprint.tool.ref.required",
                "message": "tools[1].ref is required.",
            },
            {
                "severity": "ERROR",
                "path": "$.tools[2].ref",
                "code": "blueprint.tool.ref.required",
                "message": "tools[2].ref is required.",
            },
        ],
    }
    assert report.errors == report.issues and report.warnings == ()
    assert report.codes() == ["blueprint.tool.ref.required", "blueprint.tool.ref.required"]


def test_warnings_alone_keep_the_report_valid() -> None:
    report = ValidationReport(
        issues=(ValidationIssue.warning("$.x", "blueprint.field.unknown", "Unknown top-level field: x."),)
    )
    assert report.valid and report.warnings[0].severity is Severity.WARNING


def test_blueprint_built_in_python_validates_too() -> None:
    blueprint = Blueprint(version="ai4j.agent/v1", id="py", model=ModelBlock(provider="openai-compatible", model="m"))
    assert validate_blueprint(blueprint).issues == ()


def test_ai4j_instructions_are_not_templates() -> None:
    text = "version: ai4j.agent/v1\nid: t\nmodel: {provider: openai, model: m}\ninstructions: {system: '{{ nope }}'}\n"
    assert validate_blueprint(load_text(text)).issues == ()


def test_unquoted_thought_off_means_off() -> None:
    from codeact.engine.blueprint import load_text, validate_blueprint

    bp = load_text(
        "version: codeact.agent/v1\nid: a\nmodel: {provider: openai, model: m}\n"
        "workflow: {mode: codeact, codeact: {thought: off}}\n"
    )
    assert validate_blueprint(bp).valid
    assert bp.workflow is not None and bp.workflow.codeact is not None
    assert bp.workflow.codeact.thought == "off"


def test_mcp_and_a2a_unknown_keys_are_errors_with_the_did_you_mean() -> None:
    report = validate_blueprint(
        load_text(
            "version: codeact.agent/v1\nid: a\nmodel: {provider: openai, model: m}\ntoolkits:\n"
            "  - ref: fs\n    mcp: {url: 'http://127.0.0.1:1/mcp', timout: 5}\n"
            "  - ref: agents\n    a2a: {agents: {reviewer: 'http://127.0.0.1:2'}, timout: 5}\n"
        )
    )
    assert [issue.message for issue in report.errors] == [
        "toolkits[0].mcp.timout is not a known field (did you mean 'timeout'?); known fields: args, command, cwd, "
        "env, headers, startTimeout, timeout, url.",
        "toolkits[1].a2a.timout is not a known field (did you mean 'timeout'?); known fields: agents, timeout.",
    ]
