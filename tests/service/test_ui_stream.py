"""A chat UI's client, written only from docs/runner.md ("Rendering the stream in a chat UI").

A real `codeact serve` (show_work on, as it serves) streams a run whose code prints, fails once,
sends the user a message and finishes; the client renders exactly the user-facing messages and one
`python` tool-call pair per executed round, and no codec tag (`$type`) appears anywhere.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import RUNNER
from tests.service.helpers import Served, context, read_sse


def code(body: str, prose: str) -> str:
    return f"{prose}\n```python\n{body}\n```\n"


def render(envelopes: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The docs' four rules: messages by purpose, python tool calls paired by id, the terminal envelope."""
    shown: list[str] = []
    calls: dict[str, dict[str, Any]] = {}
    for envelope in envelopes:
        data = envelope["data"]
        if envelope["type"] == "message.completed":
            message = data["message"]
            if message["provider_specific_fields"]["purpose"] in ("answer", "message"):
                shown.append(message["content"])
        elif envelope["type"] == "tool.call.started" and data["tool_name"] == "python":
            calls[data["tool_call_id"]] = {"code": data["parameters"]["code"]}
        elif envelope["type"] == "tool.call.completed" and data["tool_name"] == "python":
            calls[data["tool_call_id"]].update(result=data["result"], error=data.get("error"))
    return shown, list(calls.values())


def test_a_ui_renders_the_user_facing_messages_and_one_python_call_per_round(
    service: Served, replies: OpenAIServer
) -> None:
    replies.push(
        code("print('reading')\nmean = total / count", "I compute the average."),
        code(
            "total, count = 12, 3\nmean = total // count\nsystem.send_message(f'The average is {mean}.')\n"
            "system.finish(mean)",
            "The totals were missing; I set them.",
        ),
    )
    ctx = context("What is the average?")
    with service.client() as client:
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as response:
            assert response.status_code == 200
            raw = response.read().decode()
    assert "$type" not in raw
    envelopes = [e.data for e in read_sse(httpx.Response(200, content=raw.encode()))]
    assert envelopes[-1]["type"] == "run.completed"
    assert all(isinstance(e["at"], float) and e["at"] < 10**10 for e in envelopes)  # seconds
    shown, calls = render(envelopes)
    assert shown == ["The average is 4.", "4"]
    assert len(calls) == 2
    first, second = calls
    assert first["code"] == "print('reading')\nmean = total / count"
    assert first["result"]["status"] == "error" and first["result"]["stdout"].startswith("reading\n"), first
    assert first["error"] == "NameError: name 'total' is not defined (line 2: mean = total / count)"
    assert second["result"]["status"] == "ok" and second["error"] is None
    assert second["result"]["variables_changed"] == ["count", "mean", "total"]
    work = [e for e in envelopes if e["type"] == "message.completed"]
    assert [m["data"]["message"]["provider_specific_fields"]["purpose"] for m in work] == [
        "work",
        "work",
        "message",
        "answer",
    ]
    json.dumps(envelopes)  # plain JSON throughout
