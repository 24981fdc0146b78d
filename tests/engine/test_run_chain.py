"""The execution chain of a session's segments and the run's trace id (issue 26, smaller items).

Through ``codeact.Agent`` and ``codeact run`` against the local OpenAI-compatible server, with a real
subprocess sandbox and a SQLite store; replies as models write them (prose, then a code block).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact import Agent
from codeact.engine.store import open_store
from tests.engine.openai_server import OpenAIServer

CODEACT = str(Path(sys.executable).parent / "codeact")
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: chain-agent
workflow:
  maxTurns: 4
  codeact:
    thought: inline
"""
LOOK = "Thought: I look at the numbers first.\n```python\nnumbers = [3, 4, 5]\nprint(sum(numbers))\n```"
FINISH = "Thought: the sum is printed, so I answer.\n```python\nsystem.finish(sum(numbers))\n```"
AGAIN = "Thought: one more number.\n```python\nnumbers.append(6)\nsystem.finish(sum(numbers))\n```"


@pytest.fixture(autouse=True)
def model_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def make_agent(tmp_path: Path, server: OpenAIServer) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT)
    store = f"sqlite:///{tmp_path / 's.db'}"
    return Agent.from_blueprint(path, model="openai/test", base_url=server.base_url, store=store)


def chain(segment: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    return segment["kind"], segment["exec_id"], tuple(segment["parent_exec_ids"])


async def test_each_rounds_segments_name_their_round_and_the_round_before(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(LOOK, FINISH, AGAIN)
    events: list[Any] = []
    async with make_agent(tmp_path, openai_server) as agent:
        first = await agent.invoke("Add up 3, 4 and 5.", session_id="S", on_event=events.append)
        second = await agent.invoke("Now add 6 too.", session_id="S", on_event=events.append)
        stored = list(await agent.store.segments("S"))
    assert (first.answer, second.answer) == (12, 18)
    kinds = [chain(s) for s in stored]
    # The task comes before any execution; round 1 has no parent; round 2 descends from round 1.
    assert kinds[0] == ("User", "", ())
    assert {c for c in kinds if c[1] == "S:1"} >= {("Code", "S:1", ()), ("Evaluation", "S:1", ())}
    assert {c for c in kinds if c[1] == "S:2"} >= {("Code", "S:2", ("S:1",)), ("Evaluation", "S:2", ("S:1",))}
    # The resumed session's task follows round 2, and its round (3) goes on from there.
    assert ("User", "", ("S:2",)) in kinds
    assert {c for c in kinds if c[1] == "S:3"} >= {("Code", "S:3", ("S:2",))}
    # The events carry the same chain as the record.
    created = [chain(e.segment) for e in events if e.type == "segment.created"]
    assert created == kinds


async def test_run_started_and_the_session_record_carry_the_runs_trace_id(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(AGAIN.replace("numbers.append(6)\n", "numbers = [6]\n"))
    events: list[Any] = []
    async with make_agent(tmp_path, openai_server) as agent:
        await agent.invoke("What is 6?", session_id="T", on_event=events.append)
        meta = await agent.store.get_session("T")
    started = events[0]
    assert started.type == "run.started"
    assert started.trace_id == started.run_id  # tracing off: the run's own (fresh, 32 hex digits) id
    assert len(started.trace_id) == 32 and int(started.trace_id, 16) >= 0
    assert meta is not None and meta.extra["trace_id"] == started.trace_id


def test_with_tracing_the_trace_id_is_the_run_spans(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """Through the installed script (tracing is per process): run.started names the trace of its spans."""
    openai_server.push(LOOK.replace("print(sum(numbers))", "system.finish(sum(numbers))"))
    agent = tmp_path / "agent.yaml"
    agent.write_text(BLUEPRINT)
    trace_file, store = tmp_path / "trace.jsonl", f"sqlite:///{tmp_path / 's.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"CODEACT_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"})
    run = subprocess.run(
        [CODEACT, "run", str(agent), "--model", "openai/test", "--base-url", openai_server.base_url]
        + ["--store", store, "--session", "U", "--json", "--trace", str(trace_file), "--input", "Sum 3, 4, 5."],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    (root,) = [s for s in spans if s["parent_id"] is None]
    trace_id = root["context"]["trace_id"].removeprefix("0x")
    assert events[0]["type"] == "run.started" and events[0]["trace_id"] == trace_id != events[0]["run_id"]

    async def session() -> Any:
        async with open_store(store) as opened:
            return await opened.get_session("U")

    assert asyncio.run(session()).extra["trace_id"] == trace_id
