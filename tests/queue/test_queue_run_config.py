"""A queued run's config (tags, metadata, user) and context reach the worker's run (issue 26).

Real Redis, a real ``codeact worker`` process, the local OpenAI-compatible test server as every run's
model (replies as models write them): through ``submit(config=...)``, ``codeact run --queue --tag
--meta`` and ``codeact serve --queue`` (``POST /v1/runs`` with tags and metadata).
"""

from __future__ import annotations

import asyncio
import json
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

from codeact import RunConfig
from codeact.engine import CodeactError
from codeact.engine.queue import submit
from tests.engine.openai_server import OpenAIServer, serve

CODEACT = str(Path(sys.executable).parent / "codeact")
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: labelled-agent
workflow: {maxTurns: 3, codeact: {thought: 'off'}}
"""


def reply(answer: str) -> str:
    return f"The order count is known, so I answer.\n```python\norders = 3\nsystem.finish({answer!r})\n```"


@dataclass
class Worker:
    url: str
    tmp: Path
    blueprint: Path
    model: OpenAIServer
    env: dict[str, str]

    def session(self, session_id: str) -> Any:
        from codeact.engine.store import open_store

        async def read() -> Any:
            async with open_store(self.url) as store:
                return await store.get_session(session_id)

        return asyncio.run(read())


@pytest.fixture(scope="module")
def worker(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/13"
    redis.Redis.from_url(url).flushdb()
    tmp = tmp_path_factory.mktemp("labels")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    env.update({"CODEACT_HOME": str(tmp / "home"), "OPENAI_API_KEY": "sk-test"})
    argv = [CODEACT, "worker", "--queue", url, "--store", url, "--concurrency", "1", "--name", "labels-worker"]
    with serve() as model, (tmp / "worker.log").open("wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 60
        while not client.smembers("_kombu.binding.codeact"):
            assert process.poll() is None, (tmp / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        try:
            yield Worker(url=url, tmp=tmp, blueprint=blueprint, model=model, env=env)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_submit_carries_tags_metadata_and_context_to_the_workers_run(worker: Worker) -> None:
    worker.model.push(reply("3 orders"))
    config = RunConfig(tags=["orders", "eu"], metadata={"ticket": 812, "shop": {"city": "Lyon"}})
    handle = submit(
        worker.blueprint,
        "How many orders are open?",
        queue=worker.url,
        model="openai/test",
        base_url=worker.model.base_url,
        config=config,
        context={"page": "/orders", "locale": "fr-FR"},
    )
    result = handle.result(timeout=120)
    assert (result.status, result.answer) == ("completed", "3 orders")
    started = next(e for e in handle.events(follow=False) if e["type"] == "run.started")
    assert (started["tags"], started["metadata"]) == (["orders", "eu"], {"ticket": 812, "shop": {"city": "Lyon"}})
    assert len(started["trace_id"]) == 32
    meta = worker.session(result.session_id)
    assert meta.extra["tags"] == ["orders", "eu"] and meta.extra["metadata"]["ticket"] == 812
    prompt = str(worker.model.requests[-1].body["messages"])
    assert "page: /orders" in prompt and "locale: fr-FR" in prompt  # the caller's context, in the prompt
    with pytest.raises(CodeactError, match="differ"):
        submit(worker.blueprint, "x", queue=worker.url, session_id="a", config=RunConfig(thread_id="b"))
    with pytest.raises(CodeactError) as refused:
        submit(worker.blueprint, "x", queue=worker.url, context={"bad": object()})
    assert refused.value.code == "context.invalid"


def test_codeact_run_queue_takes_tag_meta_and_user(worker: Worker) -> None:
    worker.model.push(reply("done"))
    run = subprocess.run(
        [CODEACT, "run", str(worker.blueprint), "--queue", worker.url, "--json", "-i", "Count the orders."]
        + ["--model", "openai/test", "--base-url", worker.model.base_url, "--session", "cli-labels"]
        + ["--tag", "nightly", "--meta", "build=7", "--user", "ada"],
        env=worker.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    started = next(e for e in events if e["type"] == "run.started")
    assert (started["tags"], started["metadata"], started["session_id"]) == (["nightly"], {"build": 7}, "cli-labels")
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "done"
    assert worker.session("cli-labels").extra["tags"] == ["nightly"]
    bad = subprocess.run(
        [CODEACT, "run", str(worker.blueprint), "--queue", worker.url, "-i", "x", "--meta", "no-equals"],
        env=worker.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "--meta takes KEY=VALUE, not 'no-equals'" in bad.stderr


def test_serve_with_queue_passes_the_bodys_tags_and_metadata_to_the_worker(worker: Worker) -> None:
    from tests.service.helpers import context, start_server, stop_server

    worker.model.push(reply("served"))
    served = start_server(
        worker.tmp, [worker.blueprint], "--store", worker.url, "--queue", worker.url,
        "--model", "openai/test", "--base-url", worker.model.base_url,
    )  # fmt: skip
    try:
        ctx = context("How many orders?")
        body = {"runner_id": "labelled-agent", "context": ctx, "tags": ["api"], "metadata": {"caller": "crm"}}
        with served.client() as client:
            started = client.post("/v1/runs", json=body)
            assert started.status_code == 200, started.text
            run = started.json()["run"]
            assert run["status"] == "completed", started.json()["results"][-1]
            assert (run["tags"], run["metadata"]) == (["api"], {"caller": "crm"})
            session = client.get(f"/v1/sessions/{run['session_id']}").json()["session"]
            bad = client.post("/v1/runs", json={**body, "context": context("again"), "tags": [1]})
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
    assert session["extra"]["tags"] == ["api"] and session["extra"]["metadata"] == {"caller": "crm"}
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "service.invalid_config"
