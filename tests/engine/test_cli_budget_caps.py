"""The host's call-budget caps as flags (``--max-round-calls`` ... on ``run``, ``serve`` and ``worker``).

They are :class:`~codeact.engine.agent.BuildOptions`' ``call_budgets``: a blueprint without budgets runs
under them, and a blueprint asking for more is refused before anything runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.cli import app
from tests.engine.test_cli_run import cli, isolated, replies, store_url
from tests.engine.test_time_limits import OPS, blueprint, code_completed, run

__all__ = ["isolated"]  # the autouse fixture of test_cli_run: no profiles, no default store or model


def test_the_host_cap_bounds_a_blueprint_that_sets_no_budget(tmp_path: Path) -> None:
    replies(
        tmp_path,
        "```python\nfor i in range(1000):\n    ops.deploy(version=str(i), seconds=0)\n```",
        "```python\nsystem.finish('stopped')\n```",
    )
    path = blueprint(tmp_path, workflow=", runSeconds: 120")
    rc, stream, err = run(path, tmp_path, "--max-round-calls", "10")
    assert rc == 0, err
    first = code_completed(stream)[0]
    assert (first["status"], first["error"]["type"]) == ("error", "BudgetExceeded")
    assert first["error"]["message"].startswith("the round passed its budget of 10 toolkit calls")
    calls = [e for e in stream if e["type"] == "tool.call.completed" and e["operation"] == "deploy"]
    assert len(calls) == 11  # 10 within the cap, the 11th refused


def test_a_blueprint_budget_over_the_flag_is_refused(tmp_path: Path) -> None:
    replies(tmp_path, "```python\nsystem.finish('never')\n```")
    path = blueprint(tmp_path)
    path.write_text(path.read_text().replace("roundSeconds: 2", "roundSeconds: 2, budgets: {runCalls: 500}"))
    rc, _, err = cli(
        "run", str(path), "--input", "x", "--store", store_url(tmp_path), "--toolkit", OPS, "--max-run-calls", "100"
    )
    assert rc == 2
    assert err.splitlines()[0].startswith(
        "Blueprint factory error [blueprint.budgets.overHostCap]: workflow.codeact.budgets.runCalls asks for "
        "500, more than this host allows (100)"
    )


@pytest.mark.parametrize("command", ["run", "serve", "worker"])
def test_the_cap_flags_are_declared_on_each_host_command(command: str) -> None:
    from typer.main import get_command

    group = get_command(app)
    options = {opt for param in group.commands[command].params for opt in param.opts}  # type: ignore[attr-defined]
    assert {"--max-round-calls", "--max-run-calls", "--max-round-bytes", "--max-run-bytes"} <= options
