"""A queued run behaves as a direct one: the run context's locale and time zone, and ``platform_api``.

Two `codeact serve` processes serve the same blueprint (it declares ``platform_api: [message.edit]``):
one runs in the server, one hands its runs to a real ``codeact worker`` through a real Redis
(``--queue``). The local OpenAI-compatible test server is every run's model. The same context goes
to both; the prompt the model received, ``system.get_current_time()``'s default zone and the
``action.requested`` results must be the same, and a malformed time zone fails both the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer, serve
from tests.service.helpers import SSE, Served, context, start_server, stop_server, stream_run
from tests.service.run_api import code

REPO = Path(__file__).resolve().parents[2]
CODEACT = str(Path(sys.executable).parent / "codeact")
RUNNER = "parity-agent"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
description: Edits a message and tells the time.
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
extensions:
  runner:
    permissions:
      platform_api: [message.edit]
"""
WORK = """\
print(platform_api.request_action(action="message.edit", target={"message_id": "m-1"}, payload={"text": "Edited."}))
system.finish(system.get_current_time() + " | " + system.get_current_time(tz="UTC"))"""


@dataclass
class Paths:
    direct: Served
    queued: Served
    model: OpenAIServer


@pytest.fixture(scope="module")
def paths(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Paths]:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/14"
    redis.Redis.from_url(url).flushdb()
    tmp = tmp_path_factory.mktemp("parity")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    env.update({"CODEACT_HOME": str(tmp / "home"), "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(REPO)})
    argv = [CODEACT, "worker", "--queue", url, "--store", url, "--concurrency", "1", "--name", "parity-worker"]
    with serve() as model, (tmp / "worker.log").open("wb") as log:
        worker = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 60
        while not client.smembers("_kombu.binding.codeact"):
            assert worker.poll() is None, (tmp / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        common = ("--model", "openai/test-model", "--base-url", model.base_url)
        (tmp / "direct").mkdir()
        (tmp / "queued").mkdir()
        direct = start_server(tmp / "direct", [blueprint], *common, env={"PYTHONPATH": str(REPO)})
        queued = start_server(
            tmp / "queued", [blueprint], *common, "--store", url, "--queue", url, env={"PYTHONPATH": str(REPO)}
        )
        try:
            yield Paths(direct=direct, queued=queued, model=model)
        finally:
            assert stop_server(direct) == 0, direct.stderr.read_text()
            assert stop_server(queued) == 0, queued.stderr.read_text()
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


@dataclass(frozen=True)
class Seen:
    """What one run showed: its results' types, the actions it requested, its answer, the model's prompt."""

    types: list[str]
    actions: list[dict[str, Any]]
    answer: str
    prompt: str


def run(served: Served, model: OpenAIServer, runtime: dict[str, Any], reply: str | None) -> tuple[list[SSE], str]:
    if reply is not None:
        model.push(reply)
    asked = len(model.requests)
    ctx = context("Edit my last message and tell me the time.")
    ctx["runtime"] = runtime
    with served.client() as client:
        events = stream_run(client, RUNNER, ctx)
    prompt = "\n".join(str(m.get("content")) for request in model.requests[asked:] for m in request.body["messages"])
    return events, prompt


def seen(events: list[SSE], prompt: str) -> Seen:
    assert events[-1].event == "run.completed", events[-1].data
    done = [e.data["data"] for e in events if e.event == "message.completed"]
    return Seen(
        types=[str(e.event) for e in events],
        actions=[e.data["data"] for e in events if e.event == "action.requested"],
        answer=done[-1]["message"]["content"],
        prompt=prompt,
    )


def test_a_queued_run_sees_the_locale_time_zone_and_platform_api_as_a_direct_run(paths: Paths) -> None:
    runtime = {"locale": "fr_FR", "timezone": "Asia/Tokyo"}
    direct = seen(*run(paths.direct, paths.model, runtime, code(WORK, "I edit it and read the clock.")))
    queued = seen(*run(paths.queued, paths.model, runtime, code(WORK, "I edit it and read the clock.")))
    for path in (direct, queued):
        assert "locale: fr_FR\ntimezone: Asia/Tokyo" in path.prompt  # the run's Context segment
        assert "class platform_api:" in path.prompt  # the toolkit, as the model sees it
        local, utc = path.answer.split(" | ")
        assert local.endswith("+09:00") and utc.endswith("+00:00")  # the default zone is the context's
    edited = {"action": "message.edit", "target": {"message_id": "m-1"}, "payload": {"text": "Edited."}}
    assert queued.actions == direct.actions == [edited]
    # the request's result is followed by its action.requested, on both paths
    for path in (direct, queued):
        assert path.types[path.types.index("action.requested") - 1] == "tool.call.completed"


def test_a_malformed_time_zone_fails_a_queued_run_as_a_direct_one(paths: Paths) -> None:
    runtime = {"timezone": "Mars/Olympus_Mons"}
    asked = len(paths.model.requests)
    failed = [run(served, paths.model, runtime, None)[0] for served in (paths.direct, paths.queued)]
    assert len(paths.model.requests) == asked  # the model was never asked
    direct, queued = ([e.data["data"] for e in events if e.event == "run.failed"] for events in failed)
    refused = {
        "error": "[context.invalid] runtime.timezone 'Mars/Olympus_Mons' is not an IANA time zone: send a name "
        "like 'Europe/Paris' or 'Asia/Shanghai', or leave it out",
        "code": "runner.invalid_context",
        "retryable": False,
    }
    assert queued == direct == [refused]
