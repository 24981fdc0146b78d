"""The finishing protocol: an answer a small model computed reaches the user (issue 39, docs/finishing.md).

Written the way Qwen2.5-Coder-1.5B writes behind an OpenAI-compatible URL: round 1 computes the answer
into ``answer`` (or prints it) and never calls ``system.finish``; round 2 sends the same code again; a
failing call is written the same way until the run is stuck. Each case runs ``codeact run`` against the
local OpenAI-compatible test server and reads the session back from the store.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from codeact.engine.cli import app
from codeact.engine.store import RoundRecord, SQLiteStore
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

TASK = "Which of the sequences ATG, ATGCA and GC is the shortest? Finish with its length alone."
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: finishing
model: {{provider: openai-compatible, model: openai/test-model}}
workflow: {{maxTurns: {turns}, codeact: {{thought: 'off'{options}}}}}
"""
# What the 1.5B wrote on the held-out DNA task: the right answer into `answer`, no finish.
ANSWER_ROUND = """```python
sequences = ["ATG", "ATGCA", "GC"]
shortest_length = min(len(s) for s in sequences)
answer = shortest_length
```"""


def _run(
    tmp_path: Path, openai_server: OpenAIServer, *replies: str, turns: int = 6, options: str = "", model: str = ""
) -> tuple[Result, list[RoundRecord]]:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT.format(turns=turns, options=options))
    db = tmp_path / "s.db"
    openai_server.push(*replies)
    args = ["run", str(path), "--input", TASK, "--store", f"sqlite:///{db}", "--session", "S",
            "--base-url", openai_server.base_url, "--isolation", "process"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, *(["--model", model] if model else [])])

    async def read() -> list[RoundRecord]:
        store = SQLiteStore(db)
        try:
            return list(await store.rounds("S"))
        finally:
            await store.close()

    return result, asyncio.run(read())


def _posts(openai_server: OpenAIServer) -> list[str]:
    return [json.dumps(r.body["messages"]) for r in openai_server.requests if r.method == "POST"]


def test_a_round_that_sets_answer_is_confirmed_and_finishes_the_run(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    result, records = _run(tmp_path, openai_server, ANSWER_ROUND, "Yes.")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2"
    assert [r.status for r in records] == ["ok"]
    step = records[0].finish
    assert (step["step"], step["trigger"], step["answer"]) == ("confirm", "answer_variable", 2)
    assert step["reply"] == "Yes."
    question = _posts(openai_server)[1]
    assert "Your code set `answer` = 2" in question and "Reply YES or NO" in question
    assert records[0].usage["finish"]["completion_tokens"] > 0  # the step's tokens are counted with the round


def test_a_no_goes_on_and_the_same_code_again_ends_with_the_final_answer_step(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The issue's transcript: ``answer = shortest_length``, then the same code again."""
    result, records = _run(tmp_path, openai_server, ANSWER_ROUND, "NO", ANSWER_ROUND, "Answer: 2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2"
    assert [r.status for r in records] == ["ok", "repeated"]
    assert "answer" not in records[0].finish  # the model said no: the run went on
    assert (records[1].finish["trigger"], records[1].finish["answer"]) == ("repeat", 2)
    final = _posts(openai_server)[3]
    assert "Variables:" in final and "answer = 2" in final


def test_a_final_answer_that_copies_the_question_is_no_answer(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """The 1.5B answered the final-answer step with the question's own words (cipher-01, 2026-11-29).

    It copied the ask's last sentence ("The value itself, not a sentence and not code."), 8 times in 53
    final-answer steps; the ask is a question since, which it did not copy on those 8 prompts (docs/finishing.md).
    """
    printing = "```python\nprint(min(len(s) for s in ['ATG', 'ATGCA', 'GC']))\n```"
    finishing = "```python\nawait system.finish(answer=2)\n```"
    echoed = "What is the final answer to the task?"
    result, records = _run(tmp_path, openai_server, printing, printing, echoed, finishing)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2"  # the model's own finish, not the copied words
    assert [r.status for r in records] == ["ok", "repeated", "ok"]
    assert (records[1].finish["trigger"], records[1].finish["reply"]) == ("repeat", echoed)
    assert "answer" not in records[1].finish
    assert "it was not run again" in _posts(openai_server)[3]  # the run went on, told the repeat did not run


def test_a_stuck_run_takes_the_final_answer_step_and_stays_failed_on_unknown(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    failing = "```python\nresult = dna.gc_content(sequence=4)\n```"  # no dna toolkit here: NameError each time
    result, records = _run(tmp_path, openai_server, failing, failing, failing, "UNKNOWN")
    assert result.exit_code != 0
    assert "the model produced the same code 3 times in a row" in result.stderr + result.stdout
    assert [r.status for r in records] == ["error", "error", "error"]
    assert (records[2].finish["trigger"], records[2].finish["reply"]) == ("stuck", "UNKNOWN")
    assert "answer" not in records[2].finish


def test_the_last_round_without_an_answer_asks_for_it(tmp_path: Path, openai_server: OpenAIServer) -> None:
    first = "```python\nlengths = {s: len(s) for s in ['ATG', 'ATGCA', 'GC']}\nprint(lengths)\n```"
    second = "```python\nprint(min(lengths.values()))\n```"
    result, records = _run(tmp_path, openai_server, first, second, "2", turns=2)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2"
    assert [r.status for r in records] == ["ok", "ok"]
    assert (records[1].finish["trigger"], records[1].finish["answer"]) == ("max_turns", 2)
    final = _posts(openai_server)[2]
    assert "{'ATG': 3, 'ATGCA': 5, 'GC': 2}" in final  # what the rounds printed, for the model to answer from


def test_a_run_stuck_on_prose_answers_from_what_its_code_printed(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """The DevOps run of 2026-11-29: the deploy printed in round 1, then replies without code until stuck."""
    printing = "```python\nlengths = {s: len(s) for s in ['ATG', 'ATGCA', 'GC']}\nprint(lengths)\n```"
    prose = "The shortest sequence is GC, so the answer is its length."  # no code: nothing runs
    result, records = _run(tmp_path, openai_server, printing, prose, prose, prose, "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2"
    assert [r.status for r in records] == ["ok", "no_code", "no_code", "no_code"]
    assert (records[3].finish["trigger"], records[3].finish["answer"]) == ("stuck", 2)
    final = _posts(openai_server)[4]
    assert "{'ATG': 3, 'ATGCA': 5, 'GC': 2}" in final  # round 1's output, not three "no code" notes
    assert "no Python code" not in final


def test_the_protocol_switched_off_keeps_the_old_endings(tmp_path: Path, openai_server: OpenAIServer) -> None:
    result, records = _run(
        tmp_path,
        openai_server,
        ANSWER_ROUND,
        ANSWER_ROUND,
        ANSWER_ROUND,
        options=", answerVariable: off, finalAnswer: false",
    )
    assert result.exit_code != 0
    assert "the model produced the same code 3 times in a row" in result.stderr + result.stdout
    assert [r.status for r in records] == ["ok", "ok", "ok"]
    assert all(not r.finish for r in records)
    assert len(_posts(openai_server)) == 3  # no question was asked


def test_a_session_with_finishing_steps_replays(tmp_path: Path, openai_server: OpenAIServer) -> None:
    result, _ = _run(tmp_path, openai_server, ANSWER_ROUND, "NO", ANSWER_ROUND, "2")
    assert result.exit_code == 0, result.stderr
    replay = CliRunner().invoke(app, ["replay", "S", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json"])
    assert replay.exit_code == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert [r["status"] for r in report["rounds"]] == ["match", "skipped"]


def test_the_layout_follows_the_model_behind_any_route(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """The 1.5B behind an OpenAI-compatible URL gets the registry's layout (turns), and the run says so."""
    result, _ = _run(tmp_path, openai_server, ANSWER_ROUND, "yes", model="openai/qwen2.5-coder-1.5b-instruct")
    assert result.exit_code == 0, result.stderr
    assert "layout turns (qwen2.5-coder-1.5b, a known model)" in result.stderr + result.stdout
    first = openai_server.requests[0].body["messages"]
    assert first[-1]["role"] == "user" and "Reply with the code of the first step" in first[-1]["content"]
    result, _ = _run(tmp_path, openai_server, ANSWER_ROUND, "yes", options=", layout: frame", model="openai/x-1.5b")
    assert "layout frame (workflow.codeact.layout)" in result.stderr + result.stdout
