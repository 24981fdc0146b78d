from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from codeact.engine.blueprint import (
    DEFAULT_MAX_TURNS,
    AgentFactory,
    AgentSpec,
    Blueprint,
    FimMarkers,
    HostContext,
    ModelOptions,
    ValidationReport,
    blueprint_hash,
    format_factory_error,
    load_path,
    load_text,
)
from codeact.engine.errors import BlueprintFactoryError

from ._helpers import FIXTURES, fixture

CLIENT = object()  # the factory only checks that the host supplied a client
NOW = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


def _create(blueprint: Blueprint, **context: object) -> BlueprintFactoryError:
    with pytest.raises(BlueprintFactoryError) as caught:
        AgentFactory().create(blueprint, HostContext(**context))  # type: ignore[arg-type]
    return caught.value


def _text(body: str) -> Blueprint:
    return load_text(f"version: ai4j.agent/v1\nid: t\n{body}")


# --- check order: one test per step, each showing that the earlier check wins -----------------------------------


def test_step1_validation_failed_wins_over_everything() -> None:
    # invalid id AND sandbox declared AND no model client AND no model.model AND bad options
    blueprint = load_text(
        "version: ai4j.agent/v1\nid: bad id\nmodel: {provider: openai, profile: x, options: {temperature: hot}}\n"
        "sandbox: {enabled: true}\n"
    )
    error = _create(blueprint)
    assert error.code == "blueprint.validation.failed"
    assert isinstance(error.report, ValidationReport) and not error.report.valid
    assert error.message == (
        "Agent Blueprint validation failed with 2 errors; fix the issues listed (codeact validate FILE shows them)."
    )
    assert [issue.code for issue in error.report.errors] == [
        "blueprint.id.invalid",
        "blueprint.sandbox.selector.required",
    ]


def test_step2_sandbox_unsupported_wins_over_missing_client() -> None:
    error = _create(load_path(fixture("factory/sandbox_declared_ai4j.yaml")))
    assert error.code == "blueprint.sandbox.unsupported"
    assert error.message == (
        "The blueprint declares a sandbox, but the host has not allowed sandbox declarations; pass "
        "--allow-sandbox-declaration (HostContext(allow_sandbox_declaration=True)) or remove the sandbox block."
    )
    assert isinstance(error.report, ValidationReport) and error.report.valid


def test_step3_model_client_required_wins_over_profile_only() -> None:
    error = _create(load_path(fixture("factory/sandbox_declared_ai4j.yaml")), allow_sandbox_declaration=True)
    assert error.code == "blueprint.modelClient.required"
    assert error.message == (
        "A model client is required. Provide it from the host (HostContext(model_client=...)); the factory does "
        "not read provider keys or profiles."
    )


def test_step4_model_required_for_factory_wins_over_option_mapping() -> None:
    error = _create(load_path(fixture("factory/profile_only_codeact.yaml")), model_client=CLIENT)
    assert error.code == "blueprint.model.model.requiredForFactory"
    assert error.message == (
        "model.model is required by AgentFactory. model.profile is host metadata only and is not resolved by the "
        "factory; set model.model in the blueprint or pass --model."
    )


def test_step5_option_mapping_number_before_integer() -> None:
    error = _create(load_path(fixture("factory/bad_options.yaml")), model_client=CLIENT)
    assert (error.code, error.message) == (
        "blueprint.option.number.invalid",
        "$.model.options.temperature must be a number.",
    )


@pytest.mark.parametrize(
    ("options", "code", "message"),
    [
        pytest.param(
            "{temperature: hot}",
            "blueprint.option.number.invalid",
            "$.model.options.temperature must be a number.",
            id="temperature",
        ),
        pytest.param(
            "{top_p: [1]}",
            "blueprint.option.number.invalid",
            "$.model.options.topP must be a number.",
            id="top_p-named-topP",
        ),
        pytest.param(
            "{maxOutputTokens: 1.5}",
            "blueprint.option.integer.invalid",
            "$.model.options.maxOutputTokens must be an integer.",
            id="maxOutputTokens",
        ),
        pytest.param(
            "{max_output_tokens: '2k'}",
            "blueprint.option.integer.invalid",
            "$.model.options.maxOutputTokens must be an integer.",
            id="max_output_tokens",
        ),
        pytest.param(
            "{parallelToolCalls: 'yes'}",
            "blueprint.option.boolean.invalid",
            "$.model.options.parallelToolCalls must be a boolean.",
            id="parallelToolCalls",
        ),
        pytest.param(
            "{parallel_tool_calls: 1}",
            "blueprint.option.boolean.invalid",
            "$.model.options.parallelToolCalls must be a boolean.",
            id="parallel_tool_calls",
        ),
        pytest.param(
            "{store: maybe}", "blueprint.option.boolean.invalid", "$.model.options.store must be a boolean.", id="store"
        ),
        pytest.param(
            "{seed: 0.5}", "blueprint.option.integer.invalid", "$.model.options.seed must be an integer.", id="seed"
        ),
        pytest.param(
            "{stop: [1]}",
            "blueprint.option.string.invalid",
            "$.model.options.stop must be a string or a list of strings.",
            id="stop",
        ),
    ],
)
def test_option_mapping_errors(options: str, code: str, message: str) -> None:
    error = _create(_text(f"model: {{provider: openai, model: m, options: {options}}}\n"), model_client=CLIENT)
    assert (error.code, error.message) == (code, message)
    assert error.report is None  # as ai4j: option errors carry no report


def test_route_option_errors_name_the_route() -> None:
    blueprint = load_text(
        "version: codeact.agent/v1\nid: r\n"
        "model: {provider: openai, model: m, routes: {code: {model: c, options: {temperature: x}}}}\n"
    )
    error = _create(blueprint, model_client=CLIENT)
    assert error.message == "$.model.routes.code.options.temperature must be a number."


def test_sandbox_imports_beyond_the_host_policy_are_denied() -> None:
    blueprint = load_path(fixture("factory/full_codeact.yaml"))
    error = _create(blueprint, allow_sandbox_declaration=True)  # no client either: imports are checked first
    assert error.code == "blueprint.sandbox.imports.denied"
    assert error.message == (
        "sandbox.imports asks for json, numpy, which the host's import policy does not allow; a blueprint cannot "
        "widen the sandbox's imports by itself: the host must allow them (HostContext(allowed_imports=...))."
    )
    error = _create(blueprint, allow_sandbox_declaration=True, allowed_imports=frozenset({"json"}))
    assert error.message.startswith("sandbox.imports asks for numpy,")


def test_toolkit_not_in_registry_is_refused() -> None:
    blueprint = load_path(fixture("factory/full_codeact.yaml"))
    error = _create(
        blueprint,
        model_client=CLIENT,
        allow_sandbox_declaration=True,
        allowed_imports=frozenset({"numpy", "json"}),
        toolkit_registry={"system"},  # anything answering `in` works
    )
    assert error.code == "blueprint.toolkit.notFound"
    assert error.message == (
        "$.toolkits[1].ref names toolkit 'devops', which the host's toolkit registry does not have; register it "
        "(decorator or the codeact.toolkits entry point) or pass --toolkit MOD:OBJ."
    )


def test_a_file_cannot_grant_itself_trust() -> None:
    blueprint = load_path(fixture("factory/trust_flags.yaml"))
    unknown = [field.path for field in blueprint.unknown_fields]
    assert unknown == [  # document order
        "$.allow_sandbox_declaration",
        "$.allowSandboxDeclaration",
        "$.sandbox.allowSandboxDeclaration",
        "$.sandbox.allowedImports",
    ]
    # Inside the sandbox block an unknown key is an error (fail closed, issue 35), even with the host's consent.
    error = _create(blueprint, model_client=CLIENT, allow_sandbox_declaration=True)
    assert error.code == "blueprint.validation.failed"
    assert [(i.path, i.code) for i in error.report.errors] == [  # type: ignore[union-attr]
        ("$.sandbox.allowSandboxDeclaration", "blueprint.safety.field.unknown"),
        ("$.sandbox.allowedImports", "blueprint.safety.field.unknown"),
    ]
    # The top-level flags stay warnings (ignored, they widen nothing): the sandbox is still refused.
    top_only = load_text(fixture("factory/trust_flags.yaml").read_text().replace("  allow", "  # allow"))
    assert _create(top_only, model_client=CLIENT).code == "blueprint.sandbox.unsupported"
    error = _create(top_only, model_client=CLIENT, allow_sandbox_declaration=True)
    assert error.code == "blueprint.sandbox.imports.denied"


def test_sandbox_enabled_false_is_not_a_declaration() -> None:
    spec = AgentFactory().create(
        load_path(fixture("factory/sandbox_disabled_codeact.yaml")), HostContext(model_client=CLIENT)
    )
    assert spec.sandbox.declared is False and spec.sandbox.backend is None


# --- successful mapping ------------------------------------------------------------------------------------------


def _full_spec() -> tuple[AgentSpec, HostContext]:
    context = HostContext(
        model_client=CLIENT,
        allow_sandbox_declaration=True,
        allowed_imports=frozenset({"numpy", "json"}),
        toolkit_registry={"system", "devops"},
        work_dir=Path("/srv/work"),
        now=NOW,
    )
    return AgentFactory().create(load_path(fixture("factory/full_codeact.yaml")), context), context


def test_full_codeact_spec() -> None:
    spec, context = _full_spec()
    assert (spec.id, spec.name, spec.version, spec.kind, spec.max_turns) == (
        "devops-helper",
        "DevOps Helper",
        "codeact.agent/v1",
        "codeact",
        12,
    )
    assert spec.model.provider == "openai-compatible" and spec.model.model == "gpt-4.1"
    assert spec.model.profile == "work" and spec.model.context_window == 128000
    assert spec.model.options == ModelOptions(
        temperature=0.2,
        top_p=0.95,
        max_output_tokens=2048,
        reasoning={"effort": "low"},
        tool_choice="auto",
        parallel_tool_calls=True,
        store=False,
        user="ops-team",
        seed=7,
        stop=("</code>",),
    )
    assert spec.model.options.as_kwargs() == {
        "temperature": 0.2,
        "top_p": 0.95,
        "max_tokens": 2048,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": False,
        "user": "ops-team",
        "seed": 7,
        "stop": ["</code>"],
        "reasoning_effort": "low",
    }
    code = spec.model_for("code")
    assert (code.provider, code.model, code.options.temperature, code.options.top_p) == (
        "ollama",
        "qwen2.5-coder",
        0.0,
        0.95,
    )
    assert spec.model_for("utility").provider == "openai-compatible"
    assert spec.model_for("thought") is spec.model
    assert spec.instructions.system == "You are DevOps Helper on Linux in /srv/work at 2025-03-04."
    assert spec.instructions.developer == "Prefer small changes."
    assert dict(spec.variables) == {"agent_name": "DevOps Helper", "style": "small"}
    assert [(tool.ref, tool.approval) for tool in spec.tools] == [("coding.file", "safe")]
    assert [(grant.ref, grant.operations, grant.approval) for grant in spec.toolkits] == [
        ("system", None, None),
        ("devops", ("get_project_info", "deploy_app"), "ask"),
    ]
    assert dict(spec.toolkits[1].config) == {"region": "eu"}
    assert [(plugin.id, plugin.enabled) for plugin in spec.plugins] == [("todo", True), ("ask-user", False)]
    assert spec.session.memory is not None and spec.session.memory.scope == "project"
    assert spec.session.compact is not None
    assert (spec.session.compact.context_ratio, spec.session.compact.max_turns) == (0.7, 12)
    assert spec.session.compact.preserve == ("instructions", "test_results")
    assert spec.sandbox.declared and spec.sandbox.backend == "docker" and spec.sandbox.imports == ("numpy", "json")
    assert (spec.sandbox.limits.memory_mb, spec.sandbox.limits.cpus, spec.sandbox.limits.output_bytes) == (
        512,
        1.5,
        65536,
    )
    assert spec.codeact.thought == "inline" and spec.codeact.protocol == "completion"
    assert spec.codeact.fim_family == "qwen2.5-coder"
    assert spec.codeact.fim_markers == FimMarkers(
        prefix="<|fim_prefix|>", suffix="<|fim_suffix|>", middle="<|fim_middle|>"
    )
    assert (spec.codeact.self_check, spec.codeact.max_self_checks, spec.codeact.max_repeats) == (True, 1, 2)
    assert spec.source_path == fixture("factory/full_codeact.yaml") and spec.host is context
    assert spec.warnings == ()
    [coder] = spec.subagents
    assert (coder.name, coder.description, coder.path) == (
        "coder",
        "Writes code.",
        FIXTURES / "subagents/agents/coder.yaml",
    )
    assert coder.spec.kind == "codeact" and coder.spec.max_turns == 6
    assert coder.spec.instructions.system == "You write Python code."


def test_ai4j_minimal_spec_is_react_with_defaults() -> None:
    spec = AgentFactory().create(load_path(fixture("factory/minimal_ai4j.yaml")), HostContext(model_client=CLIENT))
    assert (spec.kind, spec.max_turns, spec.model.model) == ("react", 3, "gpt-4.1-mini")
    assert spec.model.options == ModelOptions() and spec.routes == {}
    assert spec.sandbox.declared is False and spec.toolkits == () and spec.subagents == ()


@pytest.mark.parametrize(
    ("workflow", "kind", "turns"),
    [
        pytest.param("", "react", DEFAULT_MAX_TURNS, id="missing-workflow"),
        pytest.param("workflow: {mode: react}\n", "react", DEFAULT_MAX_TURNS, id="react"),
        pytest.param("workflow: {mode: ' codeact ', maxTurns: 4}\n", "codeact", 4, id="codeact-trimmed"),
        pytest.param("workflow: {maxTurns: 7}\n", "react", 7, id="no-mode"),
    ],
)
def test_workflow_selects_kind_and_bounds_rounds(workflow: str, kind: str, turns: int) -> None:
    spec = AgentFactory().create(
        _text(f"model: {{provider: openai, model: m}}\n{workflow}"), HostContext(model_client=CLIENT)
    )
    assert (spec.kind, spec.max_turns) == (kind, turns)


def test_ai4j_instructions_are_trimmed_not_rendered() -> None:
    spec = AgentFactory().create(
        load_path(fixture("factory/ai4j_literal_instructions.yaml")), HostContext(model_client=CLIENT)
    )
    assert (spec.instructions.system, spec.instructions.developer) == ("Keep {{ braces }} as written.", None)


def test_factory_template_error_names_field_and_variable() -> None:
    blueprint = load_text(
        "version: codeact.agent/v1\nid: t\nmodel: {provider: openai, model: m}\ninstructions: {system: '{{ who }}'}\n"
    )
    error = _create(blueprint, model_client=CLIENT)  # the validator refuses it first
    assert error.code == "blueprint.validation.failed"
    assert isinstance(error.report, ValidationReport)
    assert error.report.issues[0].code == "blueprint.instructions.template.undefined"


def test_blueprint_hash_is_stable_location_independent_and_content_sensitive(tmp_path: Path) -> None:
    for name in ("a", "b"):
        shutil.copytree(FIXTURES / "subagents", tmp_path / name / "subagents")
    hash_a = blueprint_hash(load_path(tmp_path / "a" / "subagents" / "parent.yaml"))
    hash_b = blueprint_hash(load_path(tmp_path / "b" / "subagents" / "parent.yaml"))
    assert hash_a == hash_b and len(hash_a) == 64
    coder = tmp_path / "b" / "subagents" / "agents" / "coder.yaml"
    coder.write_text(coder.read_text().replace("maxTurns: 6", "maxTurns: 7"))
    assert blueprint_hash(load_path(tmp_path / "b" / "subagents" / "parent.yaml")) != hash_a
    spec = AgentFactory().create(
        load_path(tmp_path / "a" / "subagents" / "parent.yaml"), HostContext(model_client=CLIENT)
    )
    assert spec.blueprint_hash == hash_a


def test_format_factory_error_lists_the_report() -> None:
    error = _create(load_path(fixture("validate/order_all_errors.yaml")))
    assert format_factory_error(error).splitlines()[:3] == [
        "Blueprint factory error [blueprint.validation.failed]: Agent Blueprint validation failed with 9 errors; "
        "fix the issues listed (codeact validate FILE shows them).",
        "  ERROR $.version blueprint.version.unsupported: Unsupported blueprint version: nope. Use codeact.agent/v1 "
        "or ai4j.agent/v1.",
        "  ERROR $.id blueprint.id.invalid: id must contain only letters, digits, '.', '_' or '-' (got 'bad id').",
    ]
    assert len(format_factory_error(error).splitlines()) == 11
    plain = _create(_text("model: {provider: openai, model: m, options: {temperature: x}}\n"), model_client=CLIENT)
    assert format_factory_error(plain) == (
        "Blueprint factory error [blueprint.option.number.invalid]: $.model.options.temperature must be a number."
    )


def test_none_context_is_an_empty_context() -> None:
    with pytest.raises(BlueprintFactoryError) as caught:
        AgentFactory().create(_text("model: {provider: openai, model: m}\n"))
    assert caught.value.code == "blueprint.modelClient.required"


@pytest.mark.parametrize(
    ("system", "code"),
    [
        pytest.param("{{ who }}", "blueprint.instructions.template.undefined", id="undefined"),
        pytest.param("{% if %}", "blueprint.instructions.template.invalid", id="invalid"),
    ],
)
def test_factory_renders_templates_itself(system: str, code: str) -> None:
    blueprint = load_text(
        "version: codeact.agent/v1\nid: t\nmodel: {provider: openai, model: m}\n"
        f"instructions: {{system: '{system}'}}\n"
    )
    lenient = AgentFactory(validator=lambda _: ValidationReport())
    with pytest.raises(BlueprintFactoryError) as caught:
        lenient.create(blueprint, HostContext(model_client=CLIENT))
    assert caught.value.code == code
