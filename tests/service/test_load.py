"""Load: 200 concurrent runs against one real `codeact serve` on Redis complete, none failed.

Each run makes one model call whose code calls a toolkit operation and finishes, so every run opens a
session, takes its lock, records a round and updates its status on the shared Redis store. With a
deliberately small connection pool (`?max_connections=4`) the same load completes too: commands wait
their turn for a connection instead of failing the run. Slow (minutes on a loaded 2-core machine).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO
from tests.service.helpers import ADMIN, context, start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.load]

RUNS = 200
LOAD_BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: load-agent
workflow: {maxTurns: 3, codeact: {thought: 'off'}}
toolkits:
  - ref: system
  - ref: slow
"""
REPLY = "I ask the service, then finish.\n```python\nanswer = await slow.ping()\nsystem.finish(answer)\n```\n"


async def _run_all(url: str, runs: int) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=900, limits=limits) as client:

        async def one() -> dict[str, Any]:
            answer = await client.post("/v1/runs", json={"runner_id": "load-agent", "context": context("Ping.")})
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            return body

        return await asyncio.gather(*(one() for _ in range(runs)))


@pytest.mark.parametrize(
    "pool", [pytest.param("", id="default-pool"), pytest.param("&max_connections=4", id="pool-of-4")]
)
def test_200_concurrent_runs_on_redis_complete(
    tmp_path: Path, redis_url: str, model_server: OpenAIServer, pool: str
) -> None:
    blueprint = tmp_path / "load.yaml"
    blueprint.write_text(LOAD_BLUEPRINT)
    store = f"{redis_url}?prefix=codeact-load:{uuid.uuid4().hex[:12]}{pool}"
    served = start_server(
        tmp_path,
        [blueprint],
        "--store", store,
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    model_server.push(*([REPLY] * RUNS))
    try:
        started = time.monotonic()
        bodies = asyncio.run(_run_all(served.url, RUNS))
        elapsed = time.monotonic() - started
    finally:
        code = stop_server(served)
    failed = [b["results"][-1]["data"] for b in bodies if b["run"]["status"] != "completed"]
    assert failed == [], f"{len(failed)} of {RUNS} runs failed, e.g. {failed[:3]}"
    assert [b["results"][-1]["type"] for b in bodies] == ["run.completed"] * RUNS
    assert model_server.pending == 0
    assert code == 0, served.stderr.read_text()[-3000:]
    print(f"{RUNS} concurrent runs on Redis{pool or ''}: {elapsed:.1f} s")  # noqa: T201 - the figure of the report
