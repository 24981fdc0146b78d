from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.blueprint import AgentFactory, HostContext, builtin_names, load_path, validate_blueprint
from codeact.engine.blueprint.inheritance import BUILTIN_DIR

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "blueprints"


@pytest.mark.parametrize("name", ["devops-ai4j.yaml", "devops-codeact.yaml", "reviewer.yaml"])
def test_examples_are_valid_without_warnings(name: str) -> None:
    assert validate_blueprint(load_path(EXAMPLES / name)).issues == ()


def test_codeact_example_builds_a_spec() -> None:
    context = HostContext(model_client=object(), toolkit_registry={"system", "devops"})
    spec = AgentFactory().create(load_path(EXAMPLES / "devops-codeact.yaml"), context)
    assert (spec.kind, spec.max_turns, spec.extends) == ("codeact", 12, ("codeact-base",))
    assert spec.model_for("code").model == "gpt-4.1" and spec.model_for("thought").model == "gpt-4.1-mini"
    assert [grant.ref for grant in spec.toolkits] == ["system", "devops"]
    assert spec.instructions.system is not None
    assert spec.instructions.system.startswith("You are the DevOps Assistant, an assistant for projects")
    [reviewer] = spec.subagents
    assert reviewer.spec.toolkits[1].operations == ("get_project_info", "get_app_list", "get_deploy_status")


def test_ai4j_example_builds_a_spec() -> None:
    spec = AgentFactory().create(load_path(EXAMPLES / "devops-ai4j.yaml"), HostContext(model_client=object()))
    assert (spec.kind, spec.model.options.max_output_tokens, spec.tools[0].approval) == ("codeact", 2048, "safe")


@pytest.mark.parametrize("name", builtin_names())
def test_shipped_bases_load_and_have_no_id(name: str) -> None:
    base = load_path(BUILTIN_DIR / f"{name}.yaml")
    assert base.id is None  # a child must name itself
    codes = [issue.code for issue in validate_blueprint(base).issues]
    assert codes == ["blueprint.id.required", "blueprint.model.required"]
