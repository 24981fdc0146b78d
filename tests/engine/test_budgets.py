"""Budgets of toolkit calls (issue 34): no round floods the host, whatever the code does with the errors.

A flood of cheap calls ends at the round's call budget with an error naming the budget's blueprint key,
through ``codeact exec`` (the host's default budgets) and through ``codeact run`` (a blueprint's own,
under the host's cap); the code's ``except Exception`` cannot swallow the refusal. A blueprint asking for
more than the host allows is refused before anything runs. (A long call still completes: the round's
clock does not count host waits, and the round's wall-clock cap is minutes: test_time_limits.py.)
"""

from __future__ import annotations

from pathlib import Path

from tests.engine.test_cli_run import cli, isolated, replies, store_url
from tests.engine.test_time_limits import OPS, blueprint, code_completed, run

__all__ = ["isolated"]  # the autouse fixture of test_cli_run: no profiles, no default store or model

FLOOD_TOOLKIT = '''
from codeact.toolkits import operation, toolkit


@toolkit(name="kit", description="Echoes text")
class Kit:
    @operation
    def echo(self, text: str) -> str:
        """Echo ``text``.

        Args:
            text: The text.
        """
        return text
'''


def test_a_flood_of_calls_through_codeact_exec_ends_at_the_host_budget(tmp_path: Path) -> None:
    (tmp_path / "flood_kit.py").write_text(FLOOD_TOOLKIT)
    code = tmp_path / "flood.py"
    code.write_text("for i in range(200000):\n    kit.echo('x' * 1024)\n")
    rc, out, err = cli("exec", str(code), "--toolkit", f"{tmp_path / 'flood_kit.py'}:Kit", "--timeout", "10")
    assert rc == 1, out + err
    assert (
        "BudgetExceeded: the round passed its budget of 20000 toolkit calls (workflow.codeact.budgets.roundCalls); "
        "the call was refused and the round stopped." in out + err
    )


def test_a_blueprint_budget_stops_a_flood_the_code_tries_to_swallow(tmp_path: Path) -> None:
    replies(
        tmp_path,
        "```python\nfor i in range(100000):\n    try:\n        ops.deploy(version=str(i), seconds=0)\n"
        "    except Exception:\n        pass\n```",
        "The budget stopped the loop.\n```python\nsystem.finish('stopped')\n```",
    )
    path = blueprint(tmp_path, workflow=", runSeconds: 120")
    path.write_text(path.read_text().replace("roundSeconds: 2", "roundSeconds: 2, budgets: {roundCalls: 25}"))
    rc, stream, err = run(path, tmp_path)
    assert rc == 0, err
    first = code_completed(stream)[0]
    assert first["status"] == "error"
    assert first["error"]["type"] == "BudgetExceeded"
    assert first["error"]["message"].startswith(
        "the round passed its budget of 25 toolkit calls (workflow.codeact.budgets.roundCalls)"
    )
    calls = [e for e in stream if e["type"] == "tool.call.completed" and e["operation"] == "deploy"]
    assert len(calls) == 26  # 25 within the budget, the 26th refused; none after it reached the host
    assert stream[-1]["type"] == "run.completed" and stream[-1]["answer"] == "stopped"


def test_a_blueprint_budget_over_the_host_cap_is_refused(tmp_path: Path) -> None:
    replies(tmp_path, "```python\nsystem.finish('never')\n```")
    path = blueprint(tmp_path)
    path.write_text(path.read_text().replace("roundSeconds: 2", "roundSeconds: 2, budgets: {runCalls: 1000000}"))
    rc, _, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), "--toolkit", OPS)
    assert rc == 2
    assert err.splitlines()[0] == (
        "Blueprint factory error [blueprint.budgets.overHostCap]: workflow.codeact.budgets.runCalls asks for "
        "1000000, more than this host allows (200000); lower it to 200000 or less, or let the host allow more "
        "(HostContext(call_budgets=...))"
    )


def test_a_blueprint_byte_budget_stops_a_flood_of_large_arguments(tmp_path: Path) -> None:
    """Few calls, each with a large argument: the bytes through the bridge are bounded too."""
    replies(
        tmp_path,
        "```python\nfor i in range(1000):\n    ops.deploy(version='v' * 20000, seconds=0)\n```",
        "```python\nsystem.finish('stopped')\n```",
    )
    path = blueprint(tmp_path, workflow=", runSeconds: 120")
    path.write_text(path.read_text().replace("roundSeconds: 2", "roundSeconds: 2, budgets: {roundBytes: 200000}"))
    rc, stream, err = run(path, tmp_path)
    assert rc == 0, err
    first = code_completed(stream)[0]
    assert (first["status"], first["error"]["type"]) == ("error", "BudgetExceeded")
    assert "(workflow.codeact.budgets.roundBytes)" in first["error"]["message"]
    calls = [e for e in stream if e["type"] == "tool.call.completed" and e["operation"] == "deploy"]
    assert 5 <= len(calls) <= 12  # about 200,000 bytes of 20,000-byte arguments, then refused


async def test_host_waits_cannot_hold_a_round_past_the_hosts_wall_cap() -> None:
    """Waiting on the host is off the round's clock; the host's wall-clock cap still ends the round."""
    import asyncio
    from typing import Any

    from codeact.sandbox import Limits, SubprocessSandbox

    class SlowHost:
        def manifest(self) -> dict[str, Any]:
            return {"toolkits": {"kit": {"description": "slow", "operations": {"wait": {"parameters": {}}}}}}

        async def handle(self, method: str, params: dict[str, Any]) -> Any:
            await asyncio.sleep(1.0)
            return {"result": None}

    sandbox = SubprocessSandbox(bridge=SlowHost(), limits=Limits(round_wall_s=3.0))  # type: ignore[arg-type]
    try:
        result = await sandbox.execute("while True:\n    await kit.wait()", deadline=1.0)
    finally:
        await sandbox.aclose()
    assert result.status == "deadline_exceeded"
    assert result.error is not None and "the host's 3 s cap on a round's wall-clock time" in result.error.message
    assert result.duration_s < 10


def test_a_concurrent_flood_past_the_record_cap_ends_at_the_host_budget(tmp_path: Path) -> None:
    """Calls past the record's cap are folded as they end, out of order when gathered (issue 38's call log):
    a gathered flood still ends at the host's call budget, and the host holds no more than the budget."""
    (tmp_path / "flood_kit.py").write_text(FLOOD_TOOLKIT)
    code = tmp_path / "flood.py"
    code.write_text("import asyncio\nawait asyncio.gather(*(kit.echo(text=str(i)) for i in range(60000)))\n")
    rc, out, err = cli("exec", str(code), "--toolkit", f"{tmp_path / 'flood_kit.py'}:Kit", "--timeout", "10")
    assert rc == 1, out + err
    assert "BudgetExceeded: the round passed its budget of 20000 toolkit calls" in out + err
