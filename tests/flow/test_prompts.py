"""Snapshots of the flow prompt templates (routing, retry feedback, merging, a step's input)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeact import prompts
from tests.segments._snapshot import check_snapshot

SNAPSHOTS = Path(__file__).parent / "snapshots"
AGENTS = [{"name": "billing", "description": "Invoices and payments"}, {"name": "support", "description": "Accounts"}]
CASES = [
    pytest.param("flow_routing.j2", {"instruction": "", "agents": AGENTS}, id="flow_routing"),
    pytest.param(
        "flow_routing.j2", {"instruction": "Prefer billing for money.", "agents": AGENTS}, id="flow_routing-instruction"
    ),
    pytest.param(
        "flow_routing_retry.j2",
        {"problem": "unknown or empty agent name(s): 'finance'", "names": ["billing", "support"]},
        id="flow_routing_retry",
    ),
    pytest.param(
        "flow_merge.j2",
        {
            "input": "What do I owe, and how do I reset my password?",
            "results": [
                {"agent": "billing", "query": "What is due?", "answer": "12 EUR"},
                {"agent": "support", "query": "Password reset?", "answer": "Settings > Security"},
            ],
        },
        id="flow_merge",
    ),
    pytest.param(
        "flow_step_input.j2",
        {
            "input": "Notes for 2.4.0",
            "messages": [{"agent": "writer", "text": "Draft"}, {"agent": "lint", "text": "ok"}],
        },
        id="flow_step_input",
    ),
    pytest.param("flow_step_input.j2", {"input": "Notes for 2.4.0", "messages": []}, id="flow_step_input-first"),
]


@pytest.mark.parametrize(("name", "variables"), CASES)
def test_flow_template_snapshot(request: pytest.FixtureRequest, name: str, variables: dict[str, Any]) -> None:
    case_id = request.node.callspec.id
    check_snapshot(SNAPSHOTS, f"{case_id}.txt", prompts.render(name, **variables))


def test_every_flow_template_has_a_case() -> None:
    mine = {n for n in prompts.template_names() if n.startswith("flow_")}
    assert mine == {case.values[0] for case in CASES}
