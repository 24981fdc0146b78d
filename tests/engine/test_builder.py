"""``codeact.engine.build`` and ``BuildOptions``: one way to build an agent or a flow from a blueprint.

The same options value builds either; what the build opened (model clients, the store) the result owns
and closes; the flow test is ``codeact.engine.blueprint.is_flow``, asked in one place.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from codeact.engine import BuildOptions, build
from codeact.engine.agent import Agent
from codeact.engine.blueprint import is_flow, load_path
from codeact.engine.flow import FlowAgent
from codeact.engine.store import open_store
from tests.flow.test_blueprint import flow_file, leaf


def test_the_options_are_one_frozen_keyword_only_value() -> None:
    options = BuildOptions(model="scripted/x.yaml", stream=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.model = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        BuildOptions("scripted/x.yaml")  # type: ignore[misc]
    assert not BuildOptions().overrides_model and BuildOptions(base_url="http://x").overrides_model


def test_build_gives_an_agent_for_an_agent_blueprint(tmp_path: Path) -> None:
    path = leaf(tmp_path, "a", ["done"])
    store = f"sqlite:///{tmp_path / 's.db'}"
    with build(path, options=BuildOptions(store=store, stream=False, user="ana")) as agent:
        assert isinstance(agent, Agent) and not is_flow(load_path(path))
        assert (agent.stream, agent.user) == (False, "ana")
        assert agent.run_sync("go").answer == "done"


def test_build_gives_a_flow_for_a_flow_blueprint_and_the_flow_owns_what_it_opened(tmp_path: Path) -> None:
    leaf(tmp_path, "a", ["A"])
    leaf(tmp_path, "b", ["B"])
    path = flow_file(tmp_path, "kind: sequential\nagents: [{path: ./a.yaml}, {path: ./b.yaml}]")
    assert is_flow(load_path(path))
    flow = build(path, options=BuildOptions(store=f"sqlite:///{tmp_path / 's.db'}", stream=False))
    assert isinstance(flow, FlowAgent)
    assert flow.run_sync("go").answer == "B"
    assert flow._owned  # noqa: SLF001 - the store and both model clients, taken through own()
    flow.close()
    assert flow._owned == ()  # noqa: SLF001


def test_a_store_object_given_stays_open(tmp_path: Path) -> None:
    path = leaf(tmp_path, "a", ["done"])
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    agent = build(path, options=BuildOptions(store=store, stream=False))
    assert store not in agent._owned  # noqa: SLF001 - its owner closes it
    agent.close()


def test_derive_shares_the_parts_and_owns_nothing(tmp_path: Path) -> None:
    path = leaf(tmp_path, "a", ["done"])
    with Agent.from_blueprint(path, store=f"sqlite:///{tmp_path / 's.db'}", user="ana") as agent:
        copy = agent.derive(user=None, grants=["extra"])
        assert (copy.model, copy.store, copy.spec) == (agent.model, agent.store, agent.spec)
        assert copy.user is None and copy.grants["extra"] == "*" and "extra" not in agent.grants
        assert copy._owned == ()  # noqa: SLF001
