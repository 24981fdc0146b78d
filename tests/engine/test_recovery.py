"""Recovery end to end: a real ``codeact run`` process killed, interrupted, or losing its store mid-round.

Each test drives the installed ``codeact`` script in a subprocess against the local OpenAI-compatible
server, with a host toolkit (``tests/engine/recovery_toolkit.py``) whose first call changes state
and whose second call blocks, so the run can be hit while a round is half done. Stores: a SQLite
file, and a private ``redis-server`` the test starts, kills, stops and restarts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.store import open_store
from tests.engine.openai_server import OpenAIServer
from tests.redis_server import PrivateRedis, running

CODEACT = str(Path(sys.executable).parent / "codeact")
TOOLKIT = f"{Path(__file__).parent / 'recovery_toolkit.py'}:Inventory"
ROUND_1 = (
    "I add the item, then wait for the warehouse.\n"
    "```python\nresult = inventory.add_item(name='apple')\nprint(result)\ninventory.hold()\n```"
)
FINISH = "```python\nsystem.finish('resumed')\n```"
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: recovery-agent
toolkits:
  - ref: system
  - ref: inventory
workflow: {maxTurns: 4, codeact: {thought: 'off'}}
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    return {
        **base,
        "CODEACT_HOME": str(tmp_path / "home"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-test",
        "RECOVERY_STATE": str(tmp_path / "inventory.txt"),
        "COLUMNS": "200",
    }


def _args(tmp_path: Path, server: OpenAIServer, store: str, session: str, text: str) -> list[str]:
    agent = tmp_path / "agent.yaml"
    agent.write_text(BLUEPRINT)
    return [
        str(agent), "--toolkit", TOOLKIT, "--model", "openai/test-model", "--base-url", server.base_url,
        "--store", store, "--session", session, "--input", text,
    ]  # fmt: skip


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([CODEACT, "run", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _holding(state: Path, process: subprocess.Popen[str]) -> bool:
    if process.poll() is not None:
        out, err = process.communicate()
        raise AssertionError(f"the run ended early ({process.returncode}):\n{out}\n{err}")
    return state.exists() and "holding" in state.read_text()


def _journal(store: str, session_id: str) -> list[tuple[str, str]]:
    """The call journal the run wrote to the store's pending list: ``(kind, operation)`` of each call entry."""

    async def read() -> list[dict[str, Any]]:
        opened = open_store(store)
        try:
            return await opened.pending(session_id)
        finally:
            await opened.close()

    entries = asyncio.run(read())
    return [
        (e["kind"], e["call"]["operation"] if e["kind"] == "call" else e["operation"])
        for e in entries
        if e["kind"] != "code"
    ]


def _codeact(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CODEACT, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def _sessions_list(env: dict[str, str], store: str) -> dict[str, dict[str, Any]]:
    listed = _codeact(env, "sessions", "list", "--store", store, "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["session_id"]: row for row in json.loads(listed.stdout)}


def _show(env: dict[str, str], store: str, session: str) -> dict[str, Any]:
    shown = _codeact(env, "sessions", "show", session, "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def _prompt_of_last_request(server: OpenAIServer) -> str:
    posts = [r for r in server.requests if r.method == "POST"]
    return "\n".join(str(m.get("content")) for m in posts[-1].body["messages"])


def _assert_resumed_with_the_interrupted_round(
    env: dict[str, str], store: str, session: str, server: OpenAIServer, resume: list[str]
) -> None:
    """Resume at once (no waiting for a lock to expire); the model hears what ran; the record keeps it."""
    server.push(FINISH)
    resumed = subprocess.run(resume, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "resumed\n"
    prompt = _prompt_of_last_request(server)
    assert "Round 1 was interrupted" in prompt
    assert 'inventory.add_item(name="apple") -> "added apple"' in prompt
    assert "Do not repeat them: their results are above" in prompt
    # hold() was running when the run stopped: in flight, with the id to check it by; nothing told to run again
    assert "In flight when it stopped: these calls had started, and their outcome is unknown" in prompt
    assert f"- inventory.hold() [call id {session}:1:1]" in prompt
    assert "run again" not in prompt

    data = _show(env, store, session)
    assert data["session"]["status"] == "completed"
    first = data["rounds"][0]
    assert first["status"] == "interrupted"
    assert [(c["operation"], c["result"]) for c in first["calls"] if c["operation"] == "add_item"] == [
        ("add_item", "added apple")
    ]
    assert "inventory.add_item(name='apple')" in (first["code"] or "")
    assert [r["status"] for r in data["rounds"][1:]] == ["ok"]

    replay = _codeact(env, "replay", session, "--store", store, "--toolkit", TOOLKIT, "--json")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    report = json.loads(replay.stdout)
    assert [r["status"] for r in report["rounds"]] == ["skipped", "match"]  # the interrupted round is not a mismatch


# -- a private redis-server --------------------------------------------------------------------------------


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    directory = tmp_path / "redis"
    directory.mkdir()
    yield from running(PrivateRedis(directory, query="prefix=recovery"))


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    server: PrivateRedis = request.getfixturevalue("own_redis")
    return server.url


# -- the tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_killed_run_resumes_at_once_with_its_completed_calls(
    kind: str, tmp_path: Path, openai_server: OpenAIServer, env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    store = _store(kind, tmp_path, request)
    state = Path(env["RECOVERY_STATE"])
    openai_server.push(ROUND_1)
    run = _start(_args(tmp_path, openai_server, store, "K", "stock the shelf"), env)
    _wait_for(lambda: _holding(state, run), "the round to block in inventory.hold()")

    run.send_signal(signal.SIGKILL)  # the host dies mid-round
    run.communicate()

    listed = _sessions_list(env, store)["K"]
    assert listed["status"] == "interrupted"  # not "active" forever: its owner process is gone
    assert listed["lock"] is None
    resume = [CODEACT, "run", *_args(tmp_path, openai_server, store, "K", "continue")]
    _assert_resumed_with_the_interrupted_round(env, store, "K", openai_server, resume)
    assert state.read_text().count("added apple") == 1  # the side effect happened once


def test_ctrl_c_records_the_round_and_prints_the_whole_resume_command(
    tmp_path: Path, openai_server: OpenAIServer, env: dict[str, str]
) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    state = Path(env["RECOVERY_STATE"])
    openai_server.push(ROUND_1)
    run = _start(_args(tmp_path, openai_server, store, "C", "stock the shelf"), env)
    _wait_for(lambda: _holding(state, run), "the round to block in inventory.hold()")

    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err
    assert "interrupted: session C was saved with the round in progress marked interrupted" in err
    command = err[err.index("resume with:") :].splitlines()[1].strip()
    words = shlex.split(command)
    assert words[:3] == ["codeact", "run", str(tmp_path / "agent.yaml")]
    for option, value in [
        ("--toolkit", TOOLKIT),
        ("--model", "openai/test-model"),
        ("--base-url", openai_server.base_url),
        ("--store", store),
        ("--session", "C"),
    ]:
        assert words[words.index(option) + 1] == value

    data = _show(env, store, "C")
    assert data["session"]["status"] == "interrupted"
    [first] = data["rounds"]
    assert first["status"] == "interrupted"
    assert [c["operation"] for c in first["calls"]][:1] == ["add_item"]

    _assert_resumed_with_the_interrupted_round(env, store, "C", openai_server, [CODEACT, *words[1:]])


@pytest.mark.parametrize("outage", ["killed", "hung"])
def test_a_redis_outage_fails_the_run_within_the_bound_and_the_session_resumes(
    outage: str, tmp_path: Path, openai_server: OpenAIServer, env: dict[str, str], own_redis: PrivateRedis
) -> None:
    store = own_redis.url
    state = Path(env["RECOVERY_STATE"])
    openai_server.push(ROUND_1)
    run = _start(_args(tmp_path, openai_server, store, "R", "stock the shelf"), env)
    _wait_for(lambda: _holding(state, run), "the round to block in inventory.hold()")
    # Write-ahead: add_item's completion was durable before its result reached the code, so before hold()
    # started; and hold()'s start was durable before it ran (no waiting for a background write).
    assert _journal(store, "R") == [("start", "add_item"), ("call", "add_item"), ("start", "hold")]

    if outage == "killed":
        own_redis.kill()
    else:
        own_redis.signal(signal.SIGSTOP)
    Path(f"{state}.release").touch()  # the round ends and must be recorded: the store is gone
    # docs/store.md: a run fails within 3 x the 2 s store timeout (plus the sandbox's shutdown); the
    # communicate() timeout only keeps a hang from blocking the suite.
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, err
    assert "store.unavailable" in err
    assert f"Redis at redis://127.0.0.1:{own_redis.port}/0?prefix=recovery is unreachable" in err
    assert "Traceback" not in err

    if outage == "killed":
        own_redis.start()  # same directory: the append-only file brings the data back
    else:
        own_redis.signal(signal.SIGCONT)
    listed = _sessions_list(env, store)["R"]
    assert listed["status"] == "interrupted"

    openai_server.push(FINISH)
    resumed = _codeact(env, "run", *_args(tmp_path, openai_server, store, "R", "continue"))
    assert resumed.returncode == 0, resumed.stderr
    data = _show(env, store, "R")
    assert data["session"]["status"] == "completed"
    first = data["rounds"][0]
    # Nothing lost: round 1 is either the whole round (a hung Redis applied the write when it woke up)
    # or the interrupted round folded from the calls written as they completed.
    assert first["status"] in ("interrupted", "ok") if outage == "hung" else first["status"] == "interrupted"
    assert ("add_item", "added apple") in [(c["operation"], c.get("result")) for c in first["calls"]]
    if first["status"] == "interrupted":
        assert "Round 1 was interrupted" in _prompt_of_last_request(openai_server)
