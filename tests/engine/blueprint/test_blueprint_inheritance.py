from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.blueprint import INHERIT, MAX_EXTEND_DEPTH, builtin_names, load_path, load_text, validate_blueprint
from codeact.engine.blueprint.inheritance import merge_layers
from codeact.engine.errors import BlueprintLoadError

from ._helpers import FIXTURES, fixture, report_for, triples


def test_merge_layers_inherit_sentinel_differs_from_null() -> None:
    base = {
        "name": "Base",
        "tools": [{"ref": "a"}, {"ref": "b"}],
        "model": {"provider": "p", "options": {"x": 1, "y": 2}},
    }
    child = {"name": None, "tools": [{"ref": "c"}], "model": {"options": {"y": 3}}}
    assert merge_layers(base, child) == {
        "name": None,  # explicit null clears
        "tools": [{"ref": "c"}],  # lists replace as a whole
        "model": {"provider": "p", "options": {"x": 1, "y": 3}},  # maps merge key by key, child wins
    }
    assert merge_layers(base, {}) == base  # nothing written: everything inherited
    assert repr(INHERIT) == "INHERIT" and INHERIT is not None


def test_child_over_base_rules() -> None:
    child = load_path(fixture("inherit/children/child.yaml"))
    assert child.extends == ("../base.yaml",)
    assert child.extend is None  # consumed by the loader
    assert child.id == "child-agent"
    assert child.name is None  # explicit null cleared "Base Agent"
    assert child.model is not None
    assert (child.model.provider, child.model.model) == ("openai-compatible", "gpt-4.1-mini")
    assert child.model.options == {"temperature": 0.5, "topP": 0.9}
    assert child.instructions is not None
    assert child.instructions.variables == {"who": "the child agent", "lang": "English"}
    assert child.instructions.system == "You are {{ who }}; answer in {{ lang }}."
    assert [tool.ref for tool in child.tools if tool is not None] == ["coding.git"]
    assert [kit.ref for kit in child.toolkits if kit is not None] == ["system"]  # not written: inherited
    assert child.sandbox is None  # explicit null cleared the base's sandbox
    assert child.session is not None and child.session.memory is not None  # not written: inherited
    assert child.workflow is not None and (child.workflow.mode, child.workflow.max_turns) == ("codeact", 9)
    assert validate_blueprint(child).issues == ()


def test_paths_resolve_against_the_declaring_file() -> None:
    grandchild = load_path(fixture("inherit/children/grandchild.yaml"))
    assert grandchild.extends == ("child.yaml", "../base.yaml")
    helper, reviewer = grandchild.subagents["helper"], grandchild.subagents["reviewer"]
    assert helper is not None and reviewer is not None
    # declared in base.yaml (inherit/): agents/helper.yaml -> inherit/agents/helper.yaml
    assert Path(helper.path or "") == FIXTURES / "inherit" / "agents" / "helper.yaml"
    assert helper.description == "Overridden description, inherited path."
    # declared in children/grandchild.yaml: ../agents/helper.yaml -> inherit/agents/helper.yaml too
    assert Path(reviewer.path or "") == FIXTURES / "inherit" / "agents" / "helper.yaml"
    assert set(grandchild.subagent_blueprints) == {"helper", "reviewer"}
    assert validate_blueprint(grandchild).issues == ()


def test_extend_a_shipped_blueprint_by_name() -> None:
    assert "codeact-base" in builtin_names()
    blueprint = load_path(fixture("inherit/builtin_child.yaml"))
    assert blueprint.extends == ("codeact-base",)
    assert blueprint.workflow is not None and blueprint.workflow.mode == "codeact"
    assert blueprint.instructions is not None
    assert blueprint.instructions.variables["agent_name"] == "DevOps Helper"
    assert blueprint.instructions.variables["language"] == "English"
    assert [kit.ref for kit in blueprint.toolkits if kit is not None] == ["system"]
    assert validate_blueprint(blueprint).valid


def test_extend_from_text_resolves_against_base_dir() -> None:
    text = "version: codeact.agent/v1\nextend: ./base.yaml\nid: from-text\n"
    blueprint = load_text(text, base_dir=FIXTURES / "inherit")
    assert blueprint.model is not None and blueprint.model.model == "gpt-4.1-mini"
    assert blueprint.extends == ("base.yaml",)


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        pytest.param(
            "inherit/cycle_a.yaml",
            "blueprint.extend.cycle",
            "extend forms a cycle: cycle_a.yaml -> cycle_b.yaml -> cycle_a.yaml. Remove the extend that points back.",
            id="cycle",
        ),
        pytest.param(
            "inherit/self_cycle.yaml",
            "blueprint.extend.cycle",
            "extend forms a cycle: self_cycle.yaml -> self_cycle.yaml. Remove the extend that points back.",
            id="self-cycle",
        ),
        pytest.param(
            "inherit/missing_file.yaml",
            "blueprint.extend.notFound",
            "Base blueprint './bases/nowhere.yaml' was not found (extend chain: missing_file.yaml -> "
            "bases/nowhere.yaml); a file path is relative to the file that declares it.",
            id="notFound-file",
        ),
        pytest.param(
            "inherit/missing_deep.yaml",
            "blueprint.extend.notFound",
            "Base blueprint './bases/nowhere.yaml' was not found (extend chain: missing_deep.yaml -> "
            "missing_file.yaml -> bases/nowhere.yaml); a file path is relative to the file that declares it.",
            id="notFound-deep-in-chain",
        ),
        pytest.param(
            "inherit/missing_builtin.yaml",
            "blueprint.extend.notFound",
            "Base blueprint 'codeact-bsae' was not found (extend chain: missing_builtin.yaml -> codeact-bsae); "
            "shipped blueprints: codeact-base.",
            id="notFound-builtin",
        ),
        pytest.param(
            "inherit/extends_unversioned.yaml",
            "blueprint.extend.version",
            "Base blueprint 'unversioned_base.yaml' declares no version; a base must declare codeact.agent/v1 or "
            "ai4j.agent/v1 (extend chain: extends_unversioned.yaml -> unversioned_base.yaml).",
            id="version",
        ),
    ],
)
def test_extend_problems_are_validation_errors_naming_the_chain(name: str, code: str, message: str) -> None:
    report = report_for(name)
    assert triples(report)[0] == ("ERROR", "$.extend", code)
    assert report.issues[0].message == message
    assert not report.valid


def _chain(tmp_path: Path, bases: int) -> Path:
    for index in range(1, bases + 1):
        extend = f"extend: ./b{index + 1}.yaml\n" if index < bases else ""
        (tmp_path / f"b{index}.yaml").write_text(f"version: codeact.agent/v1\n{extend}name: b{index}\n")
    root = tmp_path / "root.yaml"
    root.write_text("version: codeact.agent/v1\nextend: ./b1.yaml\nid: root\nmodel: {provider: openai, model: m}\n")
    return root


def test_chain_of_max_depth_is_fine(tmp_path: Path) -> None:
    blueprint = load_path(_chain(tmp_path, MAX_EXTEND_DEPTH))
    assert len(blueprint.extends) == MAX_EXTEND_DEPTH == 8
    assert blueprint.name == "b1" and validate_blueprint(blueprint).valid


def test_over_deep_chain_is_an_error_naming_the_chain(tmp_path: Path) -> None:
    report = validate_blueprint(load_path(_chain(tmp_path, MAX_EXTEND_DEPTH + 1)))
    assert triples(report) == [("ERROR", "$.extend", "blueprint.extend.tooDeep")]
    assert report.issues[0].message == (
        "extend chain is deeper than 8 bases: root.yaml -> b1.yaml -> b2.yaml -> b3.yaml -> b4.yaml -> b5.yaml -> "
        "b6.yaml -> b7.yaml -> b8.yaml -> b9.yaml. Merge some bases into one file."
    )


@pytest.mark.parametrize(
    ("name", "code", "path", "message"),
    [
        pytest.param(
            "inherit/extends_empty.yaml",
            "blueprint.document.required",
            None,
            "Agent Blueprint document is empty. Write at least version, id and model. (in base blueprint "
            "'empty_base.yaml', extend chain: extends_empty.yaml -> empty_base.yaml)",
            id="empty-base-is-a-load-error",
        ),
        pytest.param(
            "inherit/extends_broken.yaml",
            "blueprint.yaml.invalid",
            None,
            "Invalid Agent Blueprint YAML: while parsing a flow sequence; expected ',' or ']', but got "
            "'<stream end>' at line 3, column 1. Fix the YAML syntax there. (in base blueprint 'broken_base.yaml', "
            "extend chain: extends_broken.yaml -> broken_base.yaml)",
            id="broken-base",
        ),
        pytest.param(
            "inherit/extends_typed.yaml",
            "blueprint.type.integer",
            "$.workflow.maxTurns",
            "$.workflow.maxTurns must be an integer, got the string 'many'. (in base blueprint 'typed_base.yaml', "
            "extend chain: extends_typed.yaml -> typed_base.yaml)",
            id="base-type-error",
        ),
    ],
)
def test_unreadable_bases_are_load_errors(name: str, code: str, path: str | None, message: str) -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(fixture(name))
    assert (caught.value.code, caught.value.path, caught.value.message) == (code, path, message)


def test_unknown_fields_of_a_base_are_reported_with_their_origin() -> None:
    report = report_for("inherit/extends_unknown.yaml")
    assert triples(report) == [
        ("WARNING", "$.teams", "blueprint.field.unknown"),
        ("WARNING", "$.model.temperature", "blueprint.field.unknown"),
    ]
    assert report.issues[0].message == "Unknown top-level field: teams (in base blueprint 'unknown_base.yaml')."


def test_ai4j_version_does_not_follow_extend() -> None:
    blueprint = load_path(fixture("inherit/ai4j_with_extend.yaml"))
    assert blueprint.extends == () and blueprint.tools == []
    assert triples(validate_blueprint(blueprint)) == [("WARNING", "$.extend", "blueprint.field.unknown")]
