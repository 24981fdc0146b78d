"""Time limits that mean what they say (issue 27 item 1), end to end through ``codeact run``.

A round's limit counts the code's own time: while a toolkit call, an approval or a sub-agent is in
flight on the host the round's clock is paused (each is bounded by its own timeout instead); a busy
loop still dies at the limit; a blueprint cannot ask more than the host's cap; ``workflow.runSeconds``
stops a run. The numbers are scaled down (a 2 s round limit, 4 s of waiting): the behaviour is the same.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_cli_run import _run_in_a_terminal, cli, events, isolated, replies, show, store_url

__all__ = ["isolated"]  # the autouse fixture of test_cli_run: no profiles, no default store or model

OPS = f"{Path(__file__).parent / 'limits_toolkit.py'}:Ops"
ROUND = 2  # seconds of code per round in these tests
WAIT = 4  # seconds the host takes: longer than a round may run code


def blueprint(
    tmp_path: Path, *, workflow: str = "", body: str = "", name: str = "agent.yaml", agent_id: str = "limits"
) -> Path:
    text = (
        "version: codeact.agent/v1\nextend: codeact-base\n"
        f"id: {agent_id}\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        f"workflow: {{maxTurns: 6, codeact: {{thought: 'off', roundSeconds: {ROUND}}}{workflow}}}\n"
        "toolkits: [{ref: system}, {ref: ops}]\n" + body
    )
    path = tmp_path / name
    path.write_text(text)
    return path


def run(path: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    rc, out, err = cli(
        "run", str(path), "--input", "deploy 2.4.0", "--store", store_url(tmp_path), "--session", "S",
        "--toolkit", OPS, "--json", *extra,
    )  # fmt: skip
    return rc, events(out), err


def code_completed(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in stream if e["type"] == "code.completed"]


SANDBOXES = [
    pytest.param((), id="subprocess"),
    pytest.param(("--sandbox", "docker"), id="docker", marks=[pytest.mark.integration, pytest.mark.docker]),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_tool_call_longer_than_the_round_limit_completes(tmp_path: Path, sandbox: tuple[str, ...]) -> None:
    replies(
        tmp_path,
        "The deployment takes a few seconds; I'll wait for it.\n\n"
        f"```python\nresult = await ops.deploy(version='2.4.0', seconds={WAIT})\nprint(result)\n```",
        "```python\nsystem.finish(result)\n```",
    )
    started = time.monotonic()
    rc, stream, err = run(blueprint(tmp_path), tmp_path, *sandbox)
    assert rc == 0, err
    first = code_completed(stream)[0]
    assert (first["status"], first["stdout"], first["error"]) == ("ok", "deployed 2.4.0\n", None)
    assert stream[-1]["type"] == "run.completed" and stream[-1]["answer"] == "deployed 2.4.0"
    assert time.monotonic() - started >= WAIT


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_busy_loop_still_dies_at_the_round_limit(tmp_path: Path, sandbox: tuple[str, ...]) -> None:
    replies(
        tmp_path,
        "```python\nprint(ops.deploy(version='2.4.0', seconds=0.1))\nwhile True:\n    pass\n```",
        "The loop never ended.\n```python\nsystem.finish('gave up')\n```",
    )
    rc, stream, err = run(blueprint(tmp_path), tmp_path, *sandbox)
    assert rc == 0, err
    first = code_completed(stream)[0]
    assert first["status"] == "deadline_exceeded"
    assert first["error"]["type"] == "DeadlineExceeded"
    assert first["error"]["message"].startswith(
        f"the round ran past its {ROUND} s limit of time running code (waiting on toolkit calls not counted); "
        "the sandbox was killed"
    )
    assert stream[-1]["answer"] == "gave up"


def test_gathered_calls_pause_the_clock_while_any_is_in_flight(tmp_path: Path) -> None:
    replies(
        tmp_path,
        "```python\nimport asyncio\n"
        "done = await asyncio.gather(ops.deploy(version='a', seconds=1), ops.deploy(version='b', seconds=3),"
        " ops.deploy(version='c', seconds=2))\nprint(done)\n```",
        "```python\nsystem.finish(len(done))\n```",
    )
    rc, stream, err = run(blueprint(tmp_path), tmp_path)
    assert rc == 0, err
    assert code_completed(stream)[0]["stdout"] == "['deployed a', 'deployed b', 'deployed c']\n"
    assert stream[-1]["answer"] == 3


def test_an_approval_answered_after_the_round_limit_completes(tmp_path: Path) -> None:
    replies(
        tmp_path,
        "Releasing needs your approval.\n```python\nresult = ops.release(version='2.4.0')\n```",
        "```python\nsystem.finish(result)\n```",
    )
    path = blueprint(tmp_path)  # ops.release is declared approval="ask"
    rc, out, screen = _run_in_a_terminal(
        ["run", str(path), "--input", "release", "--store", store_url(tmp_path), "--toolkit", OPS],
        b"y\n",
        delay=WAIT,
    )
    assert rc == 0, screen
    assert "Allow ops.release" in screen
    assert out == "released 2.4.0\n"


def test_a_sub_agent_running_longer_than_the_round_limit_completes(tmp_path: Path) -> None:
    # Sub-agents share the host's model client: the one script holds the parent's and the child's replies.
    replies(
        tmp_path,
        "Let the reviewer look at it.\n```python\nreview = await agents.reviewer(task='review 2.4.0')\n```",
        "```python\nsystem.sleep(1.5)\nfirst = 'no rollback plan'\n```",  # the reviewer's rounds
        "```python\nsystem.sleep(1.5)\n```",
        "```python\nsystem.finish(first)\n```",
        "```python\nsystem.finish('reviewed: ' + review)\n```",
    )
    blueprint(tmp_path, name="reviewer.yaml", agent_id="reviewer")
    path = blueprint(
        tmp_path, body="subagents:\n  reviewer: {path: ./reviewer.yaml, description: Reviews a release.}\n"
    )
    started = time.monotonic()
    rc, stream, err = run(path, tmp_path)
    assert rc == 0, (err, stream)
    assert code_completed(stream)[0]["status"] == "ok"
    assert stream[-1]["answer"] == "reviewed: no rollback plan"
    assert time.monotonic() - started >= 3


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        pytest.param("roundSeconds", "workflow.codeact.roundSeconds", id="roundSeconds"),
        pytest.param("timeoutSeconds", "sandbox.limits.timeoutSeconds", id="sandbox-timeoutSeconds"),
    ],
)
def test_a_blueprint_asking_more_than_the_host_cap_is_refused(tmp_path: Path, setting: str, field: str) -> None:
    replies(tmp_path, "```python\nsystem.finish('never')\n```")
    if setting == "roundSeconds":
        path = blueprint(tmp_path)
        path.write_text(path.read_text().replace(f"roundSeconds: {ROUND}", "roundSeconds: 900"))
        extra: tuple[str, ...] = ()
    else:
        path = blueprint(tmp_path, body="sandbox: {limits: {timeoutSeconds: 900}}\n")
        path.write_text(path.read_text().replace(f", roundSeconds: {ROUND}", ""))
        extra = ("--allow-sandbox-declaration",)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), "--toolkit", OPS,
                       "--max-round-seconds", "300", *extra)  # fmt: skip
    assert rc == 2
    assert err.splitlines()[0] == (
        f"Blueprint factory error [blueprint.roundSeconds.overHostCap]: {field} asks for 900 s of code per round, "
        f"more than this host allows (300 s); lower {field} to 300 or less, or let the host allow more "
        "(--max-round-seconds, HostContext(max_round_seconds=...))."
    )
    # The default cap (600 s) refuses it too; 900 is fine for a host that allows it.
    assert cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), "--toolkit", OPS, *extra)[0] == 2
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), "--toolkit", OPS,
                       "--max-round-seconds", "900", *extra)  # fmt: skip
    assert (rc, out) == (0, "never\n"), err


def test_the_run_limit_stops_a_run(tmp_path: Path) -> None:
    importlib.import_module("litellm")  # its first import (seconds) is not what this run's limit is about
    replies(
        tmp_path,
        "```python\nfirst = ops.deploy(version='2.4.0', seconds=0.5)\n```",
        "```python\nsecond = ops.deploy(version='2.4.1', seconds=60)\n```",
        "```python\nsystem.finish('never')\n```",
    )
    path = blueprint(tmp_path, workflow=", runSeconds: 8")
    started = time.monotonic()
    rc, stream, err = run(path, tmp_path)
    assert rc == 1, err
    assert time.monotonic() - started < 60
    failed = stream[-1]
    assert failed["type"] == "run.failed"
    assert failed["error"] == {
        "code": "run.time_limit",
        "message": "the run passed its time limit of 8 s (workflow.runSeconds); the round in progress was stopped. "
        "Raise workflow.runSeconds, or continue the session",
    }
    session = show("S", store_url(tmp_path))
    assert session["session"]["status"] == "failed"
    rounds = session["rounds"]
    assert [r["status"] for r in rounds] == ["ok", "interrupted"]
    assert [c["operation"] for c in rounds[1]["calls"]] == ["deploy"]


def test_limits_are_documented_in_one_table() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
    for name in ("workflow.codeact.roundSeconds", "workflow.runSeconds", "--max-round-seconds", "cpu_s"):
        assert name in docs, name


def test_serve_refuses_a_blueprint_over_its_cap(tmp_path: Path) -> None:
    path = blueprint(tmp_path)
    path.write_text(path.read_text().replace(f"roundSeconds: {ROUND}", "roundSeconds: 900"))
    rc, _, err = cli("serve", "--blueprints", str(path), "--toolkit", OPS, "--max-round-seconds", "300",
                     "--store", store_url(tmp_path))  # fmt: skip
    assert rc == 2
    assert "workflow.codeact.roundSeconds asks for 900 s of code per round, more than this host allows (300 s)" in err
