"""The Python API: ``Agent.from_blueprint`` through the local OpenAI-compatible server and real stores.

The example of docs/python-api.md runs as written (its code blocks are extracted from the file).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from codeact import engine
from codeact.engine import Agent, CodeactError, RunResult
from codeact.engine.store import open_store
from codeact.toolkits import ToolkitRegistry, operation, toolkit
from tests.engine.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "python-api.md"
FINISH_A1 = (
    'Thought: I ask the inventory.\n```python\nn = await inventory.stock(sku="A-1")\nsystem.finish(f"{n} units")\n```'
)
FINISH_B2 = (
    'The same for B-2.\n```python\nm = await inventory.stock(sku="B-2")\nsystem.finish(f"{m} units (A-1: {n})")\n```'
)


def blocks(text: str, lang: str) -> list[str]:
    """The fenced blocks of ``lang`` (a block whose info string says ``notest`` is left out)."""
    found = re.finditer(r"^```(\w+)([^\n]*)\n(.*?)^```", text, re.M | re.S)
    return [m.group(3) for m in found if m.group(1) == lang and "notest" not in m.group(2)]


@toolkit(name="inventory", description="The shop's stock")
class Inventory:
    @operation
    async def stock(self, sku: str) -> int:
        """Units in stock.

        Args:
            sku: The article.
        """
        return {"A-1": 3, "B-2": 0}.get(sku, 0)


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(blocks(DOC.read_text(), "yaml")[0])
    return path


@pytest.fixture(autouse=True)
def model_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def test_the_documented_example_runs_as_written(tmp_path: Path, openai_server: OpenAIServer, agent_file: Path) -> None:
    openai_server.push(FINISH_A1, FINISH_B2)
    script = tmp_path / "example.py"
    script.write_text(blocks(DOC.read_text(), "python")[0])
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["completed 3 units", "completed 0 units (A-1: 3)"]
    assert (tmp_path / "sessions.db").exists()


def test_run_sync_twice_with_redis(redis_url: str, openai_server: OpenAIServer, agent_file: Path) -> None:
    openai_server.push(FINISH_A1, FINISH_B2, FINISH_A1)
    url = f"{redis_url}?prefix=pyapi-{uuid.uuid4().hex[:8]}"
    with Agent.from_blueprint(
        agent_file, toolkits=[Inventory()], model="openai/test", base_url=openai_server.base_url, store=url
    ) as agent:
        first = agent.run_sync("How many A-1?")
        second = agent.run_sync("And B-2?", session_id=first.session_id)
        third = agent.run_sync("A-1 again")
    assert (first.status, first.answer) == ("completed", "3 units")
    assert (second.status, second.answer, second.session_id) == ("completed", "0 units (A-1: 3)", first.session_id)
    assert third.status == "completed" and third.session_id != first.session_id
    assert agent._owned == ()  # closed


def test_run_sync_twice_with_sqlite(tmp_path: Path, openai_server: OpenAIServer, agent_file: Path) -> None:
    openai_server.push(FINISH_A1, FINISH_A1)
    agent = Agent.from_blueprint(
        str(agent_file),
        toolkits=[Inventory],
        model="openai/test",
        base_url=openai_server.base_url,
        store=f"sqlite:///{tmp_path / 's.db'}",
    )
    try:
        results = [agent.run_sync("How many A-1?") for _ in range(2)]
    finally:
        agent.close()
    assert [r.answer for r in results] == ["3 units", "3 units"]
    assert all(isinstance(r, RunResult) for r in results)


async def test_async_with_streams_events_and_closes(
    tmp_path: Path, openai_server: OpenAIServer, agent_file: Path, redis_url: str
) -> None:
    openai_server.push(FINISH_A1)
    url = f"{redis_url}?prefix=pyapi-{uuid.uuid4().hex[:8]}"
    async with Agent.from_blueprint(
        agent_file,
        toolkits=["tests.engine.test_python_api:Inventory"],
        model="openai/test",
        base_url=openai_server.base_url,
        store=url,
    ) as agent:
        kinds = [event.type async for event in agent.run("How many A-1?")]
        with pytest.raises(CodeactError, match=r"inside a running event loop: use `await agent.invoke"):
            agent.run_sync("no")
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert "tool.call.completed" in kinds


async def test_a_store_object_is_left_open(tmp_path: Path, openai_server: OpenAIServer, agent_file: Path) -> None:
    openai_server.push(FINISH_A1)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    async with Agent.from_blueprint(
        agent_file, toolkits=[Inventory], model="openai/test", base_url=openai_server.base_url, store=store
    ) as agent:
        result = await agent.invoke("How many A-1?")
    assert result.answer == "3 units"
    assert [s.session_id for s in await store.list_sessions()] == [result.session_id]
    await store.close()


def test_system_toolkit_is_added_to_a_registry_without_it(
    tmp_path: Path, openai_server: OpenAIServer, agent_file: Path
) -> None:
    openai_server.push(FINISH_A1)
    registry = ToolkitRegistry([Inventory])
    with Agent.from_blueprint(
        agent_file,
        toolkits=registry,
        model="openai/test",
        base_url=openai_server.base_url,
        store=f"sqlite:///{tmp_path / 's.db'}",
    ) as agent:
        assert agent.run_sync("How many A-1?").answer == "3 units"
        assert "system" in agent.registry
    assert registry.names() == ["inventory"]  # the caller's registry is not changed


def test_errors_name_what_failed(tmp_path: Path, agent_file: Path) -> None:
    with pytest.raises(engine.BlueprintError, match="nope.yaml"):
        Agent.from_blueprint(tmp_path / "nope.yaml", model="openai/test")
    with pytest.raises(engine.ToolkitError, match="MODULE:OBJECT"):
        Agent.from_blueprint(agent_file, toolkits=["not-a-ref"], model="openai/test")


def test_public_names_are_documented() -> None:
    names = [n for n in engine.__all__ if not n.endswith("Error")]
    assert names == ["Agent", "Event", "RunResult"]
    for name in ("from_blueprint", "run", "invoke", "run_sync", "aclose", "close"):
        assert getattr(Agent, name).__doc__, name
    assert asyncio.iscoroutinefunction(Agent.aclose)


_IN_A_LOOP = """
import asyncio
from codeact import Agent

async def main():
    with Agent.from_blueprint({blueprint!r}, store={store!r}) as agent:
        agent.run_sync("hi")

asyncio.run(main())
"""


def test_run_sync_in_a_running_loop_is_one_clear_error_and_nothing_after(tmp_path: Path) -> None:
    # Jupyter and async apps run a loop: run_sync refuses with the fix, and the `with` block's close
    # adds no second traceback (asyncio.run inside a loop) and no "coroutine ... was never awaited".
    (tmp_path / "replies.yaml").write_text('- |\n  system.finish("hi")\n')
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(
        "version: codeact.agent/v1\nid: loop\nname: Loop\n"
        "model:\n  provider: scripted\n  model: scripted/replies.yaml\n"
        "instructions:\n  developer: Answer.\n"
        "toolkits:\n  - ref: system\n"
        "workflow:\n  mode: codeact\n"
    )
    script = tmp_path / "notebook.py"
    script.write_text(_IN_A_LOOP.format(blueprint=str(blueprint), store=f"sqlite:///{tmp_path / 's.db'}"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "always"}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.count("Traceback") == 1, out.stderr
    last = out.stderr.rstrip().splitlines()[-1]
    assert last.endswith(
        "CodeactError: Agent.run_sync() was called inside a running event loop: "
        "use `await agent.invoke(...)` (or iterate `agent.run(...)`) in async code"
    )
    assert "never awaited" not in out.stderr and "cannot be called from a running event loop" not in out.stderr
