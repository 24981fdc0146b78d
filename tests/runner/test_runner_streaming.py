"""A runner's manifest says ``streaming`` exactly when its runs return ``message.delta``: both modes, each option."""

from __future__ import annotations

import pytest

from tests.runner.conftest import BLUEPRINT, MakeRunner, code, collect, context

REACT = BLUEPRINT.replace('{{mode: codeact, maxTurns: 6, codeact: {{thought: "off"}}}}', "{{mode: react, maxTurns: 4}}")
TEXT = "Let me check the stock of A-1."
REPLIES = {
    "codeact": [code('n = await inventory.stock(sku="A-1")\nsystem.finish(f"{n} units")', TEXT)],
    "react": [
        {"text": TEXT, "tool_calls": [{"id": "c1", "name": "inventory__stock", "arguments": {"sku": "A-1"}}]},
        "3 units",
    ],
}


@pytest.mark.parametrize("mode", ["codeact", "react"])
@pytest.mark.parametrize(
    ("options", "streams"),
    [
        pytest.param({}, True, id="default"),
        pytest.param({"show_work": False}, False, id="no-show-work"),
        pytest.param({"stream": False}, False, id="no-stream"),
    ],
)
async def test_the_manifest_claims_streaming_exactly_when_a_run_streams(
    make_runner: MakeRunner, mode: str, options: dict[str, bool], streams: bool
) -> None:
    runner = make_runner(REPLIES[mode], blueprint=REACT if mode == "react" else BLUEPRINT, **options)
    results = await collect(runner, context("How many A-1?"))

    assert results[-1].type == "run.completed", results[-1].data
    assert [r.data["message"]["content"] for r in results if r.type == "message.completed"][-1] == "3 units"
    deltas = [r.data["chunk"]["content"] for r in results if r.type == "message.delta"]
    assert runner.manifest.capabilities.streaming is streams
    assert bool(deltas) is streams
    if streams:
        assert "".join(deltas).startswith(TEXT)
        called = [
            r.data for r in results if r.type == "tool.call.started" and r.data["tool_name"].startswith("inventory")
        ]
        assert [(c["tool_name"], c["parameters"]) for c in called] == [("inventory.stock", {"sku": "A-1"})]
