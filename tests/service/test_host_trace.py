"""The host's ``runtime.trace_id`` is continued by the run (issue 36, seed 003): with tracing on, every span
of the run is in the host's trace, so the host's own trace shows the agent's rounds and calls.

A real ``codeact serve`` with spans written as JSON lines (``OTEL_TRACES_EXPORTER=jsonl``), the local
OpenAI-compatible server as the model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.helpers import Served, context, run_envelopes, serve_blueprint

RUNNER = "traced-agent"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
"""
HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("host-trace")
    spans = tmp / "spans.jsonl"
    env = {"OTEL_TRACES_EXPORTER": "jsonl", "CODEACT_TRACE_FILE": str(spans)}
    with serve_blueprint(tmp, BLUEPRINT, model_server.base_url, env=env) as server:
        yield server, spans


def _run(served: Served, ctx: dict[str, Any]) -> list[dict[str, Any]]:
    envelopes = run_envelopes(served, RUNNER, ctx)
    assert envelopes[-1]["type"] == "run.completed", envelopes[-1]
    return envelopes


def _spans(path: Path, session: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the exporter writes a run's spans as they end
        lines = path.read_text().splitlines() if path.exists() else []
        spans = [json.loads(line) for line in lines]
        roots = [s for s in spans if s["attributes"].get("codeact.session_id") == session]
        if roots:
            trace = roots[0]["context"]["trace_id"]
            return [s for s in spans if s["context"]["trace_id"] == trace]
        time.sleep(0.2)
    raise AssertionError(f"no span of session {session} in {path}")


def test_the_run_continues_the_host_s_trace(traced: tuple[Served, Path], model_server: OpenAIServer) -> None:
    served, path = traced
    model_server.push('```python\nsystem.finish("done")\n```')
    ctx = context("Finish.", conversation="traced-conv")
    ctx["runtime"] = {"trace_id": HOST_TRACE}
    envelopes = _run(served, ctx)
    session = next(e["data"]["value"] for e in envelopes if e["type"] == "state.updated")
    spans = _spans(path, session)
    assert {s["context"]["trace_id"].removeprefix("0x") for s in spans} == {HOST_TRACE}
    assert any(s["name"].startswith("round ") for s in spans)  # the rounds are in the host's trace too


def test_a_malformed_trace_id_is_ignored(traced: tuple[Served, Path], model_server: OpenAIServer) -> None:
    served, path = traced
    model_server.push('```python\nsystem.finish("done")\n```')
    ctx = context("Finish.", conversation="other-conv")
    ctx["runtime"] = {"trace_id": "not-a-trace-id"}
    envelopes = _run(served, ctx)
    session = next(e["data"]["value"] for e in envelopes if e["type"] == "state.updated")
    spans = _spans(path, session)
    assert {s["context"]["trace_id"].removeprefix("0x") for s in spans} != {HOST_TRACE}
