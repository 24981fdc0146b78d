"""Load: 100 concurrent sessions through the Python API in one process on Redis complete, none failed.

Each session runs 3 rounds with a toolkit call each (the scenario that failed 28-64 of 100 runs with
"Too many connections" when the Redis client's pool was exhausted). With a deliberately small pool
(`?max_connections=4`) the same load completes too: commands wait their turn for a connection.
Slow (minutes on a loaded 2-core machine).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from codeact.engine import Agent
from codeact.toolkits import operation, toolkit
from tests.engine.openai_server import OpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.load]

SESSIONS = 100
REPLY = """Thought: I count the rounds and ask the stock.
```python
try:
    k += 1
except NameError:
    k = 1
n = await inventory.stock(sku="A-1")
if k >= 3:
    system.finish(f"{n} units after {k} rounds")
```"""
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: load-agent
toolkits:
  - ref: inventory
workflow:
  maxTurns: 5
  codeact:
    thought: inline
    finalAnswer: false  # the same code each round on purpose (a counter): run it again (docs/finishing.md)
"""


@toolkit(name="inventory", description="The shop's stock")
class Inventory:
    @operation
    async def stock(self, sku: str) -> int:
        """Units in stock.

        Args:
            sku: The article.
        """
        return 3


@pytest.mark.parametrize(
    "pool", [pytest.param("", id="default-pool"), pytest.param("&max_connections=4", id="pool-of-4")]
)
async def test_100_concurrent_sessions_in_one_process_on_redis_complete(
    tmp_path: Path, redis_url: str, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, pool: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    openai_server.push(*([REPLY] * (3 * SESSIONS)))
    store = f"{redis_url}?prefix=codeact-load:{uuid.uuid4().hex[:12]}{pool}"
    started = time.monotonic()
    async with Agent.from_blueprint(
        blueprint, toolkits=[Inventory], model="openai/test-model", base_url=openai_server.base_url, store=store
    ) as agent:
        results = await asyncio.gather(
            *(agent.invoke("Count to three.", session_id=f"load-{i}") for i in range(SESSIONS))
        )
    elapsed = time.monotonic() - started
    failed = [r.error for r in results if r.status != "completed"]
    assert failed == [], f"{len(failed)} of {SESSIONS} sessions failed, e.g. {failed[:3]}"
    assert {r.answer for r in results} == {"3 units after 3 rounds"}
    assert {r.rounds for r in results} == {3}
    print(f"{SESSIONS} concurrent sessions on Redis{pool}: {elapsed:.1f} s")  # noqa: T201 - the report's figure
