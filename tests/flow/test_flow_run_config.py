"""A flow run's config (tags, metadata, user) reaches its steps' runs (issue 26, RunConfig on every entry point).

A sequential flow of two codeact agents on the local OpenAI-compatible server (replies as models write
them), a real subprocess sandbox and a SQLite store: through ``codeact run FLOW --tag --meta`` and
through ``FlowAgent.invoke(config=...)``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeact import RunConfig
from codeact.engine import CodeactError
from codeact.engine.flow import FlowAgent
from codeact.engine.store import open_store
from tests.engine.openai_server import OpenAIServer, serve

CODEACT = str(Path(sys.executable).parent / "codeact")
LEAF = """\
version: codeact.agent/v1
extend: codeact-base
id: {id}
model: {{provider: openai, model: gpt-4.1-mini}}
workflow: {{maxTurns: 2, codeact: {{thought: inline}}}}
"""
FLOW = """\
version: codeact.agent/v1
id: labelled-flow
workflow: {mode: flow}
flow:
  kind: sequential
  agents:
    - path: ./writer.yaml
      outputKey: draft
    - path: ./checker.yaml
"""
WRITE = "Thought: I write the line the task asks for.\n```python\nline = 'release 2.4.0'\nsystem.finish(line)\n```"
CHECK = "Thought: the draft names a version, so it passes.\n```python\nsystem.finish('ok: ' + 'release 2.4.0')\n```"


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with serve() as server:
        yield server


@pytest.fixture
def flow_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("writer", "checker"):
        (tmp_path / f"{name}.yaml").write_text(LEAF.format(id=name))
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(FLOW))
    return path


def sessions(store: str, *ids: str) -> list[Any]:
    async def read() -> list[Any]:
        async with open_store(store) as opened:
            return [await opened.get_session(i) for i in ids]

    return asyncio.run(read())


def test_codeact_run_labels_a_flow_and_each_step(flow_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(WRITE, CHECK)
    store = f"sqlite:///{flow_path.parent / 's.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    run = subprocess.run(
        [CODEACT, "run", str(flow_path), "--model", "openai/test", "--base-url", openai_server.base_url]
        + ["--store", store, "--session", "F", "--json", "--input", "Draft the release line."]
        + ["--tag", "release", "--meta", "ticket=812", "--meta", 'owner="ops"'],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    # The flow's run.started; each step's run.started is the flow's flow.step.started (steps are in the record).
    (started,) = [e for e in events if e["type"] == "run.started"]
    assert (started["tags"], started["metadata"]) == (["release"], {"ticket": 812, "owner": "ops"})
    assert [e["agent"] for e in events if e["type"] == "flow.step.started"] == ["writer", "checker"]
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "ok: release 2.4.0"
    flow, writer, checker = sessions(store, "F", "F.1.writer", "F.2.checker")
    for meta in (flow, writer, checker):
        assert meta.extra["tags"] == ["release"] and meta.extra["metadata"] == {"ticket": 812, "owner": "ops"}
    assert writer.extra["flow"]["parent_session"] == "F"


async def test_flow_invoke_takes_a_run_config(flow_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(WRITE, CHECK)
    store = f"sqlite:///{flow_path.parent / 's.db'}"
    events: list[Any] = []
    flow = FlowAgent.from_blueprint(flow_path, model="openai/test", base_url=openai_server.base_url, store=store)
    async with flow:
        config = RunConfig(thread_id="G", tags=["nightly"], metadata={"build": 7}, user="ada")
        result = await flow.invoke("Draft the release line.", config=config, on_event=events.append)
        with pytest.raises(CodeactError, match="differ"):
            await flow.invoke("again", session_id="other", config=config)
        writer = await flow.store.get_session("G.1.writer")
        meta = await flow.store.get_session("G")
    assert result.session_id == "G" and result.answer == "ok: release 2.4.0"
    (started,) = [e for e in events if e.type == "run.started"]
    assert (started.tags, started.metadata, started.session_id) == (("nightly",), {"build": 7}, "G")
    assert meta is not None and meta.extra["tags"] == ["nightly"] and meta.extra["metadata"] == {"build": 7}
    assert writer is not None and writer.extra["tags"] == ["nightly"]
