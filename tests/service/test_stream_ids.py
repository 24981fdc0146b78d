"""What a polished UI needs from the stream, through a real `codeact serve` (docs/runner.md, "Ids and times").

A model (the local OpenAI-compatible server, streaming) answers in two rounds, Thought then code, the
way real models write; the UI links every chunk to its message, every tool call to the reply whose
code made it, shows the Thought apart from the code, and orders by float seconds (``at``).
A context without ``run_id`` gets a fresh one, so the same request can be sent twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.helpers import Served, context, run_envelopes, serve_blueprint

RUNNER = "ui-agent"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
workflow: {{maxTurns: 4, codeact: {{thought: inline}}}}
toolkits:
  - ref: system
"""
FIRST = (
    "Thought: I need the number of words first; I will split the sentence and count the parts.\n"
    "```python\nwords = 'codeact runs the code the model writes'.split()\nprint(len(words))\n```\n"
)
SECOND = (
    "Thought: There are 7 words. I tell the user and finish with the count.\n"
    "```python\nsystem.send_message(f'I counted {len(words)} words.')\nsystem.finish(f'{len(words)} words')\n```\n"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    with serve_blueprint(tmp_path_factory.mktemp("stream-ids"), BLUEPRINT, model_server.base_url) as server:
        yield server


def _run(served: Served, ctx: dict[str, Any]) -> list[dict[str, Any]]:
    return run_envelopes(served, RUNNER, ctx)


def test_ids_parents_times_and_the_thought_part(served: Served, model_server: OpenAIServer) -> None:
    model_server.push(FIRST, SECOND)
    envelopes = _run(served, context("How many words are in 'codeact runs the code the model writes'?"))
    assert envelopes[-1]["type"] == "run.completed", envelopes[-1]

    # one time format: unix seconds as floats (to the millisecond), in stream order, in `at`; `timestamp`
    # stays protocol v1's whole seconds (an SDK host validates the stream as it comes)
    stamps = [e["at"] for e in envelopes]
    assert all(isinstance(t, float) and 1.7e9 < t < 1e10 for t in stamps), stamps
    assert [e["timestamp"] for e in envelopes] == [int(t) for t in stamps]
    assert stamps == sorted(stamps)
    assert any(t != int(t) for t in stamps)
    with served.client() as client:
        run = client.get(f"/v1/runs/{envelopes[0]['run_id']}").json()
    assert isinstance(run["started_at"], float) and isinstance(run["finished_at"], float)
    assert run["started_at"] <= stamps[0] <= stamps[-1] <= run["finished_at"]

    # every message has an id; the chunks of a streamed message carry the id of the message they build
    messages = [e for e in envelopes if e["type"] == "message.completed"]
    ids = [m["data"]["message"]["resp_message_id"] for m in messages]
    assert all(ids) and len(set(ids)) == len(ids), ids
    chunks: dict[str, str] = {}
    for e in envelopes:
        if e["type"] == "message.delta":
            chunk = e["data"]["chunk"]
            assert chunk["resp_message_id"], chunk
            chunks[chunk["resp_message_id"]] = chunks.get(chunk["resp_message_id"], "") + chunk["content"]
    replies = {m["data"]["message"]["resp_message_id"]: m for m in messages if _purpose(m) == "work"}
    assert [m["data"]["message"]["content"] for m in replies.values()] == [FIRST, SECOND]
    assert chunks == {i: m["data"]["message"]["content"] for i, m in replies.items()}
    first_id, second_id = replies

    # the Thought is its own part, after its reply, naming it; the code is not in it
    thoughts = [(m["parent_id"], m["data"]["message"]["content"]) for m in messages if _purpose(m) == "thought"]
    assert thoughts == [
        (first_id, "I need the number of words first; I will split the sentence and count the parts."),
        (second_id, "There are 7 words. I tell the user and finish with the count."),
    ]

    # every tool call names the reply whose code made it
    calls = [
        (e["type"], e["data"]["tool_name"], e.get("parent_id")) for e in envelopes if e["type"].startswith("tool.call.")
    ]
    assert calls == [
        ("tool.call.started", "python", first_id),
        ("tool.call.completed", "python", first_id),
        ("tool.call.started", "python", second_id),
        ("tool.call.started", "system.send_message", second_id),
        ("tool.call.completed", "system.send_message", second_id),
        ("tool.call.started", "system.finish", second_id),
        ("tool.call.completed", "system.finish", second_id),
        ("tool.call.completed", "python", second_id),
    ]
    assert [
        (_purpose(m), m["data"]["message"]["content"]) for m in messages if _purpose(m) in ("message", "answer")
    ] == [
        ("message", "I counted 7 words."),
        ("answer", "7 words"),
    ]


def test_a_context_without_a_run_id_can_be_sent_twice(served: Served, model_server: OpenAIServer) -> None:
    ctx = context("How many words?")
    del ctx["run_id"]
    finish = "Thought: I can answer at once.\n```python\nsystem.finish('2 words')\n```\n"
    model_server.push(finish, finish)
    runs = [_run(served, ctx), _run(served, ctx)]
    run_ids = [{e["run_id"] for e in envelopes} for envelopes in runs]
    assert all(len(ids) == 1 for ids in run_ids)
    first, second = (ids.pop() for ids in run_ids)
    assert first != second and first.startswith("run-") and second.startswith("run-")
    assert [envelopes[-1]["type"] for envelopes in runs] == ["run.completed", "run.completed"]


def _purpose(message: dict[str, Any]) -> str:
    return str(message["data"]["message"]["provider_specific_fields"]["purpose"])
