"""A real model that printed the answer but did not finish sends the same code again (issue 29).

Qwen2.5-Coder-1.5B does this on most tasks: round 1 computes and prints the answer, then it repeats
round 1's code until the run is stopped as stuck. The repeat is not run again: the model is asked once,
plainly, for the final answer (the finishing protocol, docs/finishing.md; issue 39), through
``codeact run`` against the local OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from codeact.engine.cli import app
from codeact.engine.store import SQLiteStore
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

REPO = Path(__file__).resolve().parents[2]
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: repeats
model: {provider: openai-compatible, model: openai/test-model}
workflow: {maxTurns: 6, codeact: {thought: 'off'}}
toolkits: [{ref: devops}]
"""
# What the model wrote, frame echo included (the 1.5B repeats the program header and handler).
DEPLOY = """```python
# Variables from earlier rounds (defined; reuse, do not redefine):
#   (none yet)

try:
    deploy = await devops.deploy_app(app_id="checkout-api", version="2.4.0")
    print(deploy)
except Exception as e:
    print(f"Error: {e!r}")
    raise
```"""
SAME_AGAIN = """```python
deploy = await devops.deploy_app(app_id="checkout-api", version="2.4.0")
print(deploy)
```"""
FINISH = """```python
await system.finish(answer=deploy["id"])
```"""


def _rounds(db: Path) -> list[object]:
    async def read() -> list[object]:
        store = SQLiteStore(db)
        try:
            return list(await store.rounds("S"))
        finally:
            await store.close()

    return asyncio.run(read())


def _deploy_run(tmp_path: Path, openai_server: OpenAIServer, *replies: str, options: str = "") -> tuple[Result, Path]:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.replace("thought: 'off'", f"thought: 'off'{options}"))
    db = tmp_path / "s.db"
    openai_server.push(*replies)
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", "Deploy 2.4.0 of checkout-api", "--store", f"sqlite:///{db}",
         "--session", "S", "--base-url", openai_server.base_url, "--isolation", "process",
         "--toolkit", f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"],
    )  # fmt: skip
    return result, db


def _posts(openai_server: OpenAIServer) -> list[str]:
    return [json.dumps(r.body["messages"]) for r in openai_server.requests if r.method == "POST"]


def test_the_same_code_after_a_round_that_ran_is_not_run_again_and_the_model_is_asked_for_the_answer(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    result, db = _deploy_run(tmp_path, openai_server, DEPLOY, SAME_AGAIN, "D-1001")
    assert result.exit_code == 0, result.stderr
    records = _rounds(db)
    assert [r.status for r in records] == ["ok", "repeated"]  # type: ignore[attr-defined]
    deploys = [c for r in records for c in r.calls if c["operation"] == "deploy_app"]  # type: ignore[attr-defined]
    assert len(deploys) == 1  # the repeat did not deploy a second time
    assert deploys[0]["result"]["id"] == "D-1001"
    step = records[1].finish  # type: ignore[attr-defined]
    assert (step["step"], step["trigger"], step["answer"]) == ("final_answer", "repeat", "D-1001")
    assert result.stdout.strip() == "D-1001"
    final = _posts(openai_server)[2]
    assert "What is the final answer to the task? Reply with the answer alone" in final
    assert "Deploy 2.4.0 of checkout-api" in final and "D-1001" in final  # the task and what the code printed


def test_an_unknown_final_answer_goes_on_and_the_model_is_told_the_repeat_did_not_run(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    result, db = _deploy_run(tmp_path, openai_server, DEPLOY, SAME_AGAIN, "UNKNOWN", FINISH)
    assert result.exit_code == 0, result.stderr
    assert [r.status for r in _rounds(db)] == ["ok", "repeated", "ok"]  # type: ignore[attr-defined]
    assert result.stdout.strip() == "D-1001"
    third_round = _posts(openai_server)[3]
    assert "it was not run again" in third_round


def test_with_final_answer_off_the_repeat_runs_and_the_model_is_told_to_finish(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """``workflow.codeact.finalAnswer: false``: the behaviour before the finishing protocol."""
    result, db = _deploy_run(tmp_path, openai_server, DEPLOY, SAME_AGAIN, FINISH, options=", finalAnswer: false")
    assert result.exit_code == 0, result.stderr
    records = _rounds(db)
    assert [r.status for r in records] == ["ok", "ok", "ok"]  # type: ignore[attr-defined]
    deploys = [c for r in records for c in r.calls if c["operation"] == "deploy_app"]  # type: ignore[attr-defined]
    assert len(deploys) == 2
    assert result.stdout.strip() == str(deploys[1]["result"]["id"])
    second, third = _posts(openai_server)[1:3]
    assert "this was the code of the previous round again" not in second
    assert "this was the code of the previous round again, and it ran again" in third
    assert "await system.finish(answer=...)" in third


def _run_without_toolkits(tmp_path: Path, openai_server: OpenAIServer, task: str) -> tuple[Result, Path]:
    """``codeact run`` of the blueprint without the devops toolkit, session S in ``tmp_path/s.db``."""
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.replace("toolkits: [{ref: devops}]\n", ""))
    db = tmp_path / "s.db"
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", task, "--store", f"sqlite:///{db}", "--session", "S",
         "--base-url", openai_server.base_url, "--isolation", "process"],
    )  # fmt: skip
    return result, db


def test_the_same_code_after_a_failed_round_runs_again(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """A retry of code that failed gets no such note (the failure may be transient); maxRepeats bounds it."""
    flaky = "```python\nprint(undefined_name)\n```"
    openai_server.push(flaky, flaky, "```python\nawait system.finish(answer='gave up')\n```")
    result, db = _run_without_toolkits(tmp_path, openai_server, "Try")
    assert result.exit_code == 0, result.stderr
    assert [r.status for r in _rounds(db)] == ["error", "error", "ok"]  # type: ignore[attr-defined]


def _two_failures_then_the_answer(tmp_path: Path, openai_server: OpenAIServer, task: str, answer: str) -> list[str]:
    """Run ``task`` (two failing rounds, then the answer); the model requests' messages as JSON text."""
    result, db = _run_without_toolkits(tmp_path, openai_server, task)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == answer
    assert [r.status for r in _rounds(db)] == ["error", "error", "ok"]  # type: ignore[attr-defined]
    return [json.dumps(r.body["messages"]) for r in openai_server.requests if r.method == "POST"]


def test_the_same_error_twice_tells_the_model_to_change_the_failing_line(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The 1.5B model wrote `hotels[0]["price"]` seven rounds running, though the KeyError named the keys."""
    hotels = 'hotels = [{"name": "Alfama", "nightly": 61.0}]\n'
    price = f"I read the price.\n```python\n{hotels}total = hotels[0]['price'] * 2\nprint(total)\n```"
    other = f"```python\n{hotels}cheapest = hotels[0]['price']\n```"  # other code, same error
    nightly = "```python\nawait system.finish(answer=hotels[0]['nightly'] * 2)\n```"
    openai_server.push(price, other, nightly)
    posts = _two_failures_then_the_answer(tmp_path, openai_server, "Two nights at Alfama?", "122.0")
    assert "'nightly'" in posts[1]  # the hint names the key that exists
    assert "the same error as in the round before" not in posts[1]
    assert "the same error as in the round before" in posts[2]


def test_a_name_a_failed_round_never_reached_is_said_to_be_unassigned(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The 1.5B printed ``best_hotel`` three rounds running after the round that was to assign it failed earlier."""
    first = (
        "```python\nhotels = [{'name': 'Alfama', 'nightly': 85.0, 'rating': 4.1}]\n"
        "cheap = [h for h in hotels if h['price'] <= 100]\n"  # line 2: KeyError
        "best_hotel = max(cheap, key=lambda h: h['rating'])\nprint(best_hotel['name'])\n```"
    )
    again = "```python\ncheap = [h for h in hotels if h['nightly'] <= 100]\nprint(best_hotel['name'])\n```"
    fixed = (
        "```python\nbest_hotel = max(cheap, key=lambda h: h['rating'])\n"
        "await system.finish(answer=best_hotel['name'])\n```"
    )
    openai_server.push(first, again, fixed)
    posts = _two_failures_then_the_answer(tmp_path, openai_server, "Best hotel under 100 EUR?", "Alfama")
    note = "`best_hotel` is assigned on line 3 of round 1's code, but that round failed on line 2"
    assert note not in posts[1]  # round 1's KeyError is not a NameError
    assert note in posts[2]
    assert "`cheap`" not in posts[2]  # round 2 assigned `cheap` before its failing line: it exists


def test_a_stored_tool_result_is_shown_and_system_operations_run_from_any_toolkit(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The 1.5B ended rounds with `page = await browser.read()` and called `browser.parse` for `system.parse`."""
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT)
    db = tmp_path / "s.db"
    stored = "Let me read it first.\n```python\nproject = await devops.get_project_info(project_id='P-123')\n```"
    wrong_toolkit = "```python\nawait devops.finish(answer=project['id'])\n```"
    openai_server.push(stored, wrong_toolkit)
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", "Which project is P-123?", "--store", f"sqlite:///{db}",
         "--session", "S", "--base-url", openai_server.base_url, "--isolation", "process",
         "--toolkit", f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "P-123"  # devops.finish ran as system.finish
    records = _rounds(db)
    assert [r.status for r in records] == ["ok", "ok"]  # type: ignore[attr-defined]
    assert records[0].stdout.startswith("project -> {'id': 'P-123'")  # type: ignore[attr-defined]
    second = json.dumps([r.body for r in openai_server.requests if r.method == "POST"][1]["messages"])
    assert "project -> {" in second  # the model read the stored value, not only an 80-character repr
