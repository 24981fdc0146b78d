"""The blueprint's fixed choices as enums after load; the YAML accepts exactly the same strings."""

from __future__ import annotations

import json

import pytest

from codeact.engine.blueprint.models import WorkflowBlock
from codeact.engine.blueprint.modes import SandboxBackend, ThoughtMode, WorkflowMode
from codeact.engine.blueprint.validator import SANDBOX_BACKENDS, THOUGHT_MODES, WORKFLOW_MODES


def test_the_validator_accepts_the_enum_values_in_their_order() -> None:
    assert WORKFLOW_MODES == ("react", "codeact", "flow")
    assert SANDBOX_BACKENDS == ("subprocess", "docker")
    assert THOUGHT_MODES == ("separate", "inline", "off")
    assert all(type(value) is str for value in (*WORKFLOW_MODES, *SANDBOX_BACKENDS, *THOUGHT_MODES))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("flow", WorkflowMode.FLOW, id="flow"),
        pytest.param("  codeact ", WorkflowMode.CODEACT, id="blanks"),
        pytest.param(None, None, id="unset"),
        pytest.param("", None, id="empty"),
        pytest.param("chat", None, id="unknown"),
    ],
)
def test_workflow_mode(mode: str | None, expected: WorkflowMode | None) -> None:
    assert WorkflowBlock(mode=mode).workflow_mode is expected


def test_members_are_their_strings() -> None:
    assert ThoughtMode.INLINE == "inline"
    assert f"{SandboxBackend.DOCKER}" == "docker"
    assert json.dumps({"thought": ThoughtMode.OFF}) == '{"thought": "off"}'
