"""Fail closed (issue 35 items 1-3): what decides what the model may do is checked before any model call.

A misspelled key of a grant is refused, not warned about; a ``--toolkit`` the blueprint does not
grant is refused with the grant to add; an unknown provider fails ``codeact validate``. Real CLI,
real sandbox, the local OpenAI-compatible server (which must see no request when a run is refused).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codeact.engine.agent import Agent
from codeact.engine.errors import BlueprintFactoryError
from tests.engine import shop_toolkit
from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

SHOP = "tests.engine.shop_toolkit:Shop"
FIX = "Keys that decide what the model may do are never ignored: fix this one or remove it."
ORDER = "```python\ntry:\n    shop.place_order(item='book')\nexcept Exception as e:\n    system.finish(str(e))\n```"


def _blueprint(tmp_path: Path, grants: str, provider: str = "openai-compatible") -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        f"version: codeact.agent/v1\nid: buyer\nmodel: {{provider: {provider}, model: openai/test-model}}\n{grants}"
        "workflow: {mode: codeact, maxTurns: 3, codeact: {thought: 'off'}}\n"
    )
    return path


def _run(path: Path, server: OpenAIServer, *flags: str) -> tuple[int, str, str]:
    return cli(
        "run", str(path), "--input", "buy a book", "--store", f"sqlite:///{path.parent / 's.db'}",
        "--base-url", server.base_url, "--toolkit", SHOP, *flags,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _no_orders() -> Iterator[None]:
    shop_toolkit.PLACED.clear()
    yield
    shop_toolkit.PLACED.clear()


def test_a_misspelled_approval_is_refused_before_any_model_call(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _blueprint(tmp_path, "toolkits:\n  - ref: shop\n    aproval: ask\n")
    openai_server.push(ORDER)
    rc, out, err = _run(path, openai_server)
    assert rc == 2  # a blueprint codeact run refuses (as for any validation error)
    assert out == ""
    assert err.splitlines() == [
        "Blueprint factory error [blueprint.validation.failed]: Agent Blueprint validation failed with 1 error; "
        "fix the issues listed (codeact validate FILE shows them).",
        "  ERROR $.toolkits[0].aproval blueprint.safety.field.unknown: Unknown field: toolkits[0].aproval; "
        f"did you mean 'approval'? {FIX}",
    ]
    assert openai_server.requests == []
    assert shop_toolkit.PLACED == []


def test_spelled_right_the_order_waits_for_approval(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _blueprint(tmp_path, "toolkits:\n  - ref: shop\n    approval: ask\n")
    openai_server.push(ORDER)
    rc, out, err = _run(path, openai_server, "--deny-all")
    assert rc == 0, err
    assert "denied" in out or "not approved" in out, out
    assert shop_toolkit.PLACED == []  # asked, denied: never placed


def test_toolkit_for_toolkits_is_refused_before_any_model_call(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _blueprint(tmp_path, "toolkit:\n  - ref: shop\n")
    openai_server.push(ORDER)
    rc, _, err = _run(path, openai_server)
    assert rc == 2
    assert err.splitlines()[1] == (
        f"  ERROR $.toolkit blueprint.safety.field.unknown: Unknown top-level field: toolkit; "
        f"did you mean 'toolkits'? {FIX}"
    )
    assert openai_server.requests == []


LOADED_NOT_GRANTED = (
    "Blueprint factory error [blueprint.toolkit.notGranted]: toolkit 'shop' loaded (--toolkit) but not granted: "
    "the blueprint 'agent.yaml' names it in no toolkits[].ref, so every call the model made to it would fail with "
    "NameError. Grant it (toolkits: [{ref: shop}]) or stop loading it."
)


def test_a_loaded_toolkit_the_blueprint_does_not_grant_is_refused(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _blueprint(tmp_path, "toolkits:\n  - ref: system\n")
    openai_server.push(ORDER)
    rc, _, err = _run(path, openai_server)
    assert rc == 2
    assert err.splitlines() == [LOADED_NOT_GRANTED]
    assert openai_server.requests == []
    # codeact validate --toolkit says it too.
    rc, out, _ = cli("validate", str(path), "--toolkit", SHOP)
    assert rc == 1
    message = LOADED_NOT_GRANTED.removeprefix("Blueprint factory error [blueprint.toolkit.notGranted]: ")
    assert out.splitlines()[1:] == [f"  ERROR $.toolkits blueprint.toolkit.notGranted: {message}"]
    # The same for the Python API: a toolkit given for the agent must be granted by its blueprint.
    with pytest.raises(BlueprintFactoryError) as caught:
        Agent.from_blueprint(path, toolkits=[shop_toolkit.Shop], base_url=openai_server.base_url)
    assert caught.value.code == "blueprint.toolkit.notGranted"
    assert openai_server.requests == []


def test_a_grant_through_a_subagent_counts(tmp_path: Path, openai_server: OpenAIServer) -> None:
    (tmp_path / "buyer.yaml").write_text(
        "version: codeact.agent/v1\nid: sub\ntoolkits: [{ref: shop}]\nmodel: {provider: openai, model: m}\n"
        "workflow: {mode: codeact}\n"
    )
    path = _blueprint(tmp_path, "subagents:\n  buyer: {path: buyer.yaml, description: Buys things.}\n")
    openai_server.push("```python\nsystem.finish('done')\n```")
    rc, out, err = _run(path, openai_server)
    assert rc == 0, err
    assert out == "done\n"


def test_an_unknown_provider_fails_validate_and_run(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = _blueprint(tmp_path, "toolkits: [{ref: shop}]\n", provider="opnai")
    message = (
        "ERROR $.model.provider blueprint.model.provider.unknown: model.provider 'opnai' is not a provider codeact "
        "can call; did you mean 'openai'? Write one of litellm's providers (https://docs.litellm.ai/docs/providers) "
        "or codeact's own: local, scripted, openai-compatible."
    )
    rc, out, _ = cli("validate", str(path))
    assert rc == 1
    assert out.splitlines()[1:] == [f"  {message}"]
    openai_server.push(ORDER)
    rc, _, err = _run(path, openai_server)
    assert rc == 2
    assert err.splitlines()[1:] == [f"  {message}"]
    assert openai_server.requests == []


def test_a_flow_must_grant_a_loaded_toolkit_in_one_of_its_agents(tmp_path: Path, openai_server: OpenAIServer) -> None:
    for name, grants in (("writer", "[{ref: system}]"), ("buyer", "[{ref: system}]")):
        (tmp_path / f"{name}.yaml").write_text(
            f"version: codeact.agent/v1\nid: {name}\nmodel: {{provider: openai-compatible, model: openai/test-model}}\n"
            f"toolkits: {grants}\nworkflow: {{mode: codeact, maxTurns: 2, codeact: {{thought: 'off'}}}}\n"
        )
    path = tmp_path / "flow.yaml"
    path.write_text(
        "version: codeact.agent/v1\nid: shopping\nworkflow: {mode: flow}\n"
        "flow: {kind: sequential, agents: [{path: ./writer.yaml}, {path: ./buyer.yaml}]}\n"
    )
    rc, _, err = _run(path, openai_server)
    assert rc == 2
    assert err.splitlines() == [LOADED_NOT_GRANTED.replace("'agent.yaml'", "'flow.yaml'")]
    assert openai_server.requests == []
