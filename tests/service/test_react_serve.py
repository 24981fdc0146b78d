"""`codeact serve` streams a react run over SSE: its text as `message.delta`, its assembled tool calls run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.openai_server import OpenAIServer, Reply, ToolCallReply, serve
from tests.service.helpers import Served, context, start_server, stop_server, stream_run

REPO = Path(__file__).resolve().parents[2]
RUNNER = "react-svc"
BLUEPRINT = f"""\
version: codeact.agent/v1
id: {RUNNER}
description: A react agent served over HTTP.
instructions:
  system: You are a DevOps assistant.
toolkits:
  - ref: system
  - ref: devops
workflow: {{mode: react, maxTurns: 3}}
"""


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def react_service(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("react-serve")
    blueprint = tmp / "react.yaml"
    blueprint.write_text(BLUEPRINT)
    served = start_server(
        tmp,
        [blueprint],
        "--toolkit", str(REPO / "examples" / "devops" / "toolkit.py") + ":DevOps",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
    )  # fmt: skip
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def test_a_react_run_streams_its_text_and_runs_the_assembled_tool_call(
    react_service: Served, model_server: OpenAIServer
) -> None:
    call = ToolCallReply(id="call_1", name="devops__get_project_info", arguments={"project_id": "P-123"})
    model_server.push(
        Reply(text="Looking up P-123 for you.", tool_calls=(call,), tool_chunk=3),
        "P-123 (Checkout) is owned by lin.wei.",
    )
    with react_service.client() as client:
        [manifest] = client.get("/v1/runners").json()["runners"]
        assert manifest["id"] == RUNNER and manifest["capabilities"]["streaming"] is True
        assert manifest["capabilities"]["multimodal_input"] is False  # no sandbox for files: not claimed
        events = stream_run(client, RUNNER, context("Who owns P-123?"))

    types = [e.event for e in events]
    assert types[-1] == "run.completed", events[-1]
    chunks = [e.data["data"]["chunk"]["content"] for e in events if e.event == "message.delta"]
    assert "".join(chunks) == "Looking up P-123 for you.P-123 (Checkout) is owned by lin.wei."
    first_call = types.index("tool.call.started")
    assert types.index("message.delta") < first_call
    started = events[first_call].data["data"]
    assert (started["tool_name"], started["parameters"]) == ("devops.get_project_info", {"project_id": "P-123"})
    answers = [e.data["data"]["message"]["content"] for e in events if e.event == "message.completed"]
    assert answers[-1] == "P-123 (Checkout) is owned by lin.wei."
    assert all(r.body.get("stream") is True for r in model_server.requests if r.method == "POST")
