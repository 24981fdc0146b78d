"""A2A end to end: a codeact agent served by ``codeact a2a serve`` and a codeact agent calling it.

Two real processes (plus the official A2A client for streaming and cancel): the reviewer agent
runs its blueprint on each task; the caller's blueprint names it under ``toolkits[].a2a`` and
its code calls ``await agents.reviewer(task=...)``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TaskIdParams, TaskState, TextPart

from tests.ports import free_port, wait_listening

CODEACT = str(Path(sys.executable).parent / "codeact")

REVIEWER_REPLIES = [
    "Let me count the sections of the notes.\n```python\nsections = ['features', 'fixes', 'upgrade']\n"
    "print(len(sections), 'sections')\n```",
    "```python\nsystem.finish({'verdict': 'approve', 'sections': len(sections)})\n```",
    # The task the test cancels: a long-running round.
    "This will take a while.\n```python\nimport asyncio\nawait asyncio.sleep(60)\n```",
]


def _blueprint(path: Path, agent_id: str, body: str = "") -> Path:
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\n"
        f"id: {agent_id}\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n" + body
    )
    return path


@pytest.fixture(scope="module")
def reviewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("reviewer")
    (root / "replies.yaml").write_text(json.dumps(REVIEWER_REPLIES))
    path = _blueprint(root / "agent.yaml", "release-reviewer")
    port = free_port()
    env = {**os.environ, "CODEACT_HOME": str(root / "home")}
    proc = subprocess.Popen(
        [CODEACT, "a2a", "serve", str(path), "--port", str(port), "--store", f"sqlite:///{root / 's.db'}"]
        + ["--isolation", "process"],
        cwd=root,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(proc, port, timeout=60, what="codeact a2a serve")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_an_agent_calls_a_served_agent_then_a_task_is_cancelled(tmp_path: Path, reviewer: str) -> None:
    (tmp_path / "replies.yaml").write_text(
        json.dumps(
            [
                "I'll ask the reviewer agent.\n```python\n"
                "review = await agents.reviewer(task='Review the release notes of 2.4')\nprint(review)\n```",
                "```python\nsystem.finish(f\"reviewer says {review['verdict']} ({review['sections']} sections)\")\n```",
            ]
        )
    )
    # The remote run happens inside one call of the caller's round: the round's deadline leaves room for it.
    body = (
        "sandbox: {limits: {timeoutSeconds: 150}}\n"
        f"toolkits:\n  - ref: agents\n    a2a: {{agents: {{reviewer: {json.dumps(reviewer)}}}, timeout: 120}}\n"
    )
    path = _blueprint(tmp_path / "agent.yaml", "caller", body)
    run = subprocess.run(
        [CODEACT, "run", str(path), "--input", "Is 2.4 ready?", "--json", "--store", f"sqlite:///{tmp_path / 's.db'}"]
        + ["--allow-sandbox-declaration"],
        cwd=tmp_path,
        env={**os.environ, "CODEACT_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    events = [json.loads(line) for line in run.stdout.splitlines()]
    said = [(e["type"], e.get("stdout") or e.get("text") or e.get("result") or e.get("error")) for e in events]
    said = [s for s in said if s[0] not in ("message.delta", "segment.created")]
    assert run.returncode == 0, "\n".join(map(str, said))
    assert events[-1]["type"] == "run.completed"
    assert events[-1]["answer"] == "reviewer says approve (3 sections)"
    updates = [e["text"] for e in events if e["type"] == "message.completed" and e.get("purpose") == "a2a"]
    assert any(u.startswith("[reviewer] working: round 1: ok") and "3 sections" in u for u in updates), updates

    # The official client: the card, streaming, and cancelling a running task.
    import asyncio

    asyncio.run(_cancel(reviewer))


async def _cancel(url: str) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        assert card.name == "release-reviewer" and card.capabilities.streaming
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        message = Message(role=Role.user, parts=[Part(root=TextPart(text="slow task"))], message_id=uuid.uuid4().hex)
        final: Any = None
        async for event in client.send_message(message):
            assert not isinstance(event, Message)
            task, _ = event
            if task.status.state == TaskState.working and final is None:
                final = await client.cancel_task(TaskIdParams(id=task.id))
        assert final is not None
        assert final is not None and final.status.state == TaskState.canceled
