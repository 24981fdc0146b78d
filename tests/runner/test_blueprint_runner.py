"""A blueprint as a runner, end to end with scripted models (SQLite store, subprocess sandbox)."""

from __future__ import annotations

from tests.runner.conftest import MakeRunner, code, collect, context, types


async def test_a_run_streams_numbered_results_ending_in_run_completed(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('n = await inventory.stock(sku="A-1")\nprint(n)', "Let me check the stock."),
            code('system.finish(f"{n} units of A-1")'),
        ]
    )
    assert runner.id == "shop-runner"
    results = await collect(runner, context())
    assert [r.sequence for r in results] == list(range(1, len(results) + 1))
    assert {r.run_id for r in results} == {"run-1"}
    assert results[-1].type == "run.completed"
    assert "tool.call.started" in types(results) and "tool.call.completed" in types(results)
    done = [r for r in results if r.type == "tool.call.completed"][0]
    assert done.data["tool_name"] == "inventory.stock" and done.data["result"] == {"value": 3}
    messages = [r.data["message"]["content"] for r in results if r.type == "message.completed"]
    assert messages[-1] == "3 units of A-1"
    for result in results:
        result.payload()  # every payload validates strictly
