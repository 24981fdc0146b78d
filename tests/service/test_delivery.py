"""The context's ``delivery`` is honoured (issue 36, seed 003): no chunks to a surface that cannot stream,
and a message longer than the surface takes arrives as several (``max_message_size``).

A real ``codeact serve`` and the local OpenAI-compatible server (streaming, as real servers do); the
model sends the user a long message and finishes with a long answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.helpers import Served, context, run_envelopes, serve_blueprint

RUNNER = "chat-agent"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
"""
NOTE = "I looked at every shelf in the store, one after the other, and counted the boxes on each of them."
ANSWER = "There are twelve boxes in all: five on shelf A, four on shelf B and three on shelf C, none on D."
REPLY = f"```python\nsystem.send_message({NOTE!r})\nsystem.finish({ANSWER!r})\n```"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    with serve_blueprint(tmp_path_factory.mktemp("delivery"), BLUEPRINT, model_server.base_url) as server:
        yield server


def _run(served: Served, delivery: dict[str, Any]) -> list[dict[str, Any]]:
    ctx = context("How many boxes are there?")
    ctx["delivery"] = {"surface": "chat", **delivery}
    envelopes = run_envelopes(served, RUNNER, ctx)
    assert envelopes[-1]["type"] == "run.completed", envelopes[-1]
    return envelopes


def _said(envelopes: list[dict[str, Any]]) -> list[str]:
    return [str(e["data"]["message"]["content"]) for e in envelopes if e["type"] == "message.completed"]


def test_a_surface_that_streams_gets_chunks_and_whole_messages(served: Served, model_server: OpenAIServer) -> None:
    model_server.push(REPLY)
    envelopes = _run(served, {"supports_streaming": True})
    assert [e for e in envelopes if e["type"] == "message.delta"]  # the model's reply, as it streamed
    assert [m for m in _said(envelopes) if m in (NOTE, ANSWER)] == [NOTE, ANSWER]


def test_a_surface_that_cannot_stream_gets_no_chunks(served: Served, model_server: OpenAIServer) -> None:
    model_server.push(REPLY)
    envelopes = _run(served, {"supports_streaming": False})
    assert [e for e in envelopes if e["type"] == "message.delta"] == []
    assert [m for m in _said(envelopes) if m in (NOTE, ANSWER)] == [NOTE, ANSWER]


def test_a_long_message_is_split_at_the_surface_s_size(served: Served, model_server: OpenAIServer) -> None:
    model_server.push(REPLY)
    envelopes = _run(served, {"supports_streaming": False, "max_message_size": 40})
    said = _said(envelopes)
    assert all(len(part) <= 40 for part in said), said
    assert f"{NOTE} {ANSWER}" in " ".join(said)  # split at spaces, nothing lost
    ids = [e["data"]["message"]["resp_message_id"] for e in envelopes if e["type"] == "message.completed"]
    assert len(set(ids)) == len(ids)  # each part is a message of its own
